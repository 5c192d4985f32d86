"""msprobe's precision dump, written by npuscope: ``PrecisionDebugger`` as Ascend's msprobe has it,
on the emulated npu (under npuscope's amp) and on the CPU — the bench a user without a GPU
compares against::

    from msprobe.pytorch import PrecisionDebugger     # or: from npuscope.msprobe import ...
    debugger = PrecisionDebugger(config_path="config.json")   # or task=, dump_path=, level=
    for batch in loader:
        debugger.start(model)
        ... forward, backward, optimizer step ...
        debugger.stop()
        debugger.step()

Each dumped step is ``{dump_path}/step{N}/rank{R}/`` (``rank`` without a number outside a job)
with msprobe's ``dump.json`` (per call: inputs, outputs, their dtype, shape and Max / Min / Mean /
Norm), ``stack.json`` and ``construct.json``, and with task ``tensor`` each tensor in
``dump_tensor_data/{entry}.{input|output}.{i}.pt`` (named by the tensor's ``data_name``); ``npuscope import`` and ``npuscope compare`` read
it, as msprobe's own tools do. Calls are named as msprobe names them: ``Functional.conv2d.0.forward``,
``Tensor.__add__.1.forward``, ``Torch.flatten.0.forward``, ``Module.layer1.0.conv1.Conv2d.forward.0``,
and ``...backward`` for the gradients (input: the gradients of the forward's outputs, output:
those of its inputs). The Python side only names calls and writes the files: the statistics are
computed in C++ from the tensor's memory, with no torch op (npuscope._C.msprobe).

Config keys (msprobe's config.json): task (statistics | tensor | overflow_check), dump_path,
rank, step, level (L0 modules | L1 APIs | mix), and in the task's section scope, list,
data_mode (all | forward | backward | input | output) and summary_mode (statistics | md5);
overflow_check's overflow_nums. docs/python.md lists what is not provided.
"""
import json
import linecache
import os
import sys
import threading
import weakref

import torch as _torch

from . import _C

# The APIs wrapped, by msprobe's prefix (a subset of its support_wrap_ops.yaml: the calls models
# make most). A name missing from the installed torch is skipped.
FUNCTIONAL = (
    "conv1d conv2d conv3d conv_transpose1d conv_transpose2d linear bilinear relu relu6 gelu silu mish leaky_relu "
    "elu selu hardtanh hardswish hardsigmoid sigmoid tanh softmax log_softmax softplus glu dropout dropout2d "
    "embedding batch_norm layer_norm group_norm instance_norm normalize max_pool1d max_pool2d avg_pool1d avg_pool2d "
    "adaptive_avg_pool1d adaptive_avg_pool2d adaptive_max_pool2d interpolate pad one_hot "
    "scaled_dot_product_attention cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss binary_cross_entropy "
    "binary_cross_entropy_with_logits kl_div cosine_similarity unfold fold pixel_shuffle grid_sample").split()
TENSOR = (
    "add add_ sub sub_ mul mul_ div div_ matmul bmm mm __add__ __iadd__ __sub__ __isub__ __mul__ __imul__ "
    "__truediv__ __itruediv__ __matmul__ __radd__ __rsub__ __rmul__ __rtruediv__ __pow__ __neg__ __eq__ __ne__ "
    "__lt__ __le__ __gt__ __ge__ __and__ __or__ __setitem__ reshape transpose permute float half bfloat16 type_as "
    "sum mean pow sqrt rsqrt exp log softmax masked_fill masked_fill_ expand repeat chunk split unsqueeze squeeze "
    "flatten t norm max min neg cumsum view_as clamp clamp_ fill_ sigmoid tanh argmax gather scatter index_select "
    "abs baddbmm addmm long int bool relu relu_").split()
TORCH = (
    "matmul bmm mm addmm baddbmm cat stack softmax log_softmax where einsum topk clone flatten relu relu_ sigmoid "
    "tanh exp log sqrt rsqrt sum mean max min abs add mul sub div pow transpose permute reshape squeeze unsqueeze "
    "chunk split gather scatter index_select masked_fill norm cumsum argmax conv2d batch_norm layer_norm dropout "
    "embedding").split()
DISTRIBUTED = ("all_reduce broadcast all_gather reduce_scatter reduce gather scatter send recv isend irecv "
               "all_to_all_single all_gather_into_tensor reduce_scatter_tensor _all_gather_base "
               "_reduce_scatter_base").split()

_HERE = os.path.dirname(os.path.abspath(__file__))
_TORCH_DIR = os.path.dirname(os.path.abspath(_torch.__file__))

_active = None  # the PrecisionDebugger that is running

# dump.json's encoder: json's C encoder, compact, without the circular-reference bookkeeping (the
# records are trees this module built): a step's files cost a third less than json.dumps's.
_encode = json.JSONEncoder(check_circular=False, separators=(",", ":")).encode


def _wrap(prefix, name, orig):
    def wrapper(*args, **kwargs):
        d = _active
        if d is None or d._inside:
            return orig(*args, **kwargs)
        return d._api_call(prefix, name, orig, args, kwargs)
    wrapper.__name__ = getattr(orig, "__name__", name)
    wrapper.__doc__ = getattr(orig, "__doc__", None)
    wrapper._npuscope_original = orig
    return wrapper


_patched = []  # (owner, attribute, original)


def _patch_all():
    if _patched:
        return
    targets = [(_torch.nn.functional, "Functional", FUNCTIONAL), (_torch.Tensor, "Tensor", TENSOR),
               (_torch, "Torch", TORCH)]
    if _torch.distributed.is_available():
        targets.append((_torch.distributed, "Distributed", DISTRIBUTED))
    npu_ops = sys.modules.get("torch_npu")
    if npu_ops is not None:
        names = [n for n in getattr(npu_ops, "EMULATED_OPS", ()) if n.startswith("npu_")]
        targets.append((npu_ops, "NPU", names))
    for owner, prefix, names in targets:
        for name in names:
            orig = getattr(owner, name, None)  # torch.Tensor's methods live on its C base class
            if orig is None or hasattr(orig, "_npuscope_original"):
                continue
            own = not isinstance(owner, type) or name in owner.__dict__
            setattr(owner, name, _wrap(prefix, name, orig))
            _patched.append((owner, name, orig, own))


def _unpatch_all():
    while _patched:
        owner, name, orig, own = _patched.pop()
        if own:
            setattr(owner, name, orig)
        else:
            delattr(owner, name)


def _rank():
    d = _torch.distributed
    if d.is_available() and d.is_initialized():
        return d.get_rank()
    return None


def _tensors(values, out, depth=0):
    """The tensors among `values` (lists and tuples looked into), in order."""
    for v in values:
        if isinstance(v, _torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)) and depth < 4:
            _tensors(v, out, depth + 1)
    return out


class _GradCapture:
    """The backward entry of one call, seen without changing the graph (no identity functions
    around inputs or outputs, so in-place ops after the call stay legal): a hook on the node
    that made the call's first output gives the gradients of the outputs (msprobe's backward
    `input`); one-shot hooks on the inputs that require grad give theirs (its `output`)."""
    __slots__ = ("debugger", "entry", "parent", "n_inputs", "slots", "record")

    def __init__(self, debugger, entry, parent, inputs, outputs):
        self.debugger, self.entry, self.parent = debugger, entry, parent
        self.n_inputs = len(inputs)
        self.record = None
        outputs[0].grad_fn.register_hook(self._on_node)
        for i, t in enumerate(inputs):
            if t.requires_grad:
                handle = [None]
                handle[0] = t.register_hook(self._on_input(i, handle))

    def _on_node(self, grad_inputs, grad_outputs):
        d = self.debugger
        if not d._running or not d._wanted(self.entry, "backward"):
            return None
        d._inside = True
        try:
            md5 = d.summary_mode == "md5"
            self.record = {"input": d._values(grad_outputs, md5), "output": [None] * self.n_inputs}
            d._data[self.entry] = self.record
            if d._link is not None:  # the autograd engine's frame of this node
                d._ops[self.entry] = _C.profiler.current_op_id()
            d._construct[self.entry] = self.parent.replace(".forward.", ".backward.") if self.parent else None
        finally:
            d._inside = False
        return None

    def _on_input(self, i, handle):
        def hook(grad):
            handle[0].remove()  # one-shot: a parameter is an input again next step
            if self.record is not None:
                d = self.debugger
                d._inside = True
                try:
                    self.record["output"][i] = d._leaf(grad, d.summary_mode == "md5")
                finally:
                    d._inside = False
            return None
        return hook


def _backward_capture(debugger, entry, parent, args, out):
    """A _GradCapture for a call whose output is part of a graph; None otherwise."""
    if not _torch.is_grad_enabled():
        return None
    inputs = _tensors(args, [])
    outputs = [t for t in _tensors(out if isinstance(out, (list, tuple)) else (out,), [])
               if t.grad_fn is not None]
    if not outputs or any(outputs[0] is t for t in inputs):
        return None  # no graph, or the call returned an input as it was (x.float() of a float)
    return _GradCapture(debugger, entry, parent, inputs, outputs)


class PrecisionDebugger:
    """msprobe's PrecisionDebugger: dumps the calls between start() and stop() of the steps its
    config selects. Also a context manager (start on enter, stop on exit)."""
    _instance = None

    def __init__(self, config_path=None, task=None, dump_path=None, level=None, model=None, step=None, **kwargs):
        cfg = {}
        if config_path is not None:
            with open(config_path, encoding="utf-8") as f:
                try:
                    cfg = json.load(f)
                except ValueError as e:
                    raise ValueError(f"{config_path}: not valid JSON (expected msprobe's config.json): {e}") from None
        self.task = task or cfg.get("task", "statistics")
        if self.task not in ("statistics", "tensor", "overflow_check"):
            raise ValueError(f"msprobe task '{self.task}' is not provided (expected statistics, tensor or overflow_check)")
        self.dump_path = dump_path or cfg.get("dump_path") or "./dump_path"
        self.level = level or cfg.get("level", "L1")
        if self.level not in ("L0", "L1", "mix"):
            raise ValueError(f"msprobe level '{self.level}' is not provided (expected L0, L1 or mix)")
        self.ranks = list(cfg.get("rank", []) or [])
        self.steps = list(step if step is not None else cfg.get("step", []) or [])
        section = dict(cfg.get(self.task, {}) or {})
        section.update(kwargs)
        self.scope = list(section.get("scope", []) or [])
        self.api_list = list(section.get("list", []) or [])
        self.data_mode = list(section.get("data_mode", ["all"]) or ["all"])
        self.summary_mode = section.get("summary_mode", "statistics")
        self.overflow_nums = int(section.get("overflow_nums", 1))
        self._backward = "all" in self.data_mode or "backward" in self.data_mode
        self.model = model
        self.current_step = 0
        self._running = False
        self._inside = False
        self._hooked_models = []
        self._hook_handles = []
        self._writer = None
        self._write_error = None
        self._frame_lines = {}
        self._link = None       # the npuscope recording (npuscope.profile) this step's calls are linked into
        self._trace_step = -1   # its step when start() was called
        self._reset_step()
        PrecisionDebugger._instance = self

    # ---- msprobe's API ----------------------------------------------------------------------
    def start(self, model=None):
        global _active
        model = model if model is not None else self.model
        if model is not None and self.level in ("L0", "mix") and model not in self._hooked_models:
            self._hook_modules(model)
        if not self._selected():
            return
        if self.level in ("L1", "mix"):
            _patch_all()
        # Inside a recording, each call is linked to the op it became, and the step's rows go
        # into the trace file too (npuscope/profiler/msprobe_rows.h).
        from . import profiler as _profiler
        rec = _profiler._active
        self._link = rec if rec is not None and rec._session is not None else None
        if self._link is not None and not self._data:
            self._trace_step = rec.current_step
        _active = self
        self._running = True

    def stop(self):
        global _active
        self._running = False
        if _active is self:
            _active = None  # the wrappers stay (as msprobe's do): one check per call; close() removes them

    def step(self):
        """Ends a step: its dump is written (on a thread of its own, while the next step runs),
        counters restart."""
        self.stop()
        self._write()
        self.current_step += 1
        self._reset_step()

    def close(self):
        """Waits for the last files, removes the API wrappers and the module hooks."""
        self.stop()
        self._wait_written()
        _unpatch_all()
        for h in self._hook_handles:
            h.remove()
        self._hook_handles.clear()
        self._hooked_models.clear()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        self._write()
        self._wait_written()
        return False

    # ---- recording ----------------------------------------------------------------------------
    def _selected(self):
        rank = _rank()
        if self.ranks and (rank or 0) not in self.ranks:
            return False
        return not self.steps or self.current_step in self.steps

    def _reset_step(self):
        self._seen = {}
        self._tensor_data = {}  # task tensor: id(leaf) -> (leaf, its tensor's host copy)
        self._data = {}
        self._stacks = {}     # entry -> frames (as tuples)
        self._construct = {}
        self._counts = {}
        self._module_stack = []
        self._overflows = 0
        self._in_scope = not self.scope
        self._ops = {}         # entry -> op_events id, inside a recording
        self._watches = {}     # module entry -> its op watch, between its pre and post hook
        if self._link is not None:
            _C.profiler.watch_end(0)  # watches of calls that raised end here

    def _wanted(self, entry, direction):
        if self.task == "overflow_check" and 0 <= self.overflow_nums <= self._overflows:
            return False
        if self.api_list and not any(a in entry for a in self.api_list):
            return False
        if self.scope:
            if entry.startswith(self.scope[0]):
                self._in_scope = True
            wanted = self._in_scope
            if len(self.scope) > 1 and entry.startswith(self.scope[-1]):
                self._in_scope = False
            if not wanted:
                return False
        modes = self.data_mode
        return "all" in modes or direction in modes or "input" in modes or "output" in modes

    def _leaf(self, v, md5, depth=0):
        if isinstance(v, _torch.Tensor):
            # A tensor seen again unchanged (a module's output is its last API's; an op's input the
            # previous op's output) is not read twice: same object, same version.
            key = (id(v), v._version)
            seen = self._seen.get(key)
            if seen is not None and seen[0]() is v and seen[1]["requires_grad"] == v.requires_grad:
                return seen[1]
            leaf = _C.msprobe.tensor_leaf(v, md5)
            self._seen[key] = (weakref.ref(v), leaf)  # a weak reference: the tensor lives no longer
            if self.task == "tensor":
                # The data as it is now (an in-place op may change it before the step's files are
                # written), on the host: a dump opens on any machine.
                self._tensor_data[id(leaf)] = (leaf, _C.msprobe.host_copy(v))
            return leaf
        if v is None or depth > 8:
            return None
        if isinstance(v, bool):
            return {"type": "bool", "value": v}
        if isinstance(v, int):
            return {"type": "int", "value": v}
        if isinstance(v, float):
            return {"type": "float", "value": v}
        if isinstance(v, str):
            return {"type": "str", "value": v}
        if isinstance(v, _torch.Size):
            return {"type": "torch.Size", "value": list(v)}
        if isinstance(v, (list, tuple)):
            return [self._leaf(x, md5, depth + 1) for x in v]
        if isinstance(v, dict):
            return {str(k): self._leaf(x, md5, depth + 1) for k, x in v.items()}
        if isinstance(v, slice):
            return {"type": "slice", "value": [v.start, v.stop, v.step]}
        if isinstance(v, _torch.dtype):
            return {"type": "torch.dtype", "value": str(v)}
        if isinstance(v, _torch.device):
            return {"type": "torch.device", "value": str(v)}
        if v is Ellipsis:
            return {"type": "ellipsis", "value": "..."}
        return None

    def _values(self, values, md5):
        return [self._leaf(v, md5) for v in values]

    def _overflowed(self, leaves):
        for leaf in leaves:
            if isinstance(leaf, list):
                if self._overflowed(leaf):
                    return True
            elif isinstance(leaf, dict) and "Max" in leaf:
                for k in ("Max", "Min"):
                    x = leaf.get(k)
                    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
                        return True
        return False

    def _keep(self, entry, record, outputs):
        if self.task == "overflow_check":
            if not self._overflowed(outputs):
                return
            self._overflows += 1
        self._data[entry] = record

    def _stack(self, entry):
        frames = []
        f = sys._getframe(3)
        while f is not None:
            co = f.f_code
            if not co.co_filename.startswith(_HERE):
                frames.append((co.co_filename, f.f_lineno, co.co_name))
            f = f.f_back
        self._stacks[entry] = tuple(frames)

    def _parent(self):
        return self._module_stack[-1] if self._module_stack else None

    def _api_call(self, prefix, name, orig, args, kwargs):
        key = f"{prefix}.{name}"
        # Counted before the call: calls inside it are not dumped nor counted, so this is the
        # number msprobe gives once the output is back.
        n = self._counts.get(key, 0)
        self._counts[key] = n + 1
        entry = f"{key}.{n}.forward"
        parent = self._parent()
        self._inside = True
        try:
            wanted = self._wanted(entry, "forward")
            md5 = self.summary_mode == "md5"
            if wanted:
                # Inputs as they were before the call (an in-place op or a collective changes them).
                inputs = self._values(args, md5)
                kw = {k: self._leaf(v, md5) for k, v in kwargs.items()}
            watch = _C.profiler.watch_begin() if wanted and self._link is not None else -1
            out = orig(*args, **kwargs)
            if watch >= 0:
                self._ops[entry] = _C.profiler.watch_end(watch)
            if self._backward:
                _backward_capture(self, f"{key}.{n}.backward", parent, args, out)
            if wanted:
                if prefix == "Distributed":
                    # msprobe: a collective's output is its arguments after the call (in place),
                    # read once it has completed (the statistics read memory, not a stream).
                    if hasattr(out, "wait"):
                        out.wait()
                    written = _tensors(list(args) + list(kwargs.values()), [])
                    if any(t.device.type != "cpu" for t in written):
                        _C.npu.synchronize(-1)
                    for t in written:  # written by the backend, not by a torch op: no new version
                        self._seen.pop((id(t), t._version), None)
                    outputs = self._values(list(args) + list(kwargs.values()), md5)
                else:
                    outputs = self._values(out if isinstance(out, (list, tuple)) else (out,), md5)
                self._keep(entry, {"input_args": inputs, "input_kwargs": kw, "output": outputs}, outputs)
                if entry in self._data:
                    self._construct[entry] = parent
                    self._stack(entry)
        finally:
            self._inside = False
        return out

    # ---- modules (L0, mix) --------------------------------------------------------------------
    def _hook_modules(self, model):
        self._hooked_models.append(model)
        for name, module in model.named_modules():
            if not name:
                continue  # msprobe leaves the root model out
            prefix = f"Module.{name}.{type(module).__name__}"
            self._hook_handles.append(module.register_forward_pre_hook(self._module_pre_hook(prefix)))
            self._hook_handles.append(module.register_forward_hook(self._module_post_hook(prefix)))

    def _module_pre_hook(self, prefix):
        def pre(module, args):
            if not self._running:
                return None
            key = prefix + ".forward"
            n = self._counts.get(key, 0)
            self._counts[key] = n + 1
            entry = f"{key}.{n}"
            module._npuscope_entries = getattr(module, "_npuscope_entries", [])
            module._npuscope_entries.append(entry)
            self._construct.setdefault(entry, self._parent())
            self._module_stack.append(entry)
            if self._link is not None:
                self._watches[entry] = _C.profiler.watch_begin()
            return None
        return pre

    def _module_post_hook(self, prefix):
        def post(module, args, out):
            entries = getattr(module, "_npuscope_entries", None)
            if not self._running or not entries:
                return None
            entry = entries.pop()
            if self._module_stack and self._module_stack[-1] == entry:
                self._module_stack.pop()
            watch = self._watches.pop(entry, -1)
            if watch >= 0:
                self._ops[entry] = _C.profiler.watch_end(watch)
            parent = self._construct.get(entry)
            if self._backward:
                _backward_capture(self, entry.replace(".forward.", ".backward."), parent, args, out)
            if self.level in ("L0", "mix") and self._wanted(entry, "forward"):
                self._inside = True
                try:
                    md5 = self.summary_mode == "md5"
                    outputs = self._values(out if isinstance(out, (list, tuple)) else (out,), md5)
                    self._keep(entry, {"input_args": self._values(args, md5), "input_kwargs": {}, "output": outputs},
                               outputs)
                    if entry in self._data:
                        self._stack(entry)
                finally:
                    self._inside = False
            if entry not in self._data:
                self._construct.pop(entry, None)
            else:
                self._construct[entry] = parent
            return None
        return post

    # ---- files --------------------------------------------------------------------------------
    def _folder(self):
        rank = _rank()
        return os.path.join(self.dump_path, f"step{self.current_step}", "rank" if rank is None else f"rank{rank}")

    def _tensor_files(self):
        """Task tensor: each tensor of each entry gets msprobe's file name (``{entry}.input.0.pt``,
        ``{entry}.input.{kwarg}.pt``, ``{entry}.output.1.2.pt`` for nested values) in a leaf of its
        own (a tensor met by two entries is one leaf, saved twice); returns (name, tensor) pairs."""
        files = []

        def name(value, stem):
            if isinstance(value, dict) and value.get("type") == "torch.Tensor":
                held = self._tensor_data.get(id(value))
                if held is None or held[0] is not value:
                    return value
                leaf = dict(value)
                leaf["data_name"] = stem + ".pt"
                files.append((leaf["data_name"], held[1]))
                return leaf
            if isinstance(value, list):
                return [name(v, f"{stem}.{i}") for i, v in enumerate(value)]
            if isinstance(value, dict):
                return {k: name(v, f"{stem}.{k}") for k, v in value.items()}
            return value

        for entry, record in self._data.items():
            for key, value in list(record.items()):
                io = "input" if key.startswith("input") else "output"
                if key == "input_kwargs":
                    record[key] = {k: name(v, f"{entry}.{io}.{k}") for k, v in value.items()}
                else:
                    record[key] = [name(v, f"{entry}.{io}.{i}") for i, v in enumerate(value)]
        self._tensor_data = {}
        return files

    def _write(self):
        if not self._data:
            return
        self._wait_written()
        files = self._tensor_files() if self.task == "tensor" else []
        from . import profiler as _profiler
        # The trace file's rows only while the recording the calls ran in still records.
        trace = None
        if self._link is not None and self._link is _profiler._active and self._link._session is not None:
            trace = (self._trace_step, {e: op for e, op in self._ops.items() if e in self._data})
        job = (self._folder(), self._data, self._stacks, self._construct if self.level != "L1" else {}, files, trace)
        self._writer = threading.Thread(target=self._write_files, args=job, name="msprobe-dump", daemon=False)
        self._writer.start()

    def _wait_written(self):
        w = getattr(self, "_writer", None)
        if w is not None:
            w.join()
            self._writer = None
            if self._write_error is not None:
                e, self._write_error = self._write_error, None
                raise e

    def _write_files(self, folder, data, stack_frames, construct, files, trace=None):
        try:
            os.makedirs(folder, exist_ok=True)
            data_dir = os.path.join(os.path.abspath(folder), "dump_tensor_data") if files else None
            dump = {"task": self.task, "level": self.level, "framework": "pytorch", "dump_data_dir": data_dir,
                    "data": data}
            # The C encoder (json.dump and an indent take the Python one, 10x slower).
            dump_text = _encode(dump)
            with open(os.path.join(folder, "dump.json"), "w", encoding="utf-8") as f:
                f.write(dump_text)
            # stack.json in msprobe's current form: {"0": [[entries sharing a stack], [frames]]}.
            groups = {}
            for entry, frames in stack_frames.items():
                groups.setdefault(frames, []).append(entry)
            stacks = {}
            lines = self._frame_lines  # a frame's text, kept from step to step
            for i, (frames, entries) in enumerate(groups.items()):
                text = []
                for frame in frames:
                    t = lines.get(frame)
                    if t is None:
                        fn, line, func = frame
                        t = lines[frame] = f"File {fn}, line {line}, in {func}, \n {linecache.getline(fn, line).strip()}"
                    text.append(t)
                stacks[str(i)] = [entries, text]
            stack_text = _encode(stacks)
            with open(os.path.join(folder, "stack.json"), "w", encoding="utf-8") as f:
                f.write(stack_text)
            construct_text = _encode({k: v for k, v in construct.items() if k in data})
            with open(os.path.join(folder, "construct.json"), "w", encoding="utf-8") as f:
                f.write(construct_text)
            if trace is not None:
                # The recording's trace file: every entry linked to its op, the tensors' bytes
                # (task tensor) through its dump writer. Before the tensor files, so a disk that
                # fills on them leaves the rows in.
                step, links = trace
                try:
                    _C.msprobe.add_to_trace(dump_text, stack_text, construct_text, step, links, files)
                except (RuntimeError, ValueError) as e:
                    self._write_error = RuntimeError(f"{folder}: the msprobe rows of the trace file: {e}")
            # The tensors last: when the disk fills, the statistics of every call are written.
            if files:
                os.makedirs(data_dir, exist_ok=True)
            for file_name, tensor in files:
                where = os.path.join(data_dir, file_name)
                # Through a Python file: torch 1.13's torch.save(tensor, path) drops write errors
                # (a full disk leaves a truncated file and no error); a file object reports them.
                try:
                    with open(where, "wb") as f:
                        _torch.save(tensor, f)
                except OSError as e:
                    raise OSError(e.errno, f"{file_name}: {e.strerror or e}") from None
        except OSError as e:
            self._write_error = OSError(f"{folder}: cannot write the msprobe dump: {e.strerror or e}")


def _before_recording_stops(recording):
    """npuscope.profile's stop: the rows a dumped step of `recording` is still adding are in
    before its trace file closes."""
    d = PrecisionDebugger._instance
    if d is not None and d._link is recording:
        w = d._writer
        if w is not None:
            w.join()


def seed_all(seed=1234, mode=False, rm_dropout=False):
    """msprobe's seed_all: the same random numbers in both runs of a compare."""
    import random
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    _torch.manual_seed(seed)
    if mode:
        _torch.use_deterministic_algorithms(True)
