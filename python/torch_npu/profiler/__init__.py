"""torch_npu.profiler on npuscope (npuscope-emulation): torch_npu's profiler API over npuscope's
recording, writing the folder a card's profile leaves::

    import torch_npu
    experimental_config = torch_npu.profiler._ExperimentalConfig(
        export_type=torch_npu.profiler.ExportType.Text,
        profiler_level=torch_npu.profiler.ProfilerLevel.Level0)
    with torch_npu.profiler.profile(
            activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
            schedule=torch_npu.profiler.schedule(wait=1, warmup=1, active=3, repeat=1),
            on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./result"),
            record_shapes=True, profile_memory=True,
            experimental_config=experimental_config) as prof:
        for step in range(steps):
            train_one_step()
            prof.step()

Every active cycle of the schedule is recorded by npuscope (its trace file: ``npuscope.db`` in
the handler's folder, ``npuscope.db`` in the working directory otherwise, or the recording of
``npuscope run``); at the cycle's end ``on_trace_ready`` runs, and tensorboard_trace_handler
writes ``{worker}_{timestamp}_ascend_pt/`` with torch_npu's files (the C++ writer of
analysis/ascend_pt_export.h). Its device rows are the kernels a real card would run, predicted by
npuscope's cost model; profiler_metadata.json says so. What is kept but not emulated (AI Core
metrics, L2 cache, the db export type) is listed in docs/python.md.
"""
import enum
import json
import os
import shutil
import socket
import sys
import tempfile
import warnings

import torch
from torch.profiler import ProfilerAction

import npuscope
from npuscope import _C
from npuscope import profiler as _npuscope_profiler

__all__ = ["profile", "schedule", "tensorboard_trace_handler", "ProfilerActivity", "ProfilerAction",
           "ExportType", "ProfilerLevel", "AiCMetrics", "_ExperimentalConfig", "supported_activities",
           "supported_profiler_level", "supported_ai_core_metrics", "supported_export_type", "record_function",
           "analyse"]

record_function = torch.autograd.profiler.record_function


class ProfilerActivity(enum.Enum):
    CPU = "CPU"
    NPU = "NPU"

    def __str__(self):
        return "ProfilerActivity." + self.name


class ExportType:
    Text = "text"
    Db = "db"


class ProfilerLevel:
    Level_none = "Level_none"
    Level0 = "Level0"
    Level1 = "Level1"
    Level2 = "Level2"


class AiCMetrics:
    PipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    ArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    Memory = "ACL_AICORE_MEMORY_BANDWIDTH"
    MemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    MemoryUB = "ACL_AICORE_MEMORY_UB"
    ResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    L2Cache = "ACL_AICORE_L2_CACHE"
    AiCoreNone = "ACL_AICORE_NONE"


def supported_activities():
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}


def supported_profiler_level():
    return {ProfilerLevel.Level_none, ProfilerLevel.Level0, ProfilerLevel.Level1, ProfilerLevel.Level2}


def supported_ai_core_metrics():
    return {v for k, v in vars(AiCMetrics).items() if not k.startswith("_")}


def supported_export_type():
    return {ExportType.Text, ExportType.Db}


class _ExperimentalConfig:
    """torch_npu's experimental_config: every setting is kept and written to profiler_info.json.
    npuscope's device rows are predicted kernels at any level; AI Core metrics and the L2 cache
    are not emulated, and ExportType.Db writes the text export (with one line saying so)."""

    def __init__(self, profiler_level=ProfilerLevel.Level0, aic_metrics=AiCMetrics.AiCoreNone, l2_cache=False,
                 msprof_tx=False, data_simplification=True, record_op_args=False, op_attr=False,
                 gc_detect_threshold=None, export_type=ExportType.Text, **others):
        self._profiler_level = profiler_level
        self._aic_metrics = aic_metrics
        self._l2_cache = bool(l2_cache)
        self._msprof_tx = bool(msprof_tx)
        self._data_simplification = bool(data_simplification)
        self.record_op_args = bool(record_op_args)
        self._op_attr = bool(op_attr)
        self._gc_detect_threshold = gc_detect_threshold
        types = export_type if isinstance(export_type, (list, tuple)) else [export_type]
        for t in types:
            if t not in supported_export_type():
                raise ValueError(f"_ExperimentalConfig: export_type {t!r} is not one of {sorted(supported_export_type())}")
        self._export_type = types
        self._others = others

    def to_json(self):
        types = self._export_type
        out = {"_profiler_level": self._profiler_level, "_aic_metrics": self._aic_metrics, "_l2_cache": self._l2_cache,
               "_msprof_tx": self._msprof_tx, "_data_simplification": self._data_simplification,
               "record_op_args": self.record_op_args, "_export_type": types[0] if len(types) == 1 else types,
               "_op_attr": self._op_attr, "_gc_detect_threshold": self._gc_detect_threshold}
        out.update({"_" + k: v if isinstance(v, (bool, int, float, str, type(None))) else str(v)
                    for k, v in self._others.items()})
        return out


class schedule:  # noqa: N801  (torch_npu's name)
    """torch_npu.profiler.schedule: skip_first steps, then cycles of wait, warmup and active steps,
    repeat times (0: until the profile stops). Called with a step number it gives its
    torch.profiler.ProfilerAction, as torch's schedule does."""

    def __init__(self, wait, active, warmup=0, repeat=0, skip_first=0):
        for name, v in (("wait", wait), ("active", active), ("warmup", warmup), ("repeat", repeat),
                        ("skip_first", skip_first)):
            if not isinstance(v, int) or v < 0:
                raise ValueError(f"schedule: {name} must be a non-negative integer, got {v!r}")
        if active == 0:
            raise ValueError("schedule: active must be at least 1")
        self.wait, self.active, self.warmup, self.repeat, self.skip_first = wait, active, warmup, repeat, skip_first

    def __call__(self, step):
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        cycle = self.wait + self.warmup + self.active
        if self.repeat > 0 and step // cycle >= self.repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < self.wait:
            return ProfilerAction.NONE
        if at < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    def text(self):
        return _npuscope_profiler.schedule(skip_first=self.skip_first, wait=self.wait, warmup=self.warmup,
                                           active=self.active, repeat=self.repeat)

    def to_json(self):
        return {"wait": self.wait, "active": self.active, "warmup": self.warmup, "repeat": self.repeat,
                "skip_first": self.skip_first}


def _default_worker():
    return f"{socket.gethostname()}_{os.getpid()}"


class _TraceHandler:
    def __init__(self, dir_name, worker_name=None, analyse_flag=True, async_mode=False):
        self.dir_name = os.path.abspath(os.fspath(dir_name))
        self.worker_name = worker_name
        self.analyse_flag = analyse_flag

    def __call__(self, prof):
        return prof._export_ascend_pt(self.dir_name, self.worker_name or _default_worker())


def tensorboard_trace_handler(dir_name=None, worker_name=None, analyse_flag=True, async_mode=False):
    """on_trace_ready: each finished cycle becomes ``dir_name/{worker}_{timestamp}_ascend_pt``
    (dir_name defaults to $ASCEND_WORK_PATH/profiling_data or ./, as torch_npu's)."""
    if dir_name is None:
        work = os.environ.get("ASCEND_WORK_PATH")
        dir_name = os.path.join(work, "profiling_data") if work else "./"
    if worker_name is not None and not isinstance(worker_name, str):
        raise ValueError(f"tensorboard_trace_handler: worker_name must be a string, got {worker_name!r}")
    return _TraceHandler(dir_name, worker_name, analyse_flag, async_mode)


def analyse(profiler_path, max_process_number=None, export_type=None):
    """torch_npu's offline parse: npuscope's folders are written parsed already."""
    print(f"torch_npu.profiler.analyse: {profiler_path} was written parsed by npuscope; nothing to do", file=sys.stderr)


class profile:  # noqa: N801  (torch_npu's name)
    """torch_npu.profiler.profile: a context manager (or start()/stop()) with step()."""

    def __init__(self, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, use_cuda=None, **kwargs):
        self.activities = set(activities) if activities else supported_activities()
        for a in self.activities:
            if a not in supported_activities():
                raise ValueError(f"profile: activity {a!r} is not one of ProfilerActivity.CPU / ProfilerActivity.NPU")
        if experimental_config is None:
            experimental_config = _ExperimentalConfig()
        if not isinstance(experimental_config, _ExperimentalConfig):
            raise ValueError("profile: experimental_config must be a torch_npu.profiler._ExperimentalConfig")
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)
        self.with_stack, self.with_flops, self.with_modules = bool(with_stack), bool(with_flops), bool(with_modules)
        self.experimental_config = experimental_config
        self.step_num = 0
        self.current_action = ProfilerAction.RECORD
        self._recording = None
        self._cycle_first = None   # the npuscope step the cycle being recorded began at
        self._metadata = {}
        self._exports = []         # folders written
        if ExportType.Db in experimental_config._export_type:
            print("torch_npu.profiler: ExportType.Db is not emulated: the text export is written "
                  "(and npuscope's own trace file holds the run)", file=sys.stderr)

    # ---- life cycle ------------------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stop()
        return False

    def _action(self, step):
        return self.schedule(step) if self.schedule is not None else ProfilerAction.RECORD

    def start(self):
        if self._recording is not None:
            return
        self.step_num = 0
        self.current_action = self._action(0)
        db = "npuscope.db"
        if isinstance(self.on_trace_ready, _TraceHandler):
            os.makedirs(self.on_trace_ready.dir_name, exist_ok=True)
            db = os.path.join(self.on_trace_ready.dir_name, "npuscope.db")
        # torch_npu's own schedule is handed to the recorder (only active steps are recorded);
        # any other callable: every step is recorded and a cycle's steps are exported.
        text = self.schedule.text() if isinstance(self.schedule, schedule) else None
        self._recording = _npuscope_profiler.Profile(db=db, schedule=text, record_shapes=self.record_shapes,
                                                     profile_memory=self.profile_memory,
                                                     with_modules=self.with_modules)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # riding on `npuscope run`'s recording is the plan
            self._recording.start()
        self._ops_at_step = self._recording.recorded_ops
        self._begin_cycle_if_recording()

    def stop(self):
        if self._recording is None:
            return
        rec = self._recording
        if self._cycle_first is not None:  # a cycle cut short by the end (or no schedule): still saved
            if rec.recorded_ops > self._ops_at_step:  # the unfinished step holds ops: kept as a step
                rec.step()
            last = rec.current_step - 1
            if last >= self._cycle_first:
                self._trace_ready(last)
            self._cycle_first = None
        self._last_source = ((rec._outer or rec).db, rec.run_id)
        self._recording = None
        rec.stop()

    def step(self):
        if self._recording is None:
            return
        previous = self.current_action
        self._recording.step()
        self._ops_at_step = self._recording.recorded_ops
        self.step_num += 1
        self.current_action = self._action(self.step_num)
        if previous == ProfilerAction.RECORD_AND_SAVE and self._cycle_first is not None:
            self._trace_ready(self._recording.current_step - 1)
        self._begin_cycle_if_recording()

    def _begin_cycle_if_recording(self):
        if self._cycle_first is None and self.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._cycle_first = self._recording.current_step

    def _trace_ready(self, last):
        first, self._cycle_first = self._cycle_first, None
        self._ready_steps = (first, last)
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # ---- output ----------------------------------------------------------------------------
    def _config_json(self):
        acts = sorted(str(a) for a in self.activities)
        return {"common_config": {"activities": acts,
                                  "schedule": self.schedule.to_json() if isinstance(self.schedule, schedule) else None,
                                  "record_shapes": self.record_shapes, "profile_memory": self.profile_memory,
                                  "with_stack": self.with_stack, "with_flops": self.with_flops,
                                  "with_modules": self.with_modules},
                "experimental_config": self.experimental_config.to_json()}

    def _export_ascend_pt(self, dir_name, worker_name):
        rec = self._recording
        if rec is None:
            raise RuntimeError("torch_npu.profiler: on_trace_ready runs only while the profile records")
        target = rec._outer or rec
        if target._session is not None:
            st = target._session.flush()
            if not st.ok():
                raise RuntimeError(f"torch_npu.profiler: {st.message}")
        first, last = self._ready_steps
        try:
            out = _C.profiler.export_ascend_pt(target.db, rec.run_id, first, last, dir_name, worker_name,
                                               json.dumps(self._config_json()), json.dumps(self._metadata))
        except (OSError, ValueError, RuntimeError) as e:
            # As torch_npu's parsing errors: said in one line, and training goes on; the steps
            # stay in the recording (npuscope export --ascend-pt writes the folder later).
            print(f"torch_npu.profiler: steps {first}-{last} not written to {dir_name}: {e} "
                  f"(they are recorded in {target.db}, run {rec.run_id})", file=sys.stderr)
            return None
        self._exports.append(out["folder"])
        print(f"torch_npu.profiler: steps {first}-{last} written to {out['folder']} "
              f"({out['kernels']} predicted kernels, {out['host_ops']} host ops)", file=sys.stderr)
        return out

    def export_chrome_trace(self, path):
        """The last cycle's trace_view.json (torch_npu's timeline) at ``path``."""
        if not getattr(self, "_ready_steps", None):
            raise RuntimeError("torch_npu.profiler: export_chrome_trace needs a finished cycle (after step() or stop())")
        tmp = tempfile.mkdtemp(prefix="npuscope_trace_")
        try:
            rec = self._recording
            db, run_id = ((rec._outer or rec).db, rec.run_id) if rec is not None else self._last_source
            out = _C.profiler.export_ascend_pt(db, run_id, self._ready_steps[0], self._ready_steps[1],
                                               os.path.join(tmp, "trace_ascend_pt"), "",
                                               json.dumps(self._config_json()), json.dumps(self._metadata))
            shutil.copyfile(os.path.join(out["folder"], "ASCEND_PROFILER_OUTPUT", "trace_view.json"), path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def add_metadata(self, key, value):
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError("add_metadata: key and value must be strings")
        self._metadata[key] = value

    def add_metadata_json(self, key, value):
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError("add_metadata_json: key and value must be strings")
        self._metadata[key] = json.loads(value)

    @property
    def folders(self):
        """npuscope's addition: the *_ascend_pt folders this profile wrote, in order."""
        return list(self._exports)
