"""``from torch_npu.contrib import transfer_to_npu``: npuscope.transfer_to_npu (CUDA spellings
mean the npu; nccl means hccl)."""
from npuscope.transfer_to_npu import *  # noqa: F401,F403
