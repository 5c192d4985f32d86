"""npuscope.optimizers (the NpuFused* torch.optim.Optimizer subclasses) against references.

Run with Debian's interpreter (torch 1.13):
    cd /tmp && PYTHONPATH=/work/main/build/python /usr/bin/python3 -m pytest -q /work/main/tests/python/test_optimizers.py

What is checked, independently of the C++ tests:
  * parity over STEPS steps in fp32 on npu tensors with a reference on CPU copies of the same
    parameters fed the same gradients: torch.optim.SGD / Adam / AdamW / Adadelta / RMSprop for the
    five optimizers torch has, and small references written here (from docs/references.md
    "Fused optimizers", timm's adamp.py / rmsprop_tf.py and the cybertronai LAMB) for AdamP, LAMB
    and RMSpropTF; parameters *and* optimizer state are compared;
  * two param groups with different options under a per-group LambdaLR schedule;
  * state_dict round trip (bit-exact resume), its layout, loading torch.optim's own state_dict;
  * zero_grad after the first step, add_param_group after steps, option validation.

Error metric (RTOL = 1e-6), per tensor:  max|a - b| / max(max|b|, TINY)
i.e. the largest element difference relative to the largest magnitude of the reference tensor, so
elements that pass near zero do not blow the metric up while a wrong tensor still fails it.
"""
import copy
import io
import math

import pytest
import torch

import npuscope  # noqa: F401  (registers the npu device and the "npu" device strings)
from npuscope import optimizers as O

NPU = "npu:0"
# numel 128, 105 (not a multiple of 16), 33 (1-D, never projected by AdamP), 64
SHAPES = [(16, 8), (7, 5, 3), (33,), (4, 4, 2, 2)]
GRAD_SCALES = [1.0, 0.1, 3.0, 0.01]  # different gradient magnitudes per tensor
STEPS = 120
RTOL = 1e-6
TINY = 1e-30


# ----------------------------------------------------------------------------------------------
# helpers

def rel_err(actual, expected):
    """max|a - b| / max(max|b|, TINY), on CPU float32 copies (see the module docstring)."""
    a = actual.detach().cpu().float()
    b = expected.detach().cpu().float()
    assert a.shape == b.shape, (a.shape, b.shape)
    return ((a - b).abs().max() / max(b.abs().max().item(), TINY)).item()


def initial_params(seed=0):
    gen = torch.Generator().manual_seed(seed)
    ps = [torch.randn(s, generator=gen) for s in SHAPES]
    ps[0].mul_(1.5)  # ‖p‖ ≈ 17 > 10: LAMB's clamp(‖p‖, 0, 10) is exercised
    return ps


def npu_copies(cpu_params):
    return [p.detach().clone().to(NPU).requires_grad_() for p in cpu_params]


def cpu_copies(cpu_params):
    return [p.detach().clone().requires_grad_() for p in cpu_params]


def make_grads(step, params, seed=0):
    """Deterministic gradients for `step`, shaped with respect to `params` (the reference's CPU
    parameters before the step) so that AdamP sees every case far from its thresholds:
      tensor 0 (16, 8):       orthogonal to p row by row       -> channel-view projection
      tensor 1 (7, 5, 3):     orthogonal to p as a whole only  -> layer-view projection
      tensor 2 (33,):         1-D                              -> never projected
      tensor 3 (4, 4, 2, 2):  half aligned with p              -> no projection
    The other optimizers just see gradients of different scales."""
    gen = torch.Generator().manual_seed(100003 * (seed + 1) + step)
    out = []
    for k, (p, scale) in enumerate(zip(params, GRAD_SCALES)):
        g = torch.randn(p.shape, generator=gen, dtype=torch.float64)
        pd = p.detach().double()
        if k == 0:
            rows, prow = g.reshape(p.shape[0], -1), pd.reshape(p.shape[0], -1)
            rows -= prow * ((rows * prow).sum(1, keepdim=True) / (prow * prow).sum(1, keepdim=True))
        elif k == 1:
            g -= pd * ((g * pd).sum() / (pd * pd).sum())
        elif k == 3:
            g += pd * (g.norm() / pd.norm())
        out.append((g * scale).float())
    return out


def assign_grads(params, grads, step):
    """Gives each parameter its gradient: by assignment of a fresh npu/cpu tensor on even steps
    (and whenever .grad is None), by an in-place copy into the existing .grad on odd steps, so
    both ways users feed gradients are exercised."""
    for p, g in zip(params, grads):
        g = g.to(p.device)
        if p.grad is None or step % 2 == 0:
            p.grad = g.clone()
        else:
            p.grad.copy_(g)


def slots(state_entry):
    return {k for k, v in state_entry.items() if k != "step" and v is not None}


def to_cpu(obj):
    if torch.is_tensor(obj):
        return obj.detach().cpu().clone()
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


def group_split(params, second):
    """Two param groups: tensors 0, 1 and tensors 2, 3; `second` holds group 1's own options."""
    return [{"params": params[:2]}, dict(second, params=params[2:])]


# ----------------------------------------------------------------------------------------------
# references written from the formulas (CPU, float32 element arithmetic, norms in float64)

class RefAdamP(torch.optim.Optimizer):
    """timm adamp.py (clovaai AdamP), with cos(x, y) = |x·y| / (‖x‖+ε) / (‖y‖+ε) as in
    references.md / torch_npu. Counts the projections it applies per view."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, delta=0.1,
                 wd_ratio=0.1, nesterov=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, delta=delta,
                                      wd_ratio=wd_ratio, nesterov=nesterov))
        self.projections = {"channel": 0, "layer": 0, "none": 0}

    def _project(self, p, g, perturb, delta, wd_ratio, eps):
        if p.dim() <= 1:
            self.projections["none"] += 1
            return perturb, 1.0
        for view, rows in (("channel", p.shape[0]), ("layer", 1)):
            pv = p.reshape(rows, -1).double()
            gv = g.reshape(rows, -1).double()
            p_norm = pv.norm(dim=1)
            cos = (gv * pv).sum(1).abs() / (gv.norm(dim=1) + eps) / (p_norm + eps)
            if cos.max().item() < delta / math.sqrt(pv.shape[1]):
                p_n = (pv / (p_norm + eps)[:, None]).float()
                dot = (p_n.double() * perturb.reshape(rows, -1).double()).sum(1).float()
                perturb = perturb - (p_n * dot[:, None]).reshape(p.shape)
                self.projections[view] += 1
                return perturb, wd_ratio
        self.projections["none"] += 1
        return perturb, 1.0

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                g = p.grad
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = torch.zeros_like(p)
                    st["exp_avg_sq"] = torch.zeros_like(p)
                st["step"] += 1
                t = st["step"]
                m, v = st["exp_avg"], st["exp_avg_sq"]
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (v.sqrt() / math.sqrt(1 - b2 ** t)).add_(eps)
                if group["nesterov"]:
                    perturb = (b1 * m + (1 - b1) * g) / denom
                else:
                    perturb = m / denom
                perturb, ratio = self._project(p, g, perturb, group["delta"], group["wd_ratio"], eps)
                if wd > 0:
                    p.mul_(1 - lr * wd * ratio)
                p.add_(perturb, alpha=-lr / (1 - b1 ** t))


class RefLamb(torch.optim.Optimizer):
    """LAMB. variant 0 (Ascend / cybertronai): optional g /= ‖g‖_global when > 1; m, v without
    bias correction; r = m/(√v+ε) + wd·p; trust = clamp(‖p‖,0,10)/‖r‖ (1 if a norm is 0, always
    1 with adam); p −= lr·trust·r. variant 1 (apex FusedLAMB): g /= ‖g‖/max_grad_norm above
    max_grad_norm; u = (m/bc1)/(√(v/bc2)+ε) + wd·p (adam_w_mode); trust = ‖p‖/‖u‖ when wd ≠ 0
    or use_nvlamb; p −= lr·trust·u."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, adam=False,
                 use_global_grad_norm=False, variant=0, bias_correction=True, grad_averaging=True,
                 adam_w_mode=True, max_grad_norm=1.0, use_nvlamb=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, adam=adam,
                                      use_global_grad_norm=use_global_grad_norm, variant=variant,
                                      bias_correction=bias_correction, grad_averaging=grad_averaging,
                                      adam_w_mode=adam_w_mode, max_grad_norm=max_grad_norm,
                                      use_nvlamb=use_nvlamb))

    @torch.no_grad()
    def step(self):
        all_grads = [p.grad for g in self.param_groups for p in g["params"]]
        global_norm = math.sqrt(sum(g.double().pow(2).sum().item() for g in all_grads))
        for group in self.param_groups:
            b1, b2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            nv = int(group["variant"]) == 1
            divisor = 1.0
            if not nv and group["use_global_grad_norm"] and global_norm > 1.0:
                divisor = global_norm
            if nv and group["max_grad_norm"] > 0 and global_norm > group["max_grad_norm"]:
                divisor = global_norm / group["max_grad_norm"]
            for p in group["params"]:
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = torch.zeros_like(p)
                    st["exp_avg_sq"] = torch.zeros_like(p)
                st["step"] += 1
                t = st["step"]
                g = p.grad / divisor
                if nv and not group["adam_w_mode"]:
                    g = g + wd * p
                m, v = st["exp_avg"], st["exp_avg_sq"]
                beta3 = 1.0 if (nv and not group["grad_averaging"]) else 1 - b1
                m.mul_(b1).add_(g, alpha=beta3)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                if not nv:
                    r = m / v.sqrt().add(eps)
                    if wd != 0:
                        r.add_(p, alpha=wd)
                    w = min(max(p.double().norm().item(), 0.0), 10.0)
                    rn = r.double().norm().item()
                    trust = 1.0 if (group["adam"] or w == 0 or rn == 0) else w / rn
                else:
                    bc1 = 1 - b1 ** t if group["bias_correction"] else 1.0
                    bc2 = 1 - b2 ** t if group["bias_correction"] else 1.0
                    r = (m / bc1) / (v / bc2).sqrt().add(eps)
                    if group["adam_w_mode"]:
                        r.add_(p, alpha=wd)
                    pn, rn = p.double().norm().item(), r.double().norm().item()
                    trust = 1.0
                    if (wd != 0 or group["use_nvlamb"]) and pn != 0 and rn != 0:
                        trust = pn / rn
                p.add_(r, alpha=-lr * trust)


class RefRMSpropTF(torch.optim.Optimizer):
    """timm rmsprop_tf.py: ε inside the sqrt, s += (1−α)(g² − s) from s0 = initial_square_avg,
    lr inside the momentum buffer (lr_in_momentum), decoupled decay p −= wd·p (or lr·wd·p)."""

    def __init__(self, params, lr=1e-2, alpha=0.9, eps=1e-10, weight_decay=0.0, momentum=0.0, centered=False,
                 decoupled_decay=False, lr_in_momentum=True, initial_square_avg=1.0,
                 decoupled_decay_scaled_by_lr=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, decoupled_decay=decoupled_decay,
                                      lr_in_momentum=lr_in_momentum, initial_square_avg=initial_square_avg,
                                      decoupled_decay_scaled_by_lr=decoupled_decay_scaled_by_lr))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, eps, wd, mu = group["lr"], group["eps"], group["weight_decay"], group["momentum"]
            c = 1 - group["alpha"]
            for p in group["params"]:
                g = p.grad
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["square_avg"] = torch.full_like(p, group["initial_square_avg"])
                    if mu > 0:
                        st["momentum_buffer"] = torch.zeros_like(p)
                    if group["centered"]:
                        st["grad_avg"] = torch.zeros_like(p)
                st["step"] += 1
                if wd != 0:
                    if group["decoupled_decay"]:
                        p.add_(p, alpha=-(lr * wd if group["decoupled_decay_scaled_by_lr"] else wd))
                    else:
                        g = g.add(p, alpha=wd)
                s = st["square_avg"]
                s.add_(g.pow(2) - s, alpha=c)
                if group["centered"]:
                    a = st["grad_avg"]
                    a.add_(g - a, alpha=c)
                    avg = s.addcmul(a, a, value=-1).add(eps).sqrt_()
                else:
                    avg = s.add(eps).sqrt_()
                if mu > 0:
                    b = st["momentum_buffer"]
                    if group["lr_in_momentum"]:
                        b.mul_(mu).addcdiv_(g, avg, value=lr)
                        p.add_(-b)
                    else:
                        b.mul_(mu).addcdiv_(g, avg)
                        p.add_(b, alpha=-lr)
                else:
                    p.addcdiv_(g, avg, value=-lr)


# ----------------------------------------------------------------------------------------------
# the cases: (id, fused class, reference class, options)

CASES = [
    ("sgd", O.NpuFusedSGD, torch.optim.SGD, dict(lr=0.05)),
    ("sgd-momentum-nesterov", O.NpuFusedSGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("sgd-momentum-dampening-wd", O.NpuFusedSGD, torch.optim.SGD,
     dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-2)),
    ("adam-l2", O.NpuFusedAdam, torch.optim.Adam, dict(lr=1e-2, weight_decay=1e-2)),
    ("adam-amsgrad", O.NpuFusedAdam, torch.optim.Adam, dict(lr=1e-2, betas=(0.8, 0.99), amsgrad=True)),
    ("adamw", O.NpuFusedAdamW, torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    ("adamw-amsgrad", O.NpuFusedAdamW, torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.05, amsgrad=True)),
    ("adamp", O.NpuFusedAdamP, RefAdamP, dict(lr=1e-2, weight_decay=1e-2)),
    ("adamp-nesterov", O.NpuFusedAdamP, RefAdamP,
     dict(lr=1e-2, weight_decay=0.1, nesterov=True, wd_ratio=0.2, betas=(0.85, 0.995))),
    ("lamb-ascend", O.NpuFusedLamb, RefLamb, dict(lr=1e-2, weight_decay=1e-2)),
    ("lamb-ascend-global-norm", O.NpuFusedLamb, RefLamb, dict(lr=1e-2, use_global_grad_norm=True)),
    ("lamb-ascend-adam", O.NpuFusedLamb, RefLamb, dict(lr=1e-3, adam=True, weight_decay=1e-2)),
    ("lamb-nvidia", O.NpuFusedLamb, RefLamb, dict(lr=1e-2, variant=1, weight_decay=1e-2)),
    ("adadelta", O.NpuFusedAdadelta, torch.optim.Adadelta, dict(lr=1.0, weight_decay=1e-2)),
    ("adadelta-rho", O.NpuFusedAdadelta, torch.optim.Adadelta, dict(lr=0.5, rho=0.95, eps=1e-5)),
    ("rmsprop-wd", O.NpuFusedRMSprop, torch.optim.RMSprop, dict(lr=1e-3, weight_decay=1e-2)),
    ("rmsprop-centered-momentum", O.NpuFusedRMSprop, torch.optim.RMSprop,
     dict(lr=1e-3, centered=True, momentum=0.9)),
    ("rmsproptf-defaults", O.NpuFusedRMSpropTF, RefRMSpropTF, dict()),  # initial_square_avg = 1
    ("rmsproptf-centered-momentum", O.NpuFusedRMSpropTF, RefRMSpropTF,
     dict(lr=1e-3, momentum=0.9, centered=True, weight_decay=1e-3, eps=1e-3)),  # ε large enough to see where it goes
    ("rmsproptf-decoupled-lr-outside-momentum", O.NpuFusedRMSpropTF, RefRMSpropTF,
     dict(lr=1e-3, momentum=0.8, lr_in_momentum=False, weight_decay=1e-2, decoupled_decay=True)),
    ("rmsproptf-s0-zero-decay-scaled", O.NpuFusedRMSpropTF, RefRMSpropTF,
     dict(lr=1e-3, initial_square_avg=0.0, weight_decay=0.1, decoupled_decay=True,
          decoupled_decay_scaled_by_lr=True)),
]
CASE_IDS = [c[0] for c in CASES]
FUSED_CLASSES = [O.NpuFusedSGD, O.NpuFusedAdam, O.NpuFusedAdamW, O.NpuFusedAdamP, O.NpuFusedLamb,
                 O.NpuFusedAdadelta, O.NpuFusedRMSprop, O.NpuFusedRMSpropTF]


def run_pair(fused_cls, ref_cls, fused_groups, ref_groups, fused_params, ref_params, steps, kwargs,
             scheduler=None, check_each_step=None):
    """Steps a fused optimizer and its reference side by side on the same gradients."""
    fused = fused_cls(fused_groups, **kwargs)
    ref = ref_cls(ref_groups, **kwargs)
    scheds = (scheduler(fused), scheduler(ref)) if scheduler else None
    for step in range(steps):
        grads = make_grads(step, ref_params)
        assign_grads(fused_params, grads, step)
        assign_grads(ref_params, grads, step)
        fused.step()
        ref.step()
        if scheds:
            for s in scheds:
                s.step()
        if check_each_step:
            check_each_step(step, fused, ref)
    return fused, ref


# ----------------------------------------------------------------------------------------------
# 1. parity with the references

def test_cases_cover_all_eight_optimizers():
    assert {c[1] for c in CASES} == set(FUSED_CLASSES)


@pytest.mark.parametrize("name,fused_cls,ref_cls,kwargs", CASES, ids=CASE_IDS)
def test_parity_with_reference(name, fused_cls, ref_cls, kwargs):
    init = initial_params()
    fp, rp = npu_copies(init), cpu_copies(init)
    assert all(p.device.type == "privateuseone" for p in fp)
    worst = {"err": 0.0, "where": None}

    def check(step, fused, ref):
        for i, (a, b) in enumerate(zip(fp, rp)):
            e = rel_err(a, b)
            if e > worst["err"]:
                worst.update(err=e, where=(step, i))

    fused, ref = run_pair(fused_cls, ref_cls, fp, rp, fp, rp, STEPS, kwargs, check_each_step=check)
    assert worst["err"] <= RTOL, f"{name}: max relative error {worst['err']:.3g} at (step, tensor) {worst['where']}"
    # The parameters really moved (a no-op optimizer would otherwise pass against a no-op ref).
    for a, b in zip(fp, init):
        assert rel_err(a, b) > 1e-4

    # Optimizer state: same slots as the reference, same values.
    sd = fused.state_dict()
    if not any(slots(ref.state[p]) for p in rp):  # plain SGD: torch keeps only momentum_buffer=None
        assert all(not slots(entry) for entry in sd["state"].values())
        return
    assert sorted(sd["state"]) == list(range(len(SHAPES)))
    for i, p in enumerate(rp):
        ref_state = ref.state[p]
        assert slots(sd["state"][i]) == slots(ref_state), (i, sd["state"][i].keys(), ref_state.keys())
        assert float(sd["state"][i]["step"]) == STEPS
        for slot in slots(ref_state):
            e = rel_err(sd["state"][i][slot], ref_state[slot])
            assert e <= RTOL, f"{name}: state {slot} of tensor {i}: relative error {e:.3g}"

    if ref_cls is RefAdamP:
        # The gradients were built to drive every AdamP branch; make sure they did.
        n = STEPS
        assert ref.projections == {"channel": n, "layer": n, "none": 2 * n}, ref.projections


# ----------------------------------------------------------------------------------------------
# 2. two param groups and an LR scheduler

SCHED_CASES = [
    ("sgd", O.NpuFusedSGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9), dict(lr=0.02, weight_decay=1e-2)),
    ("adam", O.NpuFusedAdam, torch.optim.Adam, dict(lr=1e-2), dict(lr=3e-3, weight_decay=1e-2)),
    ("adamw", O.NpuFusedAdamW, torch.optim.AdamW, dict(lr=1e-2), dict(lr=3e-3, weight_decay=0.0)),
    ("adamp", O.NpuFusedAdamP, RefAdamP, dict(lr=1e-2, weight_decay=1e-2), dict(lr=3e-3, wd_ratio=0.5)),
    ("lamb", O.NpuFusedLamb, RefLamb, dict(lr=1e-2, weight_decay=1e-2), dict(lr=3e-3, weight_decay=0.0)),
    ("adadelta", O.NpuFusedAdadelta, torch.optim.Adadelta, dict(lr=1.0), dict(lr=0.3, rho=0.95)),
    ("rmsprop", O.NpuFusedRMSprop, torch.optim.RMSprop, dict(lr=1e-3, momentum=0.9), dict(lr=3e-4, centered=True)),
    ("rmsproptf", O.NpuFusedRMSpropTF, RefRMSpropTF, dict(lr=1e-3, momentum=0.9), dict(lr=3e-4, momentum=0.5)),
]


@pytest.mark.parametrize("name,fused_cls,ref_cls,kwargs,second", SCHED_CASES, ids=[c[0] for c in SCHED_CASES])
def test_param_groups_and_lr_scheduler(name, fused_cls, ref_cls, kwargs, second):
    init = initial_params(seed=1)
    fp, rp = npu_copies(init), cpu_copies(init)
    # One schedule per group: step decay for group 0, inverse-time decay for group 1.
    lambdas = [lambda s: 0.5 ** (s // 25), lambda s: 1.0 / (1.0 + 0.1 * s)]

    def scheduler(opt):
        return torch.optim.lr_scheduler.LambdaLR(opt, lambdas)

    worst = [0.0]

    def check(step, fused, ref):
        for gf, gr in zip(fused.param_groups, ref.param_groups):
            assert gf["lr"] == gr["lr"]
        for a, b in zip(fp, rp):
            worst[0] = max(worst[0], rel_err(a, b))

    fused, ref = run_pair(fused_cls, ref_cls, group_split(fp, second), group_split(rp, second), fp, rp, 100,
                          kwargs, scheduler=scheduler, check_each_step=check)
    assert worst[0] <= RTOL, f"{name}: max relative error {worst[0]:.3g}"
    # The schedule did change both groups' lr, differently.
    assert fused.param_groups[0]["lr"] == pytest.approx(kwargs["lr"] * 0.5 ** 4)
    assert fused.param_groups[1]["lr"] == pytest.approx(second["lr"] / 11.0)


# ----------------------------------------------------------------------------------------------
# 3. state_dict

ROUND_TRIP_KWARGS = {
    O.NpuFusedSGD: dict(lr=0.05, momentum=0.9, nesterov=True),
    O.NpuFusedAdam: dict(lr=1e-2, amsgrad=True),
    O.NpuFusedAdamW: dict(lr=1e-2, weight_decay=0.1),
    O.NpuFusedAdamP: dict(lr=1e-2, weight_decay=1e-2),
    O.NpuFusedLamb: dict(lr=1e-2, weight_decay=1e-2, use_global_grad_norm=True),
    O.NpuFusedAdadelta: dict(lr=1.0),
    O.NpuFusedRMSprop: dict(lr=1e-3, momentum=0.9, centered=True),
    O.NpuFusedRMSpropTF: dict(lr=1e-3, momentum=0.9, centered=True),
}
# A wrong value for a constructor, to check load_state_dict restores the saved hyper-parameters.
WRONG = {"lr": 0.123}


def _save_and_restore(sd, via):
    """The ways a checkpoint of opt.state_dict() is taken and read back."""
    if via == "deepcopy":
        return copy.deepcopy(sd)
    buf = io.BytesIO()
    if via == "torch_save":
        torch.save(sd, buf)  # npu tensors as they are
    else:  # "torch_save_cpu": the state moved to the CPU first, as map_location="cpu" gives it back
        torch.save(to_cpu(sd), buf)
    buf.seek(0)
    return torch.load(buf)


@pytest.mark.parametrize("via", ["torch_save", "deepcopy", "torch_save_cpu"])
@pytest.mark.parametrize("cls", FUSED_CLASSES, ids=lambda c: c.__name__)
def test_state_dict_round_trip_is_bit_exact(cls, via):
    kwargs = ROUND_TRIP_KWARGS[cls]
    second = {"lr": kwargs["lr"] * 0.5}
    n_steps, m_steps = 30, 20
    init = initial_params(seed=2)
    ref_shapes = cpu_copies(init)  # only to shape the gradients (AdamP cases), never stepped

    def grads(step):
        return make_grads(step, ref_shapes, seed=2)

    # Uninterrupted run of N + M steps; checkpoint of the model and optimizer after N.
    params = npu_copies(init)
    opt = cls(group_split(params, second), **kwargs)
    for step in range(n_steps):
        assign_grads(params, grads(step), step)
        opt.step()
    model_ckpt = [p.detach().cpu().clone() for p in params]
    saved = _save_and_restore(opt.state_dict(), via)
    for step in range(n_steps, n_steps + m_steps):
        assign_grads(params, grads(step), step)
        opt.step()

    # Resumed run: a fresh model copy and optimizer (built with a wrong lr), then M steps.
    resumed = npu_copies(model_ckpt)
    opt2 = cls(group_split(resumed, dict(WRONG)), **dict(kwargs, **WRONG))
    opt2.load_state_dict(saved)
    assert [g["lr"] for g in opt2.param_groups] == [kwargs["lr"], second["lr"]]
    for step in range(n_steps, n_steps + m_steps):
        assign_grads(resumed, grads(step), step)
        opt2.step()

    for i, (a, b) in enumerate(zip(resumed, params)):
        assert torch.equal(a.detach().cpu(), b.detach().cpu()), f"parameter {i} differs after resuming"
    s1, s2 = opt.state_dict()["state"], opt2.state_dict()["state"]
    assert s1.keys() == s2.keys()
    for i in s1:
        assert s1[i].keys() == s2[i].keys()
        for slot in s1[i]:
            assert torch.equal(s1[i][slot].cpu(), s2[i][slot].cpu()), (i, slot)
    assert float(s2[0]["step"]) == n_steps + m_steps


LAYOUT_CASES = [
    (O.NpuFusedSGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9), {"momentum_buffer"}),
    (O.NpuFusedAdam, torch.optim.Adam, dict(lr=1e-2), {"exp_avg", "exp_avg_sq"}),
    (O.NpuFusedAdam, torch.optim.Adam, dict(lr=1e-2, amsgrad=True), {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}),
    (O.NpuFusedAdamW, torch.optim.AdamW, dict(lr=1e-2), {"exp_avg", "exp_avg_sq"}),
    (O.NpuFusedAdadelta, torch.optim.Adadelta, dict(lr=1.0), {"square_avg", "acc_delta"}),
    (O.NpuFusedRMSprop, torch.optim.RMSprop, dict(lr=1e-3), {"square_avg"}),
    (O.NpuFusedRMSprop, torch.optim.RMSprop, dict(lr=1e-3, momentum=0.9, centered=True),
     {"square_avg", "momentum_buffer", "grad_avg"}),
    (O.NpuFusedAdamP, None, dict(lr=1e-2), {"exp_avg", "exp_avg_sq"}),
    (O.NpuFusedLamb, None, dict(lr=1e-2), {"exp_avg", "exp_avg_sq"}),
    (O.NpuFusedRMSpropTF, None, dict(lr=1e-3), {"square_avg"}),
    (O.NpuFusedRMSpropTF, None, dict(lr=1e-3, momentum=0.9, centered=True),
     {"square_avg", "momentum_buffer", "grad_avg"}),
]


_ADAM_OPTIONS = {"lr", "betas", "eps", "weight_decay", "amsgrad"}
OPTION_NAMES = {  # fused_optimizers.h visit() names, beta1/beta2 as torch's "betas"
    O.NpuFusedSGD: {"lr", "momentum", "dampening", "weight_decay", "nesterov"},
    O.NpuFusedAdam: _ADAM_OPTIONS,
    O.NpuFusedAdamW: _ADAM_OPTIONS,
    O.NpuFusedAdamP: {"lr", "betas", "eps", "weight_decay", "delta", "wd_ratio", "nesterov"},
    O.NpuFusedLamb: {"lr", "betas", "eps", "weight_decay", "adam", "use_global_grad_norm", "variant",
                     "bias_correction", "grad_averaging", "adam_w_mode", "max_grad_norm", "use_nvlamb"},
    O.NpuFusedAdadelta: {"lr", "rho", "eps", "weight_decay"},
    O.NpuFusedRMSprop: {"lr", "alpha", "eps", "weight_decay", "momentum", "centered"},
    O.NpuFusedRMSpropTF: {"lr", "alpha", "eps", "weight_decay", "momentum", "centered", "decoupled_decay",
                          "lr_in_momentum", "initial_square_avg", "decoupled_decay_scaled_by_lr"},
}


@pytest.mark.parametrize("fused_cls,torch_cls,kwargs,expected_slots", LAYOUT_CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(LAYOUT_CASES)])
def test_state_dict_layout(fused_cls, torch_cls, kwargs, expected_slots):
    init = initial_params(seed=3)
    fp, rp = npu_copies(init), cpu_copies(init)
    second = {"lr": kwargs["lr"] * 0.5}
    fused = fused_cls(group_split(fp, second), **kwargs)
    assert fused.state_dict()["state"] == {}  # nothing before the first step, as torch
    ref = torch_cls(group_split(rp, second), **kwargs) if torch_cls else None
    for step in range(3):
        grads = make_grads(step, rp)
        assign_grads(fp, grads, step)
        fused.step()
        if ref:
            assign_grads(rp, grads, step)
            ref.step()
    sd = fused.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert list(sd["state"]) == [0, 1, 2, 3] and all(type(k) is int for k in sd["state"])
    for i, entry in sd["state"].items():
        assert slots(entry) == expected_slots, (i, sorted(entry))
        assert float(entry["step"]) == 3
        for slot in expected_slots:
            t = entry[slot]
            assert torch.is_tensor(t) and t.dtype == torch.float32 and tuple(t.shape) == SHAPES[i], (slot, t.shape)
    groups = sd["param_groups"]
    assert [g["params"] for g in groups] == [[0, 1], [2, 3]]
    assert groups[0]["lr"] == kwargs["lr"] and groups[1]["lr"] == second["lr"]
    for g in groups:  # every option of the class, with torch's key names (betas as a pair)
        assert set(g) - {"params"} == OPTION_NAMES[fused_cls], sorted(g)
    if ref:
        rsd = ref.state_dict()
        assert [g["params"] for g in rsd["param_groups"]] == [g["params"] for g in groups]
        for gf, gr in zip(groups, rsd["param_groups"]):
            for key, value in gf.items():
                assert gr[key] == value, key  # same names and values as torch.optim's groups
        for i in sd["state"]:
            assert slots(sd["state"][i]) == slots(rsd["state"][i])


@pytest.mark.parametrize("fused_cls,torch_cls,kwargs", [
    (O.NpuFusedSGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.1)),
    (O.NpuFusedAdam, torch.optim.Adam, dict(lr=1e-2, amsgrad=True)),
    (O.NpuFusedAdadelta, torch.optim.Adadelta, dict(lr=1.0)),
    (O.NpuFusedRMSprop, torch.optim.RMSprop, dict(lr=1e-3, momentum=0.9, centered=True)),
], ids=["sgd", "adam", "adadelta", "rmsprop"])
def test_load_torch_optim_state_dict(fused_cls, torch_cls, kwargs):
    """Drop-in: a torch.optim checkpoint resumes in the fused twin (and keeps matching torch)."""
    init = initial_params(seed=4)
    rp = cpu_copies(init)
    ref = torch_cls(rp, **kwargs)
    for step in range(20):
        assign_grads(rp, make_grads(step, rp, seed=4), step)
        ref.step()
    fp = npu_copies([p.detach() for p in rp])
    fused = fused_cls(fp, **dict(kwargs, lr=0.5))
    fused.load_state_dict(to_cpu(ref.state_dict()))
    assert fused.param_groups[0]["lr"] == kwargs["lr"]
    worst = 0.0
    for step in range(20, 60):
        grads = make_grads(step, rp, seed=4)
        assign_grads(fp, grads, step)
        assign_grads(rp, grads, step)
        fused.step()
        ref.step()
        worst = max(worst, max(rel_err(a, b) for a, b in zip(fp, rp)))
    assert worst <= RTOL, worst


def test_state_dict_checkpoint_copies_and_map_location():
    """A deepcopy / torch.save of opt.state_dict() is a snapshot (later steps do not change it),
    and torch.load(map_location="cpu") gives CPU tensors, as torch documents."""
    init = initial_params()
    params = npu_copies(init)
    opt = O.NpuFusedAdam(params, lr=1e-2)
    assign_grads(params, make_grads(0, init), 0)
    opt.step()
    sd = opt.state_dict()
    expected = to_cpu(sd)
    copied = copy.deepcopy(sd)
    buf = io.BytesIO()
    torch.save(sd, buf)
    assign_grads(params, make_grads(1, init), 1)
    opt.step()  # must not reach the copies
    assert torch.equal(copied["state"][0]["exp_avg"].cpu(), expected["state"][0]["exp_avg"])
    assert copied["state"][0]["exp_avg"].device == sd["state"][0]["exp_avg"].device
    buf.seek(0)
    loaded = torch.load(buf)
    assert loaded["state"][0]["exp_avg_sq"].device == sd["state"][0]["exp_avg_sq"].device
    assert torch.equal(loaded["state"][0]["exp_avg_sq"].cpu(), expected["state"][0]["exp_avg_sq"])
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    for i, entry in on_cpu["state"].items():
        for slot, t in entry.items():
            assert t.device.type == "cpu", f"map_location='cpu' left state[{i}][{slot!r}] on {t.device}"
            assert torch.equal(t, expected["state"][i][slot])


# ----------------------------------------------------------------------------------------------
# 4. zero_grad, add_param_group, option checks

def _tiny_model():
    torch.manual_seed(5)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


@pytest.mark.parametrize("how", ["optimizer", "optimizer_set_to_none", "module_set_to_none"])
def test_zero_grad_after_first_step(how):
    model = _tiny_model().npu()
    twin = _tiny_model().npu()  # same init; its gradients are assigned by hand
    assert all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(model.parameters(), twin.parameters()))
    opt = O.NpuFusedAdam(model.parameters(), lr=1e-2)
    opt_twin = O.NpuFusedAdam(twin.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(6)
    data = [(torch.randn(4, 6, generator=gen).npu(), torch.randn(4, 3, generator=gen).npu()) for _ in range(4)]

    for step, (x, y) in enumerate(data):
        loss = ((model(x) - y) ** 2).mean()
        expected = [g.detach().clone() for g in torch.autograd.grad(loss, list(model.parameters()))]
        if step > 0 and how == "module_set_to_none":
            assert all(p.grad is None for p in model.parameters())
        elif step > 0:
            for p in model.parameters():  # zeroed by the previous iteration, still a usable tensor
                assert p.grad is not None and p.grad.device == p.device
                assert torch.count_nonzero(p.grad.cpu()) == 0
        ((model(x) - y) ** 2).mean().backward()
        for p, g in zip(model.parameters(), expected):
            assert torch.equal(p.grad.cpu(), g.cpu())  # backward accumulated onto zeros, nothing stale
        for p, g in zip(twin.parameters(), expected):
            p.grad = g.clone()
        opt.step()
        opt_twin.step()
        for a, b in zip(model.parameters(), twin.parameters()):
            assert torch.equal(a.detach().cpu(), b.detach().cpu())
        if how == "optimizer":
            opt.zero_grad()
        elif how == "optimizer_set_to_none":
            opt.zero_grad(set_to_none=True)  # documented: zeroes in place, grads stay views
        else:
            model.zero_grad(set_to_none=True)  # torch's own: .grad = None; backward makes new ones
    assert opt.core.step_count == len(data)


@pytest.mark.parametrize("fused_cls,torch_cls,kwargs", [
    (O.NpuFusedSGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9)),
    (O.NpuFusedAdam, torch.optim.Adam, dict(lr=1e-2)),
], ids=["sgd", "adam"])
def test_add_param_group_after_steps_is_refused_and_keeps_state(fused_cls, torch_cls, kwargs):
    # Fused optimizers keep one step count and combined state buffers for all parameters, so a
    # group joining after the first step is refused (clearly, before anything changes); before
    # the first step it joins like in torch.
    init = initial_params(seed=7)
    fp, rp = npu_copies(init), cpu_copies(init)
    fused = fused_cls(fp[:2], **kwargs)
    ref = torch_cls(rp[:2], **kwargs)
    fused.add_param_group({"params": [fp[2]], "lr": kwargs["lr"] * 2})
    ref.add_param_group({"params": [rp[2]], "lr": kwargs["lr"] * 2})
    for step in range(5):
        grads = make_grads(step, rp, seed=7)[:3]
        assign_grads(fp[:3], grads, step)
        assign_grads(rp[:3], grads, step)
        fused.step()
        ref.step()
    for i in range(3):
        assert rel_err(fp[i], rp[i]) <= RTOL, i
    before = to_cpu(fused.state_dict()["state"])
    assert sorted(before) == [0, 1, 2]

    with pytest.raises(RuntimeError, match="add parameter groups before the first step"):
        fused.add_param_group({"params": [fp[3]], "lr": kwargs["lr"] * 2})
    after = fused.state_dict()
    assert [g["params"] for g in after["param_groups"]] == [[0, 1], [2]]
    for i in range(3):  # old parameters keep their state and step count
        assert after["state"][i].keys() == before[i].keys()
        for slot, value in before[i].items():
            assert torch.equal(after["state"][i][slot].cpu(), value), (i, slot)
    for step in range(5, 10):  # ... and keep following the reference
        grads = make_grads(step, rp, seed=7)[:3]
        assign_grads(fp[:3], grads, step)
        assign_grads(rp[:3], grads, step)
        fused.step()
        ref.step()
    for i in range(3):
        assert rel_err(fp[i], rp[i]) <= RTOL, i


def _p():
    return [torch.zeros(3).npu().requires_grad_()]


@pytest.mark.parametrize("make", [
    lambda: O.NpuFusedAdam(_p(), lr=-1),
    lambda: O.NpuFusedAdam(_p(), betas=(1.0, 0.999)),
    lambda: O.NpuFusedAdam(_p(), betas=(0.9, -0.1)),
    lambda: O.NpuFusedAdam(_p(), eps=-1e-8),
    lambda: O.NpuFusedAdamW(_p(), weight_decay=-0.1),
    lambda: O.NpuFusedSGD(_p()),  # lr is required, as in torch.optim.SGD
    lambda: O.NpuFusedSGD(_p(), lr=-0.1),
    lambda: O.NpuFusedSGD(_p(), lr=0.1, momentum=-0.5),
    lambda: O.NpuFusedSGD(_p(), lr=0.1, nesterov=True),  # nesterov needs momentum
    lambda: O.NpuFusedAdamP(_p(), lr=-1e-3),
    lambda: O.NpuFusedLamb(_p(), max_grad_norm=-1.0),
    lambda: O.NpuFusedLamb(_p(), variant=2),
    lambda: O.NpuFusedAdadelta(_p(), rho=1.5),
    lambda: O.NpuFusedRMSprop(_p(), alpha=-0.1),
    lambda: O.NpuFusedRMSpropTF(_p(), momentum=-0.9),
    lambda: O.NpuFusedAdam([{"params": _p()}, {"params": _p(), "lr": -1.0}], lr=1e-3),  # a bad group
], ids=["adam-lr", "adam-beta1", "adam-beta2", "adam-eps", "adamw-wd", "sgd-no-lr", "sgd-lr", "sgd-momentum",
        "sgd-nesterov", "adamp-lr", "lamb-max-grad-norm", "lamb-variant", "adadelta-rho", "rmsprop-alpha",
        "rmsproptf-momentum", "adam-group-lr"])
def test_invalid_options_raise_value_error(make):
    with pytest.raises(ValueError):
        make()


@pytest.mark.parametrize("make", [
    lambda: O.NpuFusedAdam(_p(), lr=1e-3, foo=1),
    lambda: O.NpuFusedAdam(_p(), momentum=0.9),
    lambda: O.NpuFusedSGD(_p(), lr=0.1, betas=(0.9, 0.99)),
    lambda: O.NpuFusedLamb(_p(), trust_clip=True),
    lambda: O.NpuFusedRMSpropTF(_p(), amsgrad=True),
], ids=["adam-foo", "adam-momentum", "sgd-betas", "lamb-trust-clip", "rmsproptf-amsgrad"])
def test_unknown_keyword_raises_type_error(make):
    with pytest.raises(TypeError):
        make()
