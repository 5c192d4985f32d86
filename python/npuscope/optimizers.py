"""torch_npu's / Ascend apex's fused optimizers as ``torch.optim.Optimizer`` subclasses.

Each keeps torch's ``param_groups`` (so LR schedulers, ``add_param_group`` and hand edits of
hyper-parameters work) and runs npuscope's C++ fused optimizer, which combines each
(dtype, device) slice of the parameters, their gradients and the optimizer state into flat
buffers and steps them in one pass. The C++ optimizer is built at the first ``step()`` (or by
``amp.initialize``), so a model may still be moved or cast before that; afterwards parameters
must stay where they are (as with torch_npu: moving or re-assigning one is refused by the next
step). ``zero_grad()`` zeroes the combined gradient buffer in place, whatever ``set_to_none``
says: gradients stay views of the buffer, as in torch_npu.

The formulas are the C++ ones (optim/include/npuscope/optim/fused_optimizers.h). ``state_dict``
has torch's layout ({"state": {index: {"step", slots...}}, "param_groups": [...]}) with torch's
slot names (exp_avg, exp_avg_sq, momentum_buffer, square_avg, ...); with master weights each
parameter's state also holds "master", its fp32 master copy.
"""
import torch
from torch.optim.optimizer import required as _required

from . import _C
from . import _wiring

_UNSET = _required  # "no default": torch.optim.SGD's lr


class _NpuFusedOptimizer(torch.optim.Optimizer):
    _cxx = None        # C++ class name
    _defaults = {}     # Python keyword -> default, in the C++ option order ("betas" expands)

    def __init__(self, params, **kwargs):
        defaults = dict(self._defaults)
        for key, value in kwargs.items():
            if key not in defaults:
                raise TypeError(f"{type(self).__name__}: unexpected option '{key}' "
                                f"(expected one of {', '.join(defaults)})")
            defaults[key] = value
        self._core = None
        self._master_weights = False
        self._synced = []
        super().__init__(params, defaults)
        self._validate_groups()

    # ---- options ---------------------------------------------------------------------------
    @classmethod
    def _cxx_options(cls, group):
        out = []
        for key in cls._defaults:
            if key == "betas":
                b1, b2 = group["betas"]
                out += [("beta1", float(b1)), ("beta2", float(b2))]
            else:
                out.append((key, float(group[key])))
        return out

    def _group_entries(self):
        """The param groups' options as the C++ state dict holds them ("group.<g>.<option>")."""
        return {f"group.{i}.{key}": torch.tensor(value, dtype=torch.float64)
                for i, g in enumerate(self.param_groups) for key, value in self._cxx_options(g)}

    def _validate_groups(self):
        # The C++ options check, on a throwaway one-element parameter: errors come at construction.
        for g in self.param_groups:
            try:
                _C.optim.FusedOptimizer(self._cxx, [[torch.zeros(1)]], [self._cxx_options(g)])
            except RuntimeError as e:
                raise ValueError(str(e)) from None

    def _sync(self):
        for i, g in enumerate(self.param_groups):
            opts = self._cxx_options(g)
            if i >= len(self._synced) or self._synced[i] != opts:
                self._core.set_group_options(i, opts)
                if i < len(self._synced):
                    self._synced[i] = opts
                else:
                    self._synced.append(opts)

    # ---- the C++ optimizer -----------------------------------------------------------------
    def _build(self, master_weights=None, keep_state=True):
        """(Re)builds the C++ optimizer over the parameters as they are now (before the first
        step, or by amp.initialize); keeps the state of an earlier one that has stepped."""
        if master_weights is not None:
            self._master_weights = bool(master_weights)
        old = self._core.state_dict() if (self._core is not None and keep_state) else None
        groups = [list(g["params"]) for g in self.param_groups]
        options = [self._cxx_options(g) for g in self.param_groups]
        self._core = _C.optim.FusedOptimizer(self._cxx, groups, options, self._master_weights)
        self._synced = options
        if old is not None and int(old["step"]) > 0:
            state = {k: v for k, v in old.items() if not k.startswith("group.")}
            state.update(self._group_entries())
            self._core.load_state_dict(state)
            self._core.refresh_model_params()
        return self._core

    def _ensure_core(self):
        if self._core is None:
            self._build()
        return self._core

    @property
    def core(self):
        """The C++ fused optimizer (built on first use)."""
        return self._ensure_core()

    def add_param_group(self, param_group):
        core = getattr(self, "_core", None)
        if core is not None and _wiring.amp_owns(self):
            raise RuntimeError(f"{type(self).__name__}.add_param_group: amp.initialize has set this optimizer up; "
                               "add parameter groups before amp.initialize")
        if core is not None and core.step_count > 0:
            # One step count and one set of combined state buffers serve every parameter: a group
            # joining later cannot start fresh (torch's per-parameter step 1) inside them.
            raise RuntimeError(f"{type(self).__name__}.add_param_group: the optimizer has taken "
                               f"{core.step_count} step(s); fused optimizers keep one step count for all "
                               "parameters, so add parameter groups before the first step")
        super().add_param_group(param_group)
        if getattr(self, "_core", None) is not None:
            self._validate_groups()
            self._build()

    def zero_grad(self, set_to_none=False):
        if self._core is None:
            return super().zero_grad(set_to_none)
        self._core.zero_grad()

    def _step_core(self):
        core = self._ensure_core()
        self._sync()
        with _C.amp.UpdatePhase():
            return core.step()

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if _wiring.amp_owns(self):
            _wiring.amp_step(self)
        else:
            _wiring.optimizer_seen(self)
            self._step_core()
        return loss

    def clip_grad_norm_(self, max_norm):
        """clip_grad_norm_ over the stepped gradients (fp32 masters with master weights); returns
        the total norm before clipping."""
        self._sync()
        return self._ensure_core().clip_grad_norm(float(max_norm))

    # ---- state -----------------------------------------------------------------------------
    def state_dict(self):
        groups = []
        index = 0
        for g in self.param_groups:
            entry = {k: v for k, v in g.items() if k != "params"}
            entry["params"] = list(range(index, index + len(g["params"])))
            index += len(g["params"])
            groups.append(entry)
        state = {}
        if self._core is not None and self._core.step_count > 0:
            flat = self._core.state_dict()
            step = float(flat["step"])
            for key, tensor in flat.items():
                if not key.startswith("param."):
                    continue
                _, i, slot = key.split(".", 2)
                state.setdefault(int(i), {"step": torch.tensor(step)})[slot] = tensor
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(f"{type(self).__name__}.load_state_dict: the state has {len(groups)} parameter groups, "
                             f"this optimizer has {len(self.param_groups)}")
        for mine, saved in zip(self.param_groups, groups):
            if len(mine["params"]) != len(saved["params"]):
                raise ValueError(f"{type(self).__name__}.load_state_dict: a parameter group of "
                                 f"{len(saved['params'])} parameters does not fit one of {len(mine['params'])}")
            for k, v in saved.items():
                if k != "params":
                    mine[k] = v
        state = state_dict["state"]
        if not state:
            return
        core = self._ensure_core()
        flat = {}
        step = None
        for i, slots in state.items():
            for slot, tensor in slots.items():
                if slot == "step":
                    step = float(tensor)
                else:
                    flat[f"param.{int(i)}.{slot}"] = tensor
        flat["step"] = torch.tensor(int(step or 0), dtype=torch.int64)
        flat.update(self._group_entries())
        core.load_state_dict(flat)
        core.refresh_model_params()
        self._synced = [self._cxx_options(g) for g in self.param_groups]


def _make(name, cxx, defaults, doc):
    cls = type(name, (_NpuFusedOptimizer,), {"_cxx": cxx, "_defaults": defaults, "__doc__": doc})
    cls.__module__ = __name__
    return cls


NpuFusedSGD = _make("NpuFusedSGD", "NpuFusedSGD",
                    {"lr": _UNSET, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False},
                    "SGD as torch.optim.SGD (momentum, dampening, nesterov, weight decay).")
NpuFusedAdam = _make("NpuFusedAdam", "NpuFusedAdam",
                     {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "amsgrad": False},
                     "Adam as torch.optim.Adam (L2 weight decay, amsgrad).")
NpuFusedAdamW = _make("NpuFusedAdamW", "NpuFusedAdamW",
                      {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-2, "amsgrad": False},
                      "AdamW as torch.optim.AdamW (decoupled weight decay).")
NpuFusedAdamP = _make("NpuFusedAdamP", "NpuFusedAdamP",
                      {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "delta": 0.1,
                       "wd_ratio": 0.1, "nesterov": False},
                      "AdamP (timm): Adam with the update projected off the weight for scale-invariant weights.")
NpuFusedLamb = _make("NpuFusedLamb", "NpuFusedLamb",
                     {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-6, "weight_decay": 0.0, "adam": False,
                      "use_global_grad_norm": False, "variant": 0, "bias_correction": True, "grad_averaging": True,
                      "adam_w_mode": True, "max_grad_norm": 1.0, "use_nvlamb": False},
                     "LAMB, Ascend's (cybertronai) variant by default; variant=1 is NVIDIA FusedLAMB's.")
NpuFusedAdadelta = _make("NpuFusedAdadelta", "NpuFusedAdadelta",
                         {"lr": 1.0, "rho": 0.9, "eps": 1e-6, "weight_decay": 0.0},
                         "Adadelta as torch.optim.Adadelta.")
NpuFusedRMSprop = _make("NpuFusedRMSprop", "NpuFusedRMSprop",
                        {"lr": 1e-2, "alpha": 0.99, "eps": 1e-8, "weight_decay": 0.0, "momentum": 0.0,
                         "centered": False},
                        "RMSprop as torch.optim.RMSprop (centered, momentum).")
NpuFusedRMSpropTF = _make("NpuFusedRMSpropTF", "NpuFusedRMSpropTF",
                          {"lr": 1e-2, "alpha": 0.9, "eps": 1e-10, "weight_decay": 0.0, "momentum": 0.0,
                           "centered": False, "decoupled_decay": False, "lr_in_momentum": True,
                           "initial_square_avg": 1.0, "decoupled_decay_scaled_by_lr": False},
                          "RMSprop the TensorFlow way (timm's RMSpropTF): eps inside the sqrt, square_avg starting "
                          "at initial_square_avg (1, as timm and torch_npu's tests; older Ascend apex used 0).")

__all__ = ["NpuFusedSGD", "NpuFusedAdam", "NpuFusedAdamW", "NpuFusedAdamP", "NpuFusedLamb", "NpuFusedAdadelta",
           "NpuFusedRMSprop", "NpuFusedRMSpropTF", "from_torch"]

# torch.optim classes with a fused twin of the same semantics, and the options that carry over.
_TWINS = {
    torch.optim.SGD: NpuFusedSGD,
    torch.optim.Adam: NpuFusedAdam,
    torch.optim.AdamW: NpuFusedAdamW,
    torch.optim.Adadelta: NpuFusedAdadelta,
    torch.optim.RMSprop: NpuFusedRMSprop,
}
# Options of torch.optim that the fused twins do not have: accepted at these values only.
_TORCH_ONLY = {"maximize": False, "foreach": None, "capturable": False, "differentiable": False, "fused": False}


def from_torch(optimizer):
    """The NpuFused* twin of a torch.optim optimizer over the same parameters and groups (what
    amp.initialize uses where master weights need a fused optimizer). It must not have stepped."""
    twin = _TWINS.get(type(optimizer))
    if twin is None:
        raise TypeError(f"{type(optimizer).__name__} has no npuscope fused twin; use one of "
                        f"{', '.join(c.__name__ for c in _TWINS.values())} or an npuscope.optimizers class")
    if any(optimizer.state.values()):
        raise RuntimeError(f"{type(optimizer).__name__} has already stepped; convert it before the first step")
    groups = []
    for g in optimizer.param_groups:
        entry = {"params": g["params"]}
        for k, v in g.items():
            if k == "params":
                continue
            if k in _TORCH_ONLY:
                if v not in (_TORCH_ONLY[k], None, False):
                    raise ValueError(f"{type(optimizer).__name__}: option {k}={v} has no fused equivalent")
                continue
            if k in twin._defaults:
                entry[k] = v
        groups.append(entry)
    first = {k: v for k, v in groups[0].items() if k != "params"}
    return twin(groups, **first)
