"""Device strings: "npu" / "npu:N" (and, after ``npuscope.transfer_to_npu``, "cuda" / "cuda:N")
accepted where a user writes a device.

torch 1.13 has no ``rename_privateuse1_backend``: its parser knows only ``privateuseone``, and
``torch.device`` is a C type that cannot learn a new name. So npuscope maps the spellings itself
at the entry points scripts use (the list below, in ``install``); a spelling it does not see
(``torch.device("npu")`` itself, a device string inside a C++ extension of someone else's) still
fails, and ``npuscope.device("npu:0")`` gives the torch.device to use there.
"""
import functools
import threading

import torch

from . import _C

NPU_TYPE = "privateuseone"
_state = {"cuda": False}  # transfer_to_npu maps "cuda" spellings too


def _index_of(text, prefix):
    rest = text[len(prefix):]
    if rest == "":
        return None
    if not rest.startswith(":") or not rest[1:].isdigit():
        raise RuntimeError(f"device '{text}': expected '{prefix}' or '{prefix}:N'")
    return int(rest[1:])


def _npu_device(index):
    if index is None:
        index = _C.npu.current_device()
    count = _C.npu.device_count()
    if index >= count:
        raise RuntimeError(f"device 'npu:{index}': this process sees {count} npu device(s) (npu:0..npu:{count - 1}; "
                           "see ASCEND_RT_VISIBLE_DEVICES)")
    return torch.device(NPU_TYPE, index)


def map_device(d):
    """The device torch understands for ``d``: "npu[:N]" (and "cuda[:N]" once transfer_to_npu is
    imported) become ``privateuseone:N``; anything else is returned unchanged."""
    if isinstance(d, str):
        text = d.strip()
        if text == "npu" or text.startswith("npu:"):
            return _npu_device(_index_of(text, "npu"))
        if _state["cuda"] and (text == "cuda" or text.startswith("cuda:")):
            return _npu_device(_index_of(text, "cuda"))
        return d
    if _state["cuda"] and isinstance(d, torch.device) and d.type == "cuda":
        return _npu_device(d.index)
    return d


def device(spec="npu", index=None):
    """A torch.device for an npu: ``device("npu:1")``, ``device("npu", 1)``, ``device(1)``."""
    if isinstance(spec, int):
        return _npu_device(spec)
    if index is not None:
        spec = f"{spec}:{index}"
    mapped = map_device(spec)
    return mapped if isinstance(mapped, torch.device) else torch.device(mapped)


def format_device(d):
    """"npu:0" for an npu device, torch's own name otherwise."""
    d = d if isinstance(d, torch.device) else torch.device(map_device(d))
    if d.type == NPU_TYPE:
        return f"npu:{d.index if d.index is not None else _C.npu.current_device()}"
    return str(d)


def is_npu(t):
    return t.device.type == NPU_TYPE


def _map_kwargs(kwargs):
    d = kwargs.get("device")
    if d is not None:
        kwargs["device"] = map_device(d)


def _wrap_device_kwarg(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _map_kwargs(kwargs)
        return fn(*args, **kwargs)
    wrapper._npuscope_wrapped = fn
    return wrapper


def _wrap_to(fn):
    # tensor.to(device, ...), module.to(device, ...): the device may be the first positional.
    @functools.wraps(fn)
    def to(self, *args, **kwargs):
        if args and isinstance(args[0], (str, torch.device)):
            args = (map_device(args[0]),) + args[1:]
        _map_kwargs(kwargs)
        return fn(self, *args, **kwargs)
    to._npuscope_wrapped = fn
    return to


_FACTORIES = ["tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm",
              "arange", "range", "linspace", "logspace", "eye", "empty_strided", "zeros_like", "ones_like",
              "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "normal", "tril_indices",
              "triu_indices", "scalar_tensor", "from_numpy"]
_TENSOR_METHODS = ["new_tensor", "new_zeros", "new_ones", "new_empty", "new_full"]


def _tensor_npu(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
    """tensor.npu(): a copy on the current (or the given) npu, as tensor.cuda() does."""
    target = _npu_device(None) if device is None else (
        _npu_device(device) if isinstance(device, int) else map_device(device))
    return self.to(target, non_blocking=non_blocking, memory_format=memory_format)


def _module_npu(self, device=None):
    """module.npu(): every parameter and buffer to the current (or the given) npu."""
    target = _npu_device(None) if device is None else (
        _npu_device(device) if isinstance(device, int) else map_device(device))
    return self.to(target)


_loading = threading.local()  # the map_location of the torch.load in progress


def _load_target(index):
    """Where torch.load's map_location puts a tensor saved from npu:index (None: leave on CPU)."""
    where = getattr(_loading, "map_location", None)
    saved = f"npu:{index}"
    if where is None:
        return torch.device(NPU_TYPE, index)
    if isinstance(where, dict):
        where = where.get(saved, where.get("privateuseone:%d" % index, saved))
    if callable(where):
        probe = torch.empty(0)
        out = where(probe.storage(), saved)
        if out is None:
            return torch.device(NPU_TYPE, index)
        return None if out is probe.storage() or getattr(out, "device", None) == torch.device("cpu") else \
            torch.device(NPU_TYPE, index)
    target = map_device(where)
    target = target if isinstance(target, torch.device) else torch.device(target)
    return None if target.type == "cpu" else target


def _rebuild_npu_tensor(cpu, index, requires_grad):
    """Unpickling an npu tensor: its CPU copy back onto npu:index, or where torch.load's
    map_location says (npuscope must be imported to load such a file, as torch_npu must be for
    files of real NPUs)."""
    target = _load_target(index)
    t = cpu if target is None else cpu.to(target)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _wrap_load(original):
    @functools.wraps(original)
    def load(f, map_location=None, *args, **kwargs):
        prev = getattr(_loading, "map_location", None)
        _loading.map_location = map_location
        try:
            return original(f, map_location, *args, **kwargs)
        finally:
            _loading.map_location = prev
    return load


def _wrap_reduce_ex(original):
    # torch 1.13 pickles a tensor through its storage, which it cannot create for privateuseone:
    # npu tensors are saved as their CPU copy plus the npu index (torch.save, pickle, deepcopy).
    @functools.wraps(original)
    def __reduce_ex__(self, proto):
        if self.device.type == NPU_TYPE and type(self) is torch.Tensor:
            return (_rebuild_npu_tensor, (self.detach().cpu(), self.device.index, self.requires_grad))
        return original(self, proto)
    return __reduce_ex__


def _wrap_deepcopy(original):
    @functools.wraps(original)
    def __deepcopy__(self, memo):
        if self.device.type != NPU_TYPE or type(self) is not torch.Tensor:
            return original(self, memo)
        if id(self) in memo:
            return memo[id(self)]
        with torch.no_grad():
            new = self.clone()
        new.requires_grad_(self.requires_grad)
        if self.grad is not None:
            new.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = new
        return new
    return __deepcopy__


def _wrap_tensor_str(original):
    # torch prints through float64, which the npu refuses: npu tensors print from their CPU copy,
    # and npuscope names the device as a person reads it: device='npu:0'.
    @functools.wraps(original)
    def _str(self, *, tensor_contents=None):
        if self.device.type != NPU_TYPE:
            return original(self, tensor_contents=tensor_contents)
        with torch.no_grad():
            text = original(self.detach().cpu(), tensor_contents=tensor_contents)
        suffix = [f"device='npu:{self.device.index}'"]
        if self.grad_fn is not None:
            suffix.append(f"grad_fn=<{type(self.grad_fn).__name__}>")
        elif self.requires_grad:
            suffix.append("requires_grad=True")
        return text[:-1] + ", " + ", ".join(suffix) + ")"
    return _str


def install():
    """Wraps torch's entry points once (idempotent)."""
    if getattr(torch, "_npuscope_devices_installed", False):
        return
    from torch.jit import _builtins
    for name in _FACTORIES:
        fn = getattr(torch, name, None)
        if fn is not None and name != "from_numpy":
            wrapper = _wrap_device_kwarg(fn)
            # TorchScript resolves torch.zeros & co. by identity: the wrapper stands for the same op.
            op = _builtins._find_builtin(fn)
            if op is not None:
                _builtins._register_builtin(wrapper, op)
            setattr(torch, name, wrapper)
    for name in _TENSOR_METHODS:
        setattr(torch.Tensor, name, _wrap_device_kwarg(getattr(torch.Tensor, name)))
    torch.Tensor.to = _wrap_to(torch.Tensor.to)
    torch.nn.Module.to = _wrap_to(torch.nn.Module.to)
    torch.Tensor.npu = _tensor_npu
    torch.Tensor.is_npu = property(is_npu)
    torch.nn.Module.npu = _module_npu
    torch.Tensor.__reduce_ex__ = _wrap_reduce_ex(torch.Tensor.__reduce_ex__)
    torch.Tensor.__deepcopy__ = _wrap_deepcopy(torch.Tensor.__deepcopy__)
    torch._tensor_str._str = _wrap_tensor_str(torch._tensor_str._str)
    torch.load = _wrap_load(torch.load)
    torch._npuscope_devices_installed = True


def enable_cuda_spellings():
    """transfer_to_npu: "cuda" spellings mean the npu from now on."""
    _state["cuda"] = True


_TorchDevice = torch.device  # the C type


class _DeviceMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _TorchDevice)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, _TorchDevice)


class _Device(metaclass=_DeviceMeta):
    """``torch.device`` after ``import torch_npu``: makes torch's own device objects, with "npu"
    spellings mapped (``torch.device("npu:0")``, ``torch.device("npu", 1)``); isinstance checks
    against ``torch.device`` still hold. ``type(d) is torch.device`` does not, and TorchScript
    does not know this name: scripts that compile with torch.jit keep ``npuscope.device``."""

    def __new__(cls, spec, index=None):
        if isinstance(spec, str) and index is not None and not isinstance(spec, _TorchDevice):
            spec = f"{spec}:{index}" if ":" not in spec else spec
            index = None
        mapped = map_device(spec)
        if isinstance(mapped, _TorchDevice):
            return mapped
        return _TorchDevice(mapped) if index is None else _TorchDevice(mapped, index)


def enable_torch_device_spelling():
    """``torch.device("npu[:N]")`` works (torch_npu's import calls it; opt-in, see _Device)."""
    if torch.device is _TorchDevice:
        _Device.__name__ = _Device.__qualname__ = "device"
        _Device.__module__ = "torch"
        torch.device = _Device
