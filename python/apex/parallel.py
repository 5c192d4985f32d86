"""apex.parallel on npuscope (torch.distributed with backend "hccl"):

* ``DistributedDataParallel(module, ...)``: torch's DDP over the job's process group (apex's
  bucketing options are accepted; its gradient averaging is DDP's);
* ``SyncBatchNorm`` / ``convert_syncbn_model``: npuscope.parallel.SyncBatchNorm.
"""
import torch

from npuscope.parallel import SyncBatchNorm


def convert_syncbn_model(module, process_group=None, channel_last=False):
    if channel_last:
        raise ValueError("convert_syncbn_model: channel_last=True has no npuscope equivalent (expected False)")
    return SyncBatchNorm.convert_sync_batchnorm(module, process_group)


class DistributedDataParallel(torch.nn.parallel.DistributedDataParallel):
    """apex.parallel.DistributedDataParallel's signature on torch's DDP. Options that change the
    result (gradient_average=False, a gradient_predivide_factor other than 1) are refused; the
    others tune apex's own bucketing and are accepted."""

    def __init__(self, module, message_size=10000000, delay_allreduce=False, shared_param=None,
                 allreduce_trigger_params=None, retain_allreduce_buffers=False, allreduce_always_fp32=False,
                 num_allreduce_streams=1, allreduce_communicators=None, gradient_average=True,
                 gradient_predivide_factor=1.0, gradient_average_split_factor=None, prof=False):
        if not gradient_average or gradient_predivide_factor != 1.0:
            raise ValueError("apex.parallel.DistributedDataParallel: gradient_average=False or a "
                             "gradient_predivide_factor other than 1 has no npuscope equivalent")
        super().__init__(module)
