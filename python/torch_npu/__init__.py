"""torch_npu on npuscope (npuscope-emulation): Ascend's PyTorch plugin, mapped onto npuscope's
emulated npu so that a script written for a card runs here unchanged::

    import torch, torch_npu
    torch.npu.set_device("npu:0")
    y, rstd = torch_npu.npu_rms_norm(x.npu(), gamma.npu())

``import torch_npu`` loads npuscope (the device registers itself), installs ``torch.npu`` (the
attribute and ``sys.modules["torch.npu"]``; ``torch_npu.npu`` is the same module) and provides
the fused operators scripts use most, each one op recorded under torch_npu's name (the C++
kernels in device/aten/npu_fused_ops.cpp). Any other ``torch_npu.npu_*`` raises an error naming
it as not emulated. A real torch_npu later on sys.path is used instead (one line says so).
See docs/python.md for what is provided and what is not.
"""
import sys as _sys

import _npuscope_ascend

_real = _npuscope_ascend.real_package("torch_npu", __file__)
if _real is not None:
    _npuscope_ascend.use_real(_real, "torch_npu")
else:
    import torch as _torch

    import npuscope as _npuscope
    from . import npu
    from . import profiler
    from ._ops import (npu_confusion_transpose, npu_rms_norm, npu_rotary_mul, npu_fusion_attention, npu_swiglu,
                       fast_gelu, npu_fast_gelu, npu_scaled_masked_softmax, npu_format_cast, npu_format_cast_,
                       get_npu_format, EMULATED_OPS, not_emulated)

    __version__ = "1.13.1+npuscope" + _npuscope.__version__  # torch_npu's version follows torch's

    _npuscope.amp.route_torch_autocast("npu")  # torch.autocast(device_type="npu")
    _npuscope._devices.enable_torch_device_spelling()  # torch.device("npu:0")
    _torch.npu = npu
    _sys.modules["torch.npu"] = npu
    _sys.modules.setdefault("torch_npu.npu", npu)

    def __getattr__(name):
        if name.startswith("npu_"):
            raise not_emulated(name)
        raise AttributeError(f"module 'torch_npu' has no attribute '{name}' (npuscope's torch_npu: see docs/python.md)")
