"""npuscope.parallel.SyncBatchNorm: batch normalisation over the whole batch of a torch.distributed
job, for npu modules.

torch 1.13's ``torch.nn.SyncBatchNorm`` refuses tensors that are not CUDA ("expected input
tensor to be on GPU") and its statistics kernels (``batch_norm_stats``) exist for CUDA only, so
this module does the same computation with portable ops: per channel, each rank's sum, sum of
squares and count are all-reduced in one collective (the job's mean and biased variance
normalise; the unbiased one updates the running variance), and backward all-reduces the two
gradient sums the input gradient needs. Weight and bias gradients stay local, as torch's are
(DistributedDataParallel averages them). ``convert_sync_batchnorm`` swaps a model's BatchNorm
layers, like torch's.
"""
import torch
import torch.distributed as dist


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum, group):
        dims = [0] + list(range(2, x.dim()))
        xf = x.float()
        count = torch.tensor([float(xf.numel() // xf.shape[1])], device=x.device)
        stats = torch.cat([xf.sum(dims), (xf * xf).sum(dims), count])
        dist.all_reduce(stats, group=group)
        c = x.shape[1]
        total = stats[2 * c]
        mean = stats[:c] / total
        var = (stats[c:2 * c] / total - mean * mean).clamp_min(0)
        invstd = torch.rsqrt(var + eps)
        if running_mean is not None:
            with torch.no_grad():
                unbiased = var * total / (total - 1).clamp_min(1)
                running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
                running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
        shape = [1, c] + [1] * (x.dim() - 2)
        xhat = (xf - mean.view(shape)) * invstd.view(shape)
        y = xhat
        if weight is not None:
            y = y * weight.float().view(shape) + bias.float().view(shape)
        ctx.save_for_backward(xhat, weight, invstd, total)
        ctx.group = group
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        xhat, weight, invstd, total = ctx.saved_tensors
        c = xhat.shape[1]
        dims = [0] + list(range(2, xhat.dim()))
        shape = [1, c] + [1] * (xhat.dim() - 2)
        dyf = dy.float()
        sum_dy = dyf.sum(dims)
        sum_dy_xhat = (dyf * xhat).sum(dims)
        grad_weight = sum_dy_xhat.to(weight.dtype) if weight is not None else None
        grad_bias = sum_dy.to(weight.dtype) if weight is not None else None
        sums = torch.cat([sum_dy, sum_dy_xhat])
        dist.all_reduce(sums, group=ctx.group)
        mean_dy = (sums[:c] / total).view(shape)
        mean_dy_xhat = (sums[c:] / total).view(shape)
        scale = invstd.view(shape) * (weight.float().view(shape) if weight is not None else 1.0)
        dx = (dyf - mean_dy - xhat * mean_dy_xhat) * scale
        return dx.to(dy.dtype), grad_weight, grad_bias, None, None, None, None, None


class SyncBatchNorm(torch.nn.modules.batchnorm._BatchNorm):
    """torch.nn.SyncBatchNorm's interface (num_features, eps, momentum, affine,
    track_running_stats, process_group) on any device. Outside training, or in a job of one
    rank, it is plain batch normalisation."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device=device, dtype=dtype)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"SyncBatchNorm: expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        distributed = dist.is_available() and dist.is_initialized() and \
            dist.get_world_size(self.process_group) > 1
        if not (self.training and distributed):
            return super().forward(input)
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
        momentum = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias,
                                            self.running_mean if self.track_running_stats else None,
                                            self.running_var if self.track_running_stats else None,
                                            self.eps, momentum, self.process_group or dist.group.WORLD)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """Returns `module` with every BatchNorm*D replaced by a SyncBatchNorm holding its state."""
        out = module
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group)
            if module.affine:
                with torch.no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
