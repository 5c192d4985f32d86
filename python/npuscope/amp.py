"""``from npuscope import amp``: apex's Amp API on the npu, run by npuscope's C++ amp.

    model, optimizer = amp.initialize(model, optimizer, opt_level="O2")
    with amp.scale_loss(loss, optimizer) as scaled_loss:
        scaled_loss.backward()
    optimizer.step()                     # skipped (parameters and state untouched) on overflow

Opt levels, presets and overrides, the loss scalers (static / dynamic with Ascend apex's
dynamic_init_scale, scale_growth_factor, scale_backoff_factor, scale_window), O1 casting,
master weights, combined gradients (combine_grad) and the overflow check (the npu's
float-status register or a non-finite check: overflow_check="auto" | "float_status" |
"non_finite") are the C++ amp's (amp/include/npuscope/amp/amp.h). This module only casts
nn.Modules (O2 keeps affine BatchNorm fp32), patches their forward (inputs to the model's dtype,
O1 casting inside, outputs to fp32) and wires the optimizer:

* an npuscope.optimizers.NpuFused* optimizer is rebuilt over the cast parameters, with fp32
  master weights where the level has them;
* a torch.optim optimizer keeps stepping itself (O0, O1, O3, O2 with master_weights=False),
  amp skipping its step on overflow; where master weights are needed (O2) it is replaced by its
  NpuFused twin (SGD, Adam, AdamW, Adadelta, RMSprop) — use the optimizer initialize returns.

One amp state per process, as in apex; one optimizer per initialize. Also here:
``autocast`` and ``GradScaler`` with torch.amp's semantics (the C++ GradScaler).
"""
import atexit
import contextlib
import functools
import types

import torch
import torch.distributed as _dist

from . import _C
from . import _wiring
from . import optimizers as _optimizers
from . import profiler as _profiler

__all__ = ["initialize", "scale_loss", "master_params", "state_dict", "load_state_dict", "autocast", "GradScaler",
           "properties", "loss_scale"]


class _AmpState:
    def __init__(self):
        self.optimizer = None   # the Python optimizer amp steps
        self.fused = False
        self.plain_step = None  # a torch.optim optimizer's own step, when amp patched it
        self.models = []


_state = _AmpState()


def _as_list(x):
    if x is None:
        return [], False
    if isinstance(x, (list, tuple)):
        return list(x), True
    return [x], False


def _bool_opt(name, v):
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str) and v in ("True", "False"):  # apex accepts the strings too
        return v == "True"
    raise ValueError(f"amp.initialize: {name}={v!r}: expected True, False or None")


def _dtype_opt(name, v):
    if v is None:
        return None
    names = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
    if isinstance(v, torch.dtype):
        if v not in names:
            raise ValueError(f"amp.initialize: {name}={v}: expected torch.float32, torch.float16 or torch.bfloat16")
        return names[v]
    return str(v)


_DTYPES = {"Float": torch.float32, "Half": torch.float16, "BFloat16": torch.bfloat16}


def _options(**kw):
    o = {}
    for k, v in kw.items():
        if v is None:
            continue
        if k in ("keep_batchnorm_fp32", "master_weights", "patch_torch_functions", "combine_grad", "enabled"):
            v = _bool_opt(k, v)
        elif k in ("cast_model_type", "cast_model_outputs", "low_precision"):
            v = _dtype_opt(k, v)
        elif k == "loss_scale":
            v = str(v) if isinstance(v, str) else repr(float(v))
        o[k] = v
    return o


# ---- models --------------------------------------------------------------------------------
def _cast_model(model, dtype, keep_bn):
    with torch.no_grad():
        for module in model.modules():
            if keep_bn and isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and module.affine:
                continue
            for name, p in list(module.named_parameters(recurse=False)):
                if p.is_floating_point() and p.dtype != dtype:
                    p.data = p.data.to(dtype)
                    p.grad = None
            for name, b in list(module.named_buffers(recurse=False)):
                if b.is_floating_point() and b.dtype != dtype:
                    module._buffers[name] = b.to(dtype)


def _map_tensors(obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(_map_tensors(x, fn) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensors(x, fn) for x in obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    return obj


def _patch_forward(model):
    if getattr(model, "_npuscope_amp_forward", None) is not None:
        model.forward = model._npuscope_amp_forward  # initialize() again: re-patch the original
    original = model.forward

    @functools.wraps(original)
    def forward(*args, **kwargs):
        args = _map_tensors(args, _C.amp.cast_input)
        kwargs = _map_tensors(kwargs, _C.amp.cast_input)
        with _C.amp.ForwardScope():
            out = original(*args, **kwargs)
        return _map_tensors(out, _C.amp.cast_output)

    model.forward = forward
    model._npuscope_amp_forward = original


def _named_params(models):
    names = []
    for i, m in enumerate(models):
        prefix = "" if len(models) == 1 else f"model{i}."
        names += [(prefix + n, p) for n, p in m.named_parameters()]
    return names


# ---- initialize ----------------------------------------------------------------------------
def _reduce_overflow(local):
    """A rank of a torch.distributed job skips a step when any rank overflowed (apex on Ascend
    all-reduces the flag), so every rank keeps the same loss scale and parameters."""
    if not (_dist.is_available() and _dist.is_initialized()) or _dist.get_world_size() == 1:
        return local
    flag = torch.tensor([1.0 if local else 0.0])
    _dist.all_reduce(flag, op=_dist.ReduceOp.MAX)
    return bool(flag.item())


_C.amp.set_overflow_reducer(_reduce_overflow)
atexit.register(_C.amp.set_overflow_reducer, None)  # not a Python callable past finalization


def initialize(models, optimizers=None, enabled=True, opt_level="O1", cast_model_type=None,
               patch_torch_functions=None, keep_batchnorm_fp32=None, master_weights=None, loss_scale=None,
               cast_model_outputs=None, num_losses=1, verbosity=1, min_loss_scale=None, max_loss_scale=2.**24,
               combine_grad=None, dynamic_init_scale=None, scale_growth_factor=None, scale_backoff_factor=None,
               scale_window=None, low_precision=None, overflow_check="auto"):
    """apex.amp.initialize: returns the model(s) and optimizer(s) in the shape they were given
    (a single object or a list). Use the returned optimizer: it may be a rebuilt one."""
    model_list, models_were_list = _as_list(models)
    opt_list, opts_were_list = _as_list(optimizers)
    if not model_list:
        raise ValueError("amp.initialize: no model given")
    for m in model_list:
        if not isinstance(m, torch.nn.Module):
            raise TypeError(f"amp.initialize: expected torch.nn.Module models, got {type(m).__name__}")
    if len(opt_list) > 1:
        raise ValueError(f"amp.initialize: {len(opt_list)} optimizers given; npuscope's amp drives one optimizer "
                         "(put the parameters in param groups of one)")
    opts = _options(opt_level=opt_level, cast_model_type=cast_model_type, patch_torch_functions=patch_torch_functions,
                    keep_batchnorm_fp32=keep_batchnorm_fp32, master_weights=master_weights, loss_scale=loss_scale,
                    cast_model_outputs=cast_model_outputs, num_losses=num_losses, verbosity=verbosity,
                    min_loss_scale=min_loss_scale,
                    # apex's signature default; only a different cap is an explicit option
                    max_loss_scale=None if max_loss_scale == 2.**24 else max_loss_scale, combine_grad=combine_grad,
                    dynamic_init_scale=dynamic_init_scale, scale_growth_factor=scale_growth_factor,
                    scale_backoff_factor=scale_backoff_factor, scale_window=scale_window,
                    low_precision=low_precision, overflow_check=overflow_check, enabled=enabled)
    props = _C.amp.resolve_options(opts)  # refuses contradictions before anything changes
    optimizer = opt_list[0] if opt_list else None
    masters = props["enabled"] and props["master_weights"]
    fused = isinstance(optimizer, _optimizers._NpuFusedOptimizer)
    # Everything that can refuse runs before the models or the optimizer change.
    if optimizer is not None:
        _check_optimizer(optimizer, fused, masters, props)
        if not fused and masters:
            optimizer = _optimizers.from_torch(optimizer)
            fused = True

    _restore_plain_step()
    if props["enabled"] and props["cast_model_type"] is not None:
        dtype = _DTYPES[props["cast_model_type"]]
        keep_bn = props["keep_batchnorm_fp32"] and dtype != torch.float32
        for m in model_list:
            _cast_model(m, dtype, keep_bn)
    for m in model_list:
        _patch_forward(m)
    names = _named_params(model_list)

    if optimizer is None:
        params = [p for _, p in names if p.requires_grad]
        plain = dict(opts, master_weights=False)  # no optimizer: nothing steps masters (inference)
        props = _C.amp.initialize_plain(params, plain, names)
        _state.fused = False
    elif fused:
        core = optimizer._build(master_weights=masters, keep_state=False)
        props = _C.amp.initialize_fused(core, opts, names)
        _state.fused = True
    else:
        params = [p for g in optimizer.param_groups for p in g["params"]]
        props = _C.amp.initialize_plain(params, opts, names)
        _state.fused = False
        _patch_plain_step(optimizer)
    _state.optimizer = optimizer
    _state.models = model_list
    _profiler._amp_initialized(props, optimizer)

    models_out = model_list if models_were_list else model_list[0]
    if optimizer is None:
        return models_out
    return models_out, ([optimizer] if opts_were_list else optimizer)


def _check_optimizer(optimizer, fused, masters, props):
    name = type(optimizer).__name__
    if fused:
        stepped = optimizer._core.step_count if optimizer._core is not None else 0
    else:  # a torch.optim optimizer is only rebuilt (to its fused twin) for master weights
        stepped = masters and any(float(st.get("step", 0)) > 0 for st in optimizer.state.values())
    if stepped:
        raise RuntimeError(f"amp.initialize: {name} has optimizer state already (it stepped, or a state_dict was "
                           "loaded); initialize amp first, then load checkpoints, as apex requires")
    if fused and not props["combine_grad"]:
        raise ValueError(f"amp.initialize: combine_grad=False: {name} keeps its gradients combined; the fused "
                         "optimizers need combine_grad")
    if not fused and masters:
        if type(optimizer) not in _optimizers._TWINS:
            _optimizers.from_torch(optimizer)  # raises the clear TypeError
        if getattr(optimizer.step, "_with_counter", False):
            raise RuntimeError(f"amp.initialize: opt_level {props['opt_level']} replaces {name} by its fused twin "
                               "(fp32 master weights), but an LR scheduler already drives it; create the scheduler "
                               "after amp.initialize, on the optimizer it returns")


def _owns(optimizer):
    return _state.optimizer is optimizer and _C.amp.is_initialized()


def _patch_plain_step(optimizer):
    original = optimizer.step

    @functools.wraps(original)
    def step(*args, **kwargs):
        if not _owns(optimizer):
            return original(*args, **kwargs)
        result = []
        _profiler._optimizer_seen(optimizer)
        with _profiler._step_scope():
            _C.amp.step_plain(lambda: result.append(original(*args, **kwargs)))
        return result[0] if result else None

    # A bound method, as apex patches it: LR schedulers wrap optimizer.step and need __self__.
    optimizer.step = types.MethodType(lambda self, *a, **k: step(*a, **k), optimizer)
    _state.plain_step = (optimizer, original)


def _restore_plain_step():
    if _state.plain_step is not None:
        opt, original = _state.plain_step
        opt.step = original
        _state.plain_step = None


def _step(optimizer):
    """amp's step of a fused optimizer: skipped when this step overflowed."""
    optimizer._sync()
    _profiler._optimizer_seen(optimizer)
    return _C.amp.step_fused(optimizer.core)


# A fused optimizer's step and add_param_group ask these (optimizers.py does not import amp).
_wiring.amp_owns = _owns
_wiring.amp_step = _step
_wiring.amp_optimizer = lambda: _state.optimizer


def _require():
    if not _C.amp.is_initialized():
        raise RuntimeError("amp: amp.initialize() has not been called")


@contextlib.contextmanager
def scale_loss(loss, optimizers, loss_id=0, model=None, delay_unscale=False, delay_overflow_check=False):
    """apex's ``with amp.scale_loss(loss, optimizer) as scaled_loss: scaled_loss.backward()``:
    the loss times the loss scale; leaving the block unscales the gradients, checks for overflow
    and updates the scale. An exception inside the block leaves gradients and scale alone."""
    _require()
    opt_list, _ = _as_list(optimizers)
    if len(opt_list) != 1 or not _owns(opt_list[0]):
        raise RuntimeError("amp.scale_loss: pass the optimizer amp.initialize() returned")
    if delay_unscale:
        raise NotImplementedError("amp.scale_loss: delay_unscale is not supported (apex deprecates it too): "
                                  "accumulate gradients over several scale_loss blocks instead")
    opt = opt_list[0]
    _profiler._loss_seen(loss)
    scope = _C.amp.scale_loss(loss, opt.core if _state.fused else None, loss_id)
    try:
        yield scope.scaled
    except BaseException:
        scope.abandon()
        raise
    scope.finish()


def master_params(optimizer):
    """The parameters the optimizer steps: the fp32 masters under master weights."""
    if _owns(optimizer) and _state.fused:
        yield from optimizer.core.stepped_params()
    else:
        for g in optimizer.param_groups:
            yield from g["params"]


def loss_scale(loss_id=0):
    _require()
    return _C.amp.loss_scale(loss_id)


def properties():
    """The resolved options (apex's amp._amp_state.opt_properties), as a dict."""
    _require()
    return dict(_C.amp.properties())


def state_dict(destination=None):
    """apex's ``{"loss_scaler0": {"loss_scale": ..., "unskipped": ...}, ...}``."""
    _require()
    flat = _C.amp.state_dict()
    out = destination if destination is not None else {}
    for key, t in flat.items():
        scaler, field = key.split(".")
        out.setdefault(scaler, {})[field] = float(t) if field == "loss_scale" else int(t)
    return out


def load_state_dict(state):
    _require()
    flat = {}
    for scaler, fields in state.items():
        flat[f"{scaler}.loss_scale"] = torch.tensor(float(fields["loss_scale"]), dtype=torch.float64)
        flat[f"{scaler}.unskipped"] = torch.tensor(int(fields["unskipped"]), dtype=torch.int64)
    _C.amp.load_state_dict(flat)


# ---- torch.amp semantics ---------------------------------------------------------------------
class autocast:  # noqa: N801  (torch's name)
    """torch.autocast for npu ops (apex's O1 lists, docs/amp): a context manager or decorator.
    CPU tensors are left alone (CPU kernels lack fp16)."""

    def __init__(self, enabled=True, dtype=torch.float16, cache_enabled=True, device_type="npu"):
        if dtype not in (torch.float16, torch.bfloat16):
            raise ValueError(f"autocast: dtype {dtype}: expected torch.float16 or torch.bfloat16")
        self._enabled = bool(enabled)
        self._dtype = "float16" if dtype == torch.float16 else "bfloat16"
        self._guard = None

    def __enter__(self):
        self._guard = _C.amp.Autocast(self._enabled, self._dtype)
        self._guard.__enter__()
        return self

    def __exit__(self, *exc):
        self._guard.__exit__(*exc)
        self._guard = None
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(self._enabled, _DTYPES["Half" if self._dtype == "float16" else "BFloat16"]):
                return fn(*args, **kwargs)
        return wrapped


_routed_autocast = set()  # device types torch.autocast hands to npuscope's autocast


def route_torch_autocast(*device_types):
    """Makes ``torch.autocast(device_type)`` npuscope's npu autocast for `device_types` ("npu"
    for torch_npu scripts; "cuda" too under transfer_to_npu); other types stay torch's."""
    if not _routed_autocast:
        original = torch.autocast

        class _autocast(original):  # noqa: N801
            def __new__(cls, device_type, dtype=None, enabled=True, cache_enabled=None):
                if device_type in _routed_autocast:
                    return autocast(enabled=enabled, dtype=dtype or torch.float16)
                return original(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
        _autocast.__doc__ = original.__doc__
        torch.autocast = _autocast
    _routed_autocast.update(device_types)


class GradScaler:
    """torch.cuda.amp.GradScaler's API and semantics (the C++ GradScaler): works with
    npuscope.optimizers (unscaled into fp32 masters where they have them) and with torch.optim
    optimizers over fp32 parameters."""

    def __init__(self, init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._cxx = _C.amp.GradScaler(float(init_scale), float(growth_factor), float(backoff_factor),
                                      int(growth_interval), bool(enabled))

    def scale(self, outputs):
        if isinstance(outputs, torch.Tensor):
            _profiler._loss_seen(outputs)
            return self._cxx.scale(outputs)
        return _map_tensors(outputs, self._cxx.scale)

    @staticmethod
    def _grads(optimizer):
        # Parameters without a gradient (frozen, unused) are left out, as torch's scaler does.
        return [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]

    def unscale_(self, optimizer):
        if isinstance(optimizer, _optimizers._NpuFusedOptimizer):
            optimizer._sync()
            self._cxx.unscale_fused(optimizer.core)
        else:
            self._cxx.unscale_plain(id(optimizer), type(optimizer).__name__, self._grads(optimizer))

    def step(self, optimizer, *args, **kwargs):
        if isinstance(optimizer, _optimizers._NpuFusedOptimizer):
            if args or kwargs:
                raise TypeError("GradScaler.step: closures are not supported with fused optimizers")
            optimizer._sync()
            _profiler._optimizer_seen(optimizer)
            self._cxx.step_fused(optimizer.core)
            return None
        result = []
        _profiler._optimizer_seen(optimizer)
        with _profiler._suppress_auto_step():  # the step ends at update()
            self._cxx.step_plain(id(optimizer), type(optimizer).__name__, self._grads(optimizer),
                                 lambda: result.append(optimizer.step(*args, **kwargs)))
        return result[0] if result else None

    def update(self, new_scale=None):
        if isinstance(new_scale, torch.Tensor):
            new_scale = float(new_scale)
        self._cxx.update(new_scale)
        _profiler._optimizer_stepped(None, None)

    def get_scale(self):
        return self._cxx.get_scale()

    def get_growth_factor(self):
        return self._cxx.get_growth_factor()

    def get_backoff_factor(self):
        return self._cxx.get_backoff_factor()

    def get_growth_interval(self):
        return self._cxx.get_growth_interval()

    def is_enabled(self):
        return self._cxx.is_enabled()

    def state_dict(self):
        flat = self._cxx.state_dict()
        return {k: (int(v) if k in ("growth_interval", "_growth_tracker") else float(v)) for k, v in flat.items()}

    def load_state_dict(self, state):
        flat = {}
        for k, v in state.items():
            dtype = torch.int64 if k in ("growth_interval", "_growth_tracker") else torch.float64
            flat[k] = torch.tensor(v, dtype=dtype)
        self._cxx.load_state_dict(flat)
