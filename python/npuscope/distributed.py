"""torch.distributed's ``hccl`` backend on npuscope's npu, as torch_npu provides it on Ascend.

``import npuscope`` registers it; then, as in the plugin-adaptation guide ("replace nccl with
hccl")::

    dist.init_process_group(backend="hccl", init_method="tcp://127.0.0.1:29688",
                            world_size=2, rank=rank)     # or env:// under torchrun
    torch.npu.set_device(local_rank)                     # npuscope.npu.set_device
    t = torch.ones(4, device="npu")                      # npuscope maps "npu"
    dist.all_reduce(t)

The collectives run in C++ (npuscope._C.ProcessGroupHCCL): c10d's own Gloo process group over
TCP on zero-copy CPU views of the npu tensors. See docs/distributed.md.
"""
import torch
import torch.distributed as _dist

from . import _C
from ._devices import is_npu

BACKEND = "hccl"


def _create(store, rank, world_size, timeout):
    return _C.ProcessGroupHCCL(store, rank, world_size, timeout)


def register():
    """Registers backend "hccl" with torch.distributed (once; ``import npuscope`` does it)."""
    if _dist.is_available() and not hasattr(_dist.Backend, BACKEND.upper()):
        _dist.Backend.register_backend(BACKEND, _create)


_original_dp_init = torch.nn.DataParallel.__init__


def _data_parallel_init(self, module, *args, **kwargs):
    """torch.nn.DataParallel on an npu module is refused, as torch_npu refuses it: its
    single-process replication is CUDA-only."""
    if any(is_npu(p) for p in module.parameters()) or any(is_npu(b) for b in module.buffers()):
        raise RuntimeError("DataParallel is not supported on the npu (as on torch_npu): use "
                           "torch.nn.parallel.DistributedDataParallel with dist.init_process_group(backend=\"hccl\")")
    _original_dp_init(self, module, *args, **kwargs)


def refuse_data_parallel():
    """Makes torch.nn.DataParallel refuse npu modules (``import npuscope`` does it)."""
    torch.nn.DataParallel.__init__ = _data_parallel_init
