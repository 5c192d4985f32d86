"""torch_npu.optim: the fused optimizers (npuscope.optimizers, combined tensors, C++ kernels)."""
from npuscope.optimizers import (NpuFusedSGD, NpuFusedAdam, NpuFusedAdamW, NpuFusedAdamP, NpuFusedLamb,  # noqa: F401
                                 NpuFusedAdadelta, NpuFusedRMSprop, NpuFusedRMSpropTF)
