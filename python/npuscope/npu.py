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


def memory_snapshot(device=None):
    """The device's live blocks in allocation order, each a dict: address, size (what the pool
    counts), requested_size, category (docs/memory.md: tagged ones; a recording infers the rest
    when it writes them) and owner."""
    return list(_rt.memory_snapshot(_index(device)))


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


def get_rng_state(device=None):
    """The generator state npu random numbers come from (torch's CPU generator, see manual_seed)."""
    return torch.random.default_generator.get_state()


def set_rng_state(new_state, device=None):
    torch.random.default_generator.set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(max(1, device_count()))]


def set_rng_state_all(new_states):
    for state in new_states[:1]:
        set_rng_state(state)


def initial_seed():
    return torch.random.default_generator.initial_seed()


def seed():
    torch.random.default_generator.seed()


def seed_all():
    seed()


# ---- streams and events ------------------------------------------------------------------------
# The emulated device runs an op when the host dispatches it: each npu has one stream, and every
# Stream object of a device stands for it. Waiting between streams is therefore already true;
# synchronizing waits for the device (npuscope's modeled stream included).

class Stream:
    """torch.npu.Stream: the device's one stream (see above). ``priority`` is kept, not used."""

    def __init__(self, device=None, priority=0, **kwargs):
        i = _index(device)
        self.device_index = i if i >= 0 else _rt.current_device()
        self.priority = priority

    @property
    def device(self):
        return torch.device(NPU_TYPE, self.device_index)

    def query(self):
        return True

    def synchronize(self):
        _rt.synchronize(self.device_index)

    def wait_event(self, event):
        pass

    def wait_stream(self, stream):
        pass

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and other.device_index == self.device_index

    def __hash__(self):
        return hash(("npu stream", self.device_index))

    def __repr__(self):
        return f"<torch.npu.Stream device=npu:{self.device_index} (npuscope: the device's one stream)>"


class Event:
    """torch.npu.Event: records the host time at which everything launched before it is done
    (the device is synchronized at record()); ``elapsed_time`` is in milliseconds."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.enable_timing = enable_timing
        self._ns = None

    def record(self, stream=None):
        import time
        _rt.synchronize(stream.device_index if stream is not None else -1)
        self._ns = time.perf_counter_ns()

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def synchronize(self):
        pass

    def elapsed_time(self, end_event):
        if self._ns is None or end_event._ns is None:
            raise RuntimeError("Event.elapsed_time: both events must have been recorded")
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Event.elapsed_time: both events need enable_timing=True")
        return (end_event._ns - self._ns) / 1e6


def current_stream(device=None):
    return Stream(device)


def default_stream(device=None):
    return Stream(device)


class stream:  # noqa: N801  (torch.cuda.stream's name)
    """Context manager selecting a stream: the device's one stream, so it changes nothing."""

    def __init__(self, s):
        self.stream = s

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False


def set_stream(s):
    pass


# ---- torch_npu's run-time options --------------------------------------------------------------
# Accepted and kept (``get_options()``): they tune a real card's compiler and runtime, which the
# emulator does not have. npuscope.profile writes them into the run's options.
_options = {}


def set_compile_mode(jit_compile=False):
    _options["jit_compile"] = bool(jit_compile)


def set_option(option):
    if not isinstance(option, dict):
        raise TypeError(f"set_option: expected a dict of option names to values, got {type(option).__name__}")
    _options.update({str(k): v for k, v in option.items()})


def get_options():
    """What set_compile_mode / set_option / config were given, by name."""
    return dict(_options)


class _Config:
    """torch.npu.config: ``allow_internal_format`` (private formats such as NC1HWC0 / FRACTAL_NZ
    for weights) is kept as an option; formats are metadata on the emulator (torch_npu.get_npu_format)."""

    @property
    def allow_internal_format(self):
        return _options.get("allow_internal_format", False)

    @allow_internal_format.setter
    def allow_internal_format(self, value):
        _options["allow_internal_format"] = bool(value)


config = _Config()
