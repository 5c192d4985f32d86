"""npuscope: a user's own PyTorch script on npuscope's emulated Ascend-style NPU.

``import npuscope`` loads the device into the running torch (Debian's python3-torch 1.13, the
same libtorch the C++ libraries link) and is all a script needs::

    import torch, npuscope
    x = torch.randn(8, 8).to("npu:0")            # "npu" strings work where npuscope maps them
    model = MyNet().npu()
    from npuscope import amp, optimizers
    opt = optimizers.NpuFusedAdam(model.parameters(), lr=1e-3)
    model, opt = amp.initialize(model, opt, opt_level="O2")
    with npuscope.profile(db="run.db") as prof:
        ...

torch itself still calls the device ``privateuseone`` (1.13 cannot rename PrivateUse1): that is
what ``str(tensor.device)`` prints; npuscope's own messages and reports say ``npu:N``.
"""
import torch as _torch  # the extension's libtorch symbols come from here

from . import _C  # noqa: F401  (loads libnpuscope_device.so: the device registers itself)
from . import _devices
from ._devices import device, format_device, is_npu
from . import npu
from . import amp
from . import optimizers
from .profiler import profile, record_function, dump, Profile
from . import distributed
from . import parallel
from . import msprobe

__version__ = "0.1.0"

_devices.install()
distributed.register()
distributed.refuse_data_parallel()

__all__ = ["device", "format_device", "is_npu", "npu", "amp", "optimizers", "distributed", "parallel", "profile", "Profile",
           "record_function", "dump", "msprobe"]
