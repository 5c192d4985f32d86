"""torch.npu.amp: autocast and GradScaler with torch_npu's semantics (those of torch.cuda.amp,
plus GradScaler's ``dynamic``) on npuscope.amp's C++ implementation."""
import functools

import torch

from npuscope import amp as _amp

autocast = _amp.autocast


class GradScaler(_amp.GradScaler):
    """torch_npu's GradScaler: ``dynamic=False`` keeps the scale at ``init_scale`` (steps with
    inf/NaN gradients are still skipped)."""

    def __init__(self, init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True,
                 dynamic=True):
        super().__init__(init_scale, growth_factor, backoff_factor, growth_interval, enabled)
        self._dynamic = bool(dynamic)
        self._static_scale = float(init_scale)

    def update(self, new_scale=None):
        super().update(new_scale if new_scale is not None or self._dynamic else self._static_scale)

    def is_dynamic(self):
        return self._dynamic


def custom_fwd(fwd=None, *, cast_inputs=None):
    """torch.cuda.amp.custom_fwd for npu autocast: with ``cast_inputs``, floating npu tensors are
    cast to it and the function runs with autocast off."""
    if fwd is None:
        return functools.partial(custom_fwd, cast_inputs=cast_inputs)
    if cast_inputs is None:
        return fwd

    @functools.wraps(fwd)
    def wrapped(*args, **kwargs):
        def cast(x):
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                return x.to(cast_inputs)
            return x
        with _amp.autocast(enabled=False):
            return fwd(*[cast(a) for a in args], **{k: cast(v) for k, v in kwargs.items()})
    return wrapped


def custom_bwd(bwd):
    return bwd
