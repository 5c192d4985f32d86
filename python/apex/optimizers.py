"""apex.optimizers on npuscope: Ascend apex's NpuFused* classes and NVIDIA apex's names for the
same fused optimizers (combined tensors, C++ kernels):

* ``FusedAdam(params, lr, bias_correction, betas, eps, adam_w_mode=True, weight_decay, amsgrad)``
  is NpuFusedAdamW (adam_w_mode, NVIDIA's default) or NpuFusedAdam;
* ``FusedSGD(params, lr, momentum, dampening, weight_decay, nesterov)`` is NpuFusedSGD;
* ``FusedLAMB(params, lr, bias_correction, betas, eps, weight_decay, adam_w_mode, grad_averaging,
  max_grad_norm, use_nvlamb)`` is NpuFusedLamb in NVIDIA's variant (variant=1).

Options with no fused equivalent are refused when set to anything but their default.
"""
from npuscope.optimizers import (NpuFusedSGD, NpuFusedAdam, NpuFusedAdamW, NpuFusedAdamP, NpuFusedLamb,  # noqa: F401
                                 NpuFusedAdadelta, NpuFusedRMSprop, NpuFusedRMSpropTF)


def _refuse(name, **options):
    for key, (value, default) in options.items():
        if value != default:
            raise ValueError(f"{name}: {key}={value!r} has no npuscope equivalent (expected {default!r})")


def FusedAdam(params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8, adam_w_mode=True,  # noqa: N802
              weight_decay=0.0, amsgrad=False, set_grad_none=True, capturable=False, master_weights=False):
    _refuse("FusedAdam", bias_correction=(bias_correction, True), capturable=(capturable, False),
            master_weights=(master_weights, False))
    cls = NpuFusedAdamW if adam_w_mode else NpuFusedAdam
    return cls(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)


def FusedSGD(params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,  # noqa: N802
             wd_after_momentum=False, materialize_master_grads=True, set_grad_none=False):
    _refuse("FusedSGD", wd_after_momentum=(wd_after_momentum, False))
    return NpuFusedSGD(params, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                       nesterov=nesterov)


def FusedLAMB(params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,  # noqa: N802
              amsgrad=False, adam_w_mode=True, grad_averaging=True, set_grad_none=True, max_grad_norm=1.0,
              use_nvlamb=False):
    _refuse("FusedLAMB", amsgrad=(amsgrad, False))
    return NpuFusedLamb(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, variant=1,
                        bias_correction=bias_correction, grad_averaging=grad_averaging, adam_w_mode=adam_w_mode,
                        max_grad_norm=max_grad_norm, use_nvlamb=use_nvlamb)


def __getattr__(name):
    raise AttributeError(f"apex.optimizers.{name}: not provided by npuscope (provided: NpuFused*, FusedAdam, "
                         "FusedSGD, FusedLAMB)")
