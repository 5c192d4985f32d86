"""Recording a Python training run into an npuscope trace file (the same RecordingSession, file
and schema as ``npuscope train``; read it with ``npuscope report``, ``export``, the GUI)::

    with npuscope.profile(db="run.db", schedule="wait=1,warmup=1,active=3") as prof:
        for x, y in loader:
            ...
            prof.step(loss)          # optional: without it, steps end at each optimizer step

Every op on every thread is recorded by the C++ profiler; ``nn.Module`` calls appear as scopes
("nn.Module: layer1.0.conv1 (Conv2d)") like torch.profiler's with_modules, and
``npuscope.record_function(name)`` adds scopes of your own. Loss scale, overflow and skipped
flags come from npuscope.amp (apex API, autocast/GradScaler) without user code.
``ACL_DUMP_DATA=1`` with ./acl.json, or ``dump_config="acl.json"`` (``npuscope.dump``), dumps
op tensors into the same file as the CLI does.
"""
import contextlib
import json
import os
import sys
import threading
import warnings

import torch

from . import _C
from . import _wiring

__all__ = ["profile", "Profile", "record_function", "dump", "schedule"]

_active = None        # the Profile recording now
_suppress = threading.local()


def schedule(skip_first=0, wait=0, warmup=0, active=1 << 30, repeat=0):
    """torch.profiler.schedule's parameters as the schedule string npuscope takes."""
    return f"skip_first={skip_first},wait={wait},warmup={warmup},active={active},repeat={repeat}"


def _schedule_text(s):
    if s is None:
        return ""
    if isinstance(s, str):
        return s
    if isinstance(s, dict):
        return schedule(**s)
    raise TypeError("profile: schedule must be a string such as 'wait=1,warmup=1,active=3' or a dict "
                    "(torch.profiler.schedule callables cannot be read; use npuscope.profiler.schedule(...))")



_jobs_profiled = 0


def _job_id(dist):
    """The job this rank's run belongs to, the same on every rank: $NPUSCOPE_JOB when set, else
    rank 0 names it and the others read it from the process group's store (one key per
    recording, so every rank's n-th recording shares the name)."""
    global _jobs_profiled
    if os.environ.get("NPUSCOPE_JOB"):
        return os.environ["NPUSCOPE_JOB"]
    _jobs_profiled += 1
    key = "npuscope/job/%d" % _jobs_profiled
    store = dist.distributed_c10d._get_default_store()
    if dist.get_rank() == 0:
        import socket
        import time
        store.set(key, "%s-%d-%d" % (socket.gethostname(), os.getpid(), int(time.time())))
    return store.get(key).decode()

class record_function(torch.autograd.profiler.record_function):  # noqa: N801  (torch's name)
    """A named scope around the ops inside it (a user scope of the trace), as
    torch.profiler.record_function; a context manager or decorator."""


def _launched_rank():
    """rank / world_size / job from torchrun's environment (RANK, WORLD_SIZE; the job from
    NPUSCOPE_JOB, else the store's MASTER_ADDR:MASTER_PORT, the same on every rank); {} outside."""
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        return {}
    if world <= 1:
        return {}
    job = os.environ.get("NPUSCOPE_JOB") or "%s:%s" % (os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", ""))
    return {"rank": rank, "world_size": world, "job": job}


_files_profiled = 0


def _rank_file(db, dist):
    """The file a rank of a job records into. Ranks given the same path (the natural thing to
    write) would write one file and lose their ops to each other: rank N > 0 then records into
    ``<stem>.rank<N>.db`` beside rank 0's, and ``report --cluster <db>`` finds the siblings. With a
    process group, "the same path" is rank 0's, read from the group's store; before one exists
    (torchrun's RANK / WORLD_SIZE only), any path that does not name the rank is taken as shared."""
    global _files_profiled
    if dist.is_available() and dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
        if world <= 1:
            return db
        _files_profiled += 1
        key = "npuscope/db/%d" % _files_profiled
        store = dist.distributed_c10d._get_default_store()
        if rank == 0:
            store.set(key, os.path.abspath(db))
            return db
        shared = store.get(key).decode() == os.path.abspath(db)
    else:
        try:
            rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
        except ValueError:
            rank, world = 0, 1
        shared = world > 1 and rank > 0 and f"rank{rank}" not in os.path.basename(db)
    if not shared:
        return db
    path = _C.profiler.rank_file_path(db, rank)
    print(f"npuscope.profile: rank {rank} of {world} records into {path} (rank 0 into {db})", file=sys.stderr)
    return path


class Profile:
    """A recording; ``npuscope.profile(...)`` makes one. Use it as a context manager, or call
    start() and stop()."""

    def __init__(self, db="npuscope.db", schedule=None, record_shapes=True, profile_memory=True, with_modules=True,
                 dump_config=None, command=None):
        self.db = str(db)
        self._schedule = _schedule_text(schedule)
        self._record_shapes = bool(record_shapes)
        self._memory = bool(profile_memory)
        self._with_modules = bool(with_modules)
        self._dump_config = str(dump_config) if dump_config else ""
        self._command = command or ("python3 " + " ".join(sys.argv) if sys.argv and sys.argv[0] else "python3")
        self._session = None
        self._final = {}            # run_id, current_step, recorded_ops once stopped
        self._outer = None          # an enclosing recording this one forwards to
        self._explicit = False      # the script calls step() itself
        self._auto_stepped = False  # a step was ended at an optimizer step
        self._hooks = []
        self._names = {}            # id(module) -> qualified name, from the root module's walk
        self._info = {}
        self._last_loss = None
        self._optimizer = None

    # ---- life cycle ------------------------------------------------------------------------
    def start(self):
        global _active
        if _active is not None:
            # `npuscope run` records already (or profiles nest): this one rides on it.
            warnings.warn(f"npuscope.profile({self.db!r}): a recording into {_active.db!r} is already active; "
                          "steps go to that one", stacklevel=3)
            self._outer = _active
            return self
        run = {"command": self._command, "device": "npu:%d" % _C.npu.current_device()}
        import torch.distributed as _dist
        if _dist.is_available() and _dist.is_initialized():  # a rank of a job: the file says which
            run.update(rank=_dist.get_rank(), world_size=_dist.get_world_size(), job=_job_id(_dist))
        else:  # started by a launcher (npuscope run --nproc, torchrun) before the script joins its group
            run.update(_launched_rank())
        self.db = _rank_file(self.db, _dist)
        self._session = _C.profiler.LoopSession(self.db, run, self._schedule, self._record_shapes, self._memory,
                                                self._dump_config)
        _active = self
        if _C.amp.is_initialized():  # amp set up before the recording started
            _amp_initialized(_C.amp.properties(), _wiring.amp_optimizer())
        if self._with_modules:
            self._install_module_hooks()
        self._patch_torch_optimizers()
        return self

    def stop(self, status="completed", results=None):
        """Ends the run with ``status`` ("completed", "failed"); ``results`` (a dict) joins the
        run's results_json. Returns the run id."""
        global _active
        if self._outer is not None or self._session is None:
            return self.run_id
        for h in self._hooks:
            h.remove()
        self._hooks = []
        torch.autograd.profiler.record_function = _torch_record_function
        out = dict(self._info)
        from . import npu as _npu
        if _npu.get_options():  # torch_npu's set_option / set_compile_mode: kept with the run
            out["npu_options"] = {k: v if isinstance(v, (bool, int, float, str)) else str(v)
                                  for k, v in _npu.get_options().items()}
        if results:
            out.update(results)
        probe = sys.modules.get("npuscope.msprobe")
        if probe is not None:  # a dumped step's rows still on their way into this file
            probe._before_recording_stops(self)
        if _active is self:
            _active = None
        session, self._session = self._session, None
        run_id = session.run_id
        try:
            st = session.stop(status, json.dumps(out) if out else "")
        finally:
            self._final = {"run_id": run_id, "current_step": session.current_step,
                           "recorded_ops": session.recorded_ops}
            # The file is closed now, not when the interpreter gets round to it: its WAL is
            # checkpointed, so the .db alone holds the whole run.
            del session
        if not st.ok():
            raise RuntimeError(f"npuscope.profile: {st.message}")
        return run_id

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.stop("completed")
        else:
            line = "".join(f"{exc_type.__name__}: {exc}".splitlines()[:1])
            self.stop("failed", {"error": "interrupted" if exc_type is KeyboardInterrupt else line})
        return False

    # ---- steps -----------------------------------------------------------------------------
    def step(self, loss=None):
        """Ends the current step (with its loss, a float or a one-element tensor) and begins the
        next. Once a script calls it, steps are no longer ended at optimizer steps."""
        if self._outer is not None:
            return self._outer.step(loss)
        if not self._explicit and self._auto_stepped:
            # The first call of a script that steps itself, right after an optimizer step already
            # ended this iteration's step automatically: that boundary stands (no empty step),
            # and the loss given here goes into that step's row.
            self._explicit = True
            value = self._loss_value(loss)
            if value is not None:
                self._session.amend_last_loss(value)
            return
        self._explicit = True
        self._end_step(loss)

    def _end_step(self, loss):
        loss = self._loss_value(self._last_loss if loss is None else loss)
        lr = None
        if self._optimizer is not None and getattr(self._optimizer, "param_groups", None):
            lr = float(self._optimizer.param_groups[0].get("lr", float("nan")))
        self._last_loss = None
        self._session.step(loss, lr)

    @staticmethod
    def _loss_value(loss):
        if isinstance(loss, torch.Tensor):
            return float(loss.detach().float().cpu()) if loss.numel() == 1 else None
        return None if loss is None else float(loss)

    @property
    def run_id(self):
        if self._outer is not None:
            return self._outer.run_id
        return self._session.run_id if self._session is not None else self._final.get("run_id")

    @property
    def current_step(self):
        target = self._outer or self
        return target._session.current_step if target._session is not None else target._final.get("current_step")

    @property
    def recorded_ops(self):
        target = self._outer or self
        return target._session.recorded_ops if target._session is not None else target._final.get("recorded_ops", 0)

    # ---- module scopes ---------------------------------------------------------------------
    def _module_name(self, module):
        name = self._names.get(id(module))
        if name is None:
            # A module called outside any known root: it becomes a root; name its tree.
            for sub_name, sub in module.named_modules():
                self._names.setdefault(id(sub), sub_name)
            if self._memory:
                _tag_parameters(module)
            name = self._names.get(id(module), "")
        label = type(module).__name__
        return f"nn.Module: {name} ({label})" if name else f"nn.Module: {label}"

    def _install_module_hooks(self):
        # Module.__call__ itself is wrapped while recording (not forward hooks): the scope ends
        # even when the forward raises, so later modules never nest under a failed one.
        original = torch.nn.Module.__call__
        labels = {}  # id(module) -> its scope's name, as _names names it
        name_of = self._module_name
        call = _C.profiler.call_in_scope

        def __call__(module, *args, **kwargs):
            label = labels.get(id(module))
            if label is None:
                label = labels[id(module)] = name_of(module)
            return call(label, original, module, args, kwargs)

        torch.nn.Module.__call__ = __call__
        self._hooks.append(_Restore(torch.nn.Module, "__call__", original))

    # ---- optimizer steps -------------------------------------------------------------------
    def _patch_torch_optimizers(self):
        # torch 1.13 wraps every torch.optim.Optimizer subclass's step in a record_function named
        # "Optimizer.step#<class>.step" (looked up at each call), whoever calls it: the class, a
        # bound method an LR scheduler kept, a subclass calling super().step(). While recording,
        # that name resolves to _StepScope, whose outermost exit ends a step. npuscope's own
        # optimizers are such subclasses too.
        torch.autograd.profiler.record_function = _StepScope


def _tag_parameters(root):
    """Memory by owner: a root module's npu parameters are `parameter` blocks, named (amp tags
    them itself; a parameter inside a combined buffer gives the buffer only its category)."""
    for name, p in root.named_parameters():
        if p.device.type != "privateuseone" or _C.npu.memory_tag(p) != "untagged":
            continue
        own = p.storage().size() == p.numel()
        _C.npu.tag_memory(p, "parameter", name if own else "")


class _Restore:
    """Puts an attribute back when removed (a hook handle for a patch)."""

    def __init__(self, owner, name, value):
        self.owner, self.name, self.value = owner, name, value

    def remove(self):
        setattr(self.owner, self.name, self.value)


_torch_record_function = torch.autograd.profiler.record_function
_step_depth = threading.local()


@contextlib.contextmanager
def _step_scope():
    """An optimizer step that torch's hook does not wrap (amp's patched step of a torch.optim
    optimizer, which may skip the real one): the step ends when it returns."""
    _step_depth.n = getattr(_step_depth, "n", 0) + 1
    try:
        yield
    finally:
        _step_depth.n -= 1
    if _step_depth.n == 0:
        _optimizer_stepped(None, None)


class _StepScope(_torch_record_function):
    """torch's record_function, which also ends a recorded step when the outermost optimizer
    step ("Optimizer.step#...") of this thread returns."""

    def __init__(self, name, args=None):
        super().__init__(name, args)
        self._step = name.startswith("Optimizer.step#")

    def __enter__(self):
        if self._step:
            _step_depth.n = getattr(_step_depth, "n", 0) + 1
            # torch's wrapper holds the optimizer as `obj`: the step's lr is read from it.
            caller = sys._getframe(1).f_locals.get("obj")
            if isinstance(caller, torch.optim.Optimizer) and _step_depth.n == 1:
                _optimizer_seen(caller)
        return super().__enter__()

    def __exit__(self, *exc):
        out = super().__exit__(*exc)
        if self._step:
            _step_depth.n -= 1
            if _step_depth.n == 0 and exc[0] is None:
                _optimizer_stepped(None, None)
        return out


def profile(db="npuscope.db", schedule=None, record_shapes=True, profile_memory=True, with_modules=True,
            dump_config=None):
    """A recording into the trace file ``db`` (created when missing; runs are appended)."""
    return Profile(db, schedule, record_shapes, profile_memory, with_modules, dump_config)


def dump(config=None, db="npuscope.db", format="acl", **kwargs):
    """A recording that also dumps op tensors as ``config`` (an acl.json) says, whatever
    ACL_DUMP_DATA is: the dumps are rows of the trace file ``db`` (and Ascend dump files when the
    config has a dump_path), as ``ACL_DUMP_DATA=1 npuscope train`` makes them.

    ``format="msprobe"``: msprobe's dump instead, a PrecisionDebugger (npuscope.msprobe) of the
    msprobe config.json ``config`` or of msprobe's keys given here (task, dump_path, level, step,
    model, ...); ``with npuscope.dump(format="msprobe", dump_path="d", model=net) as dbg:`` dumps
    the block; ``dbg.step()`` ends a step."""
    if format == "msprobe":
        from . import msprobe
        return msprobe.PrecisionDebugger(config_path=config, **kwargs)
    if format != "acl":
        raise ValueError(f"dump format '{format}' is not provided (expected acl or msprobe)")
    return Profile(db, dump_config=config or "acl.json", **kwargs)


# ---- hooks for npuscope.amp and npuscope.optimizers ------------------------------------------
@contextlib.contextmanager
def _suppress_auto_step():
    depth = getattr(_suppress, "depth", 0)
    _suppress.depth = depth + 1
    try:
        yield
    finally:
        _suppress.depth = depth


def _optimizer_seen(optimizer):
    """The optimizer a step's lr is read from."""
    p = _active
    if p is not None and p._session is not None:
        p._optimizer = optimizer
        p._info.setdefault("optimizer", type(optimizer).__name__)


def _optimizer_stepped(optimizer, loss):
    """An optimizer step (or GradScaler.update) finished: the end of a step for scripts that
    never call Profile.step()."""
    p = _active
    if p is None or p._session is None:
        return
    if optimizer is not None:
        p._optimizer = optimizer
        p._info.setdefault("optimizer", type(optimizer).__name__)
    if not p._explicit and getattr(_suppress, "depth", 0) == 0:
        p._auto_stepped = True
        p._end_step(loss)


# A fused optimizer stepping outside amp tells the recorder (optimizers.py does not import it).
_wiring.optimizer_seen = _optimizer_seen


def _loss_seen(loss):
    p = _active
    if p is not None and p._session is not None:
        p._last_loss = loss


def _amp_initialized(props, optimizer):
    p = _active
    if p is not None and p._session is not None:
        p._info["opt_level"] = props["opt_level"]
        if optimizer is not None:
            p._info["optimizer"] = type(optimizer).__name__
            p._optimizer = optimizer
