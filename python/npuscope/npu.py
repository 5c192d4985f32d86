"""``npuscope.npu``: the ``torch.npu`` / ``torch.cuda`` API of the emulated device.

Devices are named by index, "npu:N" strings or torch.device objects; None means the current
device. The environment variables of docs/device.md (ASCEND_RT_VISIBLE_DEVICES,
ASCEND_DEVICE_ID, NPUSCOPE_NPU_MEMORY, NPUSCOPE_OVERFLOW_MODE, ...) are read by the same C++
runtime as in the CLI, when the device is first used.
"""
import torch

from . import _C
from ._devices import NPU_TYPE, map_device

_rt = _C.npu


def _index(device):
    if device is None:
        return -1
    if isinstance(device, int):
        return device
    d = map_device(device)
    if isinstance(d, str):
        d = torch.device(d)
    if d.type != NPU_TYPE:
        raise ValueError(f"device '{device}': expected an npu (npu:N)")
    return -1 if d.index is None else d.index


def is_available():
    """True when the device environment is valid and at least one npu is visible."""
    return _rt.environment_error() == "" and _rt.device_count() > 0


def device_count():
    return _rt.device_count()


def current_device():
    return _rt.current_device()


def set_device(device):
    _rt.set_device(_index(device) if _index(device) >= 0 else _rt.current_device())


def get_device_name(device=None):
    i = _index(device)
    return f"npuscope emulated Ascend NPU ({_rt.device_name(i if i >= 0 else _rt.current_device())})"


def synchronize(device=None):
    _rt.synchronize(_index(device))


def memory_stats(device=None):
    return dict(_rt.memory_stats(_index(device)))


def memory_allocated(device=None):
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None):
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None):
    _rt.reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device=None):
    reset_peak_memory_stats(device)


def empty_cache():
    for i in range(_rt.device_count()):
        _rt.empty_cache(i)


def get_float_status(device=None):
    """torch_npu's npu_get_float_status: True when an op overflowed since the last clear (needs
    float-status tracking, which amp's float_status check turns on)."""
    return _rt.get_float_status(_index(device))


def clear_float_status(device=None):
    _rt.clear_float_status(_index(device))


def get_overflow_mode():
    """"inf_nan" (Ascend 910B: overflows give inf/NaN) or "saturation" (910A: fp16 clamps to
    +-65504 and only the float-status register sees it)."""
    return _rt.overflow_mode()


def set_overflow_mode(mode):
    _rt.set_overflow_mode(mode)


def float_status_tracking():
    return _rt.float_status_tracking()


def set_float_status_tracking(on):
    _rt.set_float_status_tracking(bool(on))


def manual_seed(seed):
    """npu random numbers come from torch's CPU generator (the device computes on the host)."""
    torch.random.default_generator.manual_seed(int(seed))


def manual_seed_all(seed):
    manual_seed(seed)


def is_initialized():
    return True


class device:  # noqa: N801  (torch.cuda.device's name)
    """Context manager that makes ``idx`` the current npu, as torch.cuda.device does."""

    def __init__(self, idx):
        self.idx = _index(idx)
        self.prev = None

    def __enter__(self):
        self.prev = _rt.current_device()
        if self.idx >= 0:
            _rt.set_device(self.idx)

    def __exit__(self, *exc):
        _rt.set_device(self.prev)
        return False
