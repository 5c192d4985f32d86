"""``import npuscope.transfer_to_npu``: an unmodified CUDA script runs on the npu, as
``from torch_npu.contrib import transfer_to_npu`` does on Ascend.

After the import:
* "cuda" / "cuda:N" / torch.device("cuda") mean npu:N wherever npuscope maps device strings
  (``.to(...)``, factory ``device=`` arguments, ``module.to``), ``.cuda()`` is ``.npu()``;
* ``torch.cuda.is_available / device_count / current_device / set_device / synchronize /
  memory_allocated / max_memory_allocated / memory_reserved / max_memory_reserved /
  reset_peak_memory_stats / empty_cache / manual_seed(_all) / get_device_name`` answer for the npu;
* ``torch.cuda.amp.autocast``, ``torch.autocast("cuda")``, ``torch.cuda.amp.GradScaler`` are
  npuscope.amp's autocast and GradScaler;
* ``torch.distributed.init_process_group("nccl")`` uses the hccl backend (npuscope.distributed);
* ``torch.cuda.Stream / Event / stream / current_stream / default_stream`` are the npu's (one
  stream per device).
``torch.device("cuda")`` objects still print as cuda; ``tensor.is_cuda`` stays False.
"""
import functools

import torch

from . import _devices, npu
from . import amp as _amp

_devices.enable_cuda_spellings()

_CUDA_API = ["is_available", "device_count", "current_device", "set_device", "synchronize", "memory_allocated",
             "max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
             "reset_max_memory_allocated", "empty_cache", "manual_seed", "manual_seed_all", "get_device_name",
             "memory_stats", "device", "is_initialized", "Stream", "Event", "stream", "current_stream",
             "default_stream", "get_rng_state", "set_rng_state"]

if not getattr(torch.cuda, "_npuscope_transferred", False):
    for _name in _CUDA_API:
        setattr(torch.cuda, _name, getattr(npu, _name))
    torch.cuda.amp.autocast = _amp.autocast
    torch.cuda.amp.GradScaler = _amp.GradScaler
    torch.cuda.autocast = _amp.autocast if hasattr(torch.cuda, "autocast") else _amp.autocast

    _amp.route_torch_autocast("cuda", "npu")

    torch.Tensor.cuda = torch.Tensor.npu
    torch.nn.Module.cuda = torch.nn.Module.npu

    import torch.distributed as _dist
    if _dist.is_available():
        _init = _dist.init_process_group

        @functools.wraps(_init)
        def init_process_group(backend=None, *args, **kwargs):
            if backend == "nccl":
                backend = "hccl"
            return _init(backend, *args, **kwargs)

        _dist.init_process_group = init_process_group
    torch.cuda._npuscope_transferred = True
