"""apex on npuscope (npuscope-emulation): Ascend's apex (and NVIDIA's names) mapped onto npuscope.

* ``apex.amp`` is npuscope.amp (initialize O0-O3, scale_loss, static/dynamic loss scaling,
  combine_grad, master_params, state_dict);
* ``apex.optimizers``: Ascend's NpuFused* and NVIDIA's FusedAdam / FusedSGD / FusedLAMB, all
  npuscope's fused optimizers;
* ``apex.parallel``: DistributedDataParallel, SyncBatchNorm, convert_syncbn_model (hccl).

A real apex later on sys.path is used instead (one line says so). See docs/python.md.
"""
import sys as _sys

import _npuscope_ascend

_real = _npuscope_ascend.real_package("apex", __file__)
if _real is not None:
    _npuscope_ascend.use_real(_real, "apex")
else:
    from npuscope import amp
    _sys.modules["apex.amp"] = amp
    from . import optimizers  # noqa: F401
    from . import parallel  # noqa: F401

    __version__ = "0.1+npuscope"
