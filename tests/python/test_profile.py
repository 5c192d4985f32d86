"""npuscope.profile writes the CLI's trace file: checked with SQL against what the script did."""
import json
import math
import textwrap

import pytest
import torch

import npuscope
from npuscope import amp, optimizers
from conftest import query, run_python


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).npu()


def amp_steps(model, opt, x, y, n, overflow_at=()):
    losses = []
    for i in range(n):
        loss = torch.nn.functional.mse_loss(model(x), y)
        losses.append(float(loss))
        if i in overflow_at:
            loss = loss * float("inf")
        opt.zero_grad()
        with amp.scale_loss(loss, opt) as scaled:
            scaled.backward()
        opt.step()
    return losses


def test_steps_losses_scales_and_overflows_reach_the_file(tmp_path):
    db = str(tmp_path / "run.db")
    model = make_model()
    opt = optimizers.NpuFusedAdam(model.parameters(), lr=1e-3)
    model, opt = amp.initialize(model, opt, opt_level="O2", verbosity=0, dynamic_init_scale=1024.0)
    x, y = torch.randn(16, 8, device="npu"), torch.randn(16, 4, device="npu")
    with npuscope.profile(db=db) as prof:
        losses = amp_steps(model, opt, x, y, 6, overflow_at={3})
    run = prof.run_id
    rows = query(db, "SELECT step, loss, loss_scale, overflow, skipped, lr FROM steps WHERE run_id=? ORDER BY step",
                 run)
    assert [r[0] for r in rows] == list(range(6))  # one step per optimizer step, no prof.step() needed
    losses[3] = math.inf  # the loss amp scaled at the overflow step
    for (step, loss, scale, overflow, skipped, lr), expected in zip(rows, losses):
        assert loss == pytest.approx(expected, rel=1e-6)
        assert lr == pytest.approx(1e-3)
    assert [r[2] for r in rows] == [1024.0] * 4 + [512.0] * 2  # the scale each backward used
    assert [(r[3], r[4]) for r in rows] == [(0, 0)] * 3 + [(1, 1)] + [(0, 0)] * 2
    events = query(db, "SELECT step, source FROM overflow_events WHERE run_id=?", run)
    assert events == [(3, "non_finite")]
    status, results = query(db, "SELECT status, results_json FROM runs WHERE id=?", run)[0]
    assert status == "completed"
    info = json.loads(results)
    assert info["opt_level"] == "O2" and info["optimizer"] == "NpuFusedAdam"
    names = {r[0] for r in query(db, "SELECT DISTINCT name FROM ops WHERE run_id=?", run)}
    assert {"aten::addmm", "aten::mse_loss", "nn.Module: 0 (Linear)", "nn.Module: Sequential"} <= names
    # The module scope encloses the op: the addmm's parent chain reaches a Linear scope.
    nested = query(db, """SELECT count(*) FROM ops c JOIN ops p ON c.parent_id = p.id
                          WHERE c.run_id=? AND c.name='aten::linear' AND p.name LIKE 'nn.Module: % (Linear)'""", run)
    assert nested[0][0] == 12


def test_explicit_steps_record_functions_and_schedule(tmp_path):
    db = str(tmp_path / "run.db")
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8, device="npu")
    with npuscope.profile(db=db, schedule="wait=1,active=2,repeat=1") as prof:
        for i in range(4):
            with npuscope.record_function("my_forward"):
                loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step(loss)
    steps = query(db, "SELECT step, loss FROM steps WHERE run_id=? ORDER BY step", prof.run_id)
    assert [s for s, _ in steps] == [1, 2]  # wait=1: step 0 not recorded; active=2, one cycle
    assert all(not math.isnan(l) for _, l in steps)
    scopes = query(db, "SELECT step, count(*) FROM ops WHERE run_id=? AND name='my_forward' GROUP BY step",
                   prof.run_id)
    assert scopes == [(1, 1), (2, 1)]


def test_torch_optimizers_end_steps_and_dumps_go_to_the_file(tmp_path):
    db = str(tmp_path / "run.db")
    config = tmp_path / "acl.json"
    config.write_text(json.dumps({"dump": {"dump_mode": "output", "dump_step": "1", "dump_data": "stats"}}))
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(4, 8, device="npu")
    with npuscope.dump(config=str(config), db=db) as prof:
        for _ in range(3):
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert query(db, "SELECT count(*) FROM steps WHERE run_id=?", prof.run_id)[0][0] == 3
    dumped = query(db, "SELECT DISTINCT step FROM tensor_dumps WHERE run_id=?", prof.run_id)
    assert dumped == [(1,)]
    names = {r[0] for r in query(db, "SELECT op_name FROM tensor_dumps WHERE run_id=?", prof.run_id)}
    assert "addmm.0.forward" in names
    linked = query(db, "SELECT count(*) FROM tensor_dumps WHERE run_id=? AND op_id IS NULL", prof.run_id)
    assert linked[0][0] == 0  # every dump row points at its recorded op


def test_acl_dump_data_environment_and_a_failing_block(tmp_path):
    (tmp_path / "acl.json").write_text(json.dumps({"dump": {"dump_mode": "all", "dump_data": "stats",
                                                            "dump_step": "0"}}))
    script = textwrap.dedent("""
        import torch, npuscope
        m = torch.nn.Linear(4, 2).npu()
        with npuscope.profile(db="env.db"):
            m(torch.randn(3, 4, device="npu")).sum().backward()
            raise ValueError("boom in the user's loop")
    """)
    r = run_python(["-c", script], tmp_path, env={"ACL_DUMP_DATA": "1"})
    assert r.returncode == 1 and "boom" in r.stderr
    db = str(tmp_path / "env.db")
    status, results = query(db, "SELECT status, results_json FROM runs")[0]
    assert status == "failed"
    assert json.loads(results)["error"] == "ValueError: boom in the user's loop"
    assert query(db, "SELECT count(*) FROM tensor_dumps")[0][0] > 0
    assert query(db, "PRAGMA integrity_check") == [("ok",)]


def test_bad_inputs_fail_with_one_clear_line(tmp_path):
    with pytest.raises(ValueError, match="schedule"):
        npuscope.profile(db=str(tmp_path / "a.db"), schedule="wait=x").start()
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        npuscope.dump(config=str(tmp_path / "bad.json"), db=str(tmp_path / "b.db")).start()
    (tmp_path / "notadb.db").write_text("hello, not sqlite")
    with pytest.raises(ValueError, match="notadb.db: not an npuscope trace file"):
        npuscope.profile(db=str(tmp_path / "notadb.db")).start()
    # nothing left recording: a new profile starts fine
    with npuscope.profile(db=str(tmp_path / "ok.db")) as p:
        pass
    assert query(str(tmp_path / "ok.db"), "SELECT status FROM runs WHERE id=?", p.run_id) == [("completed",)]


def test_the_first_explicit_step_after_an_automatic_one_keeps_its_loss(tmp_path):
    # A plain loop: the optimizer step ends step 0 automatically, then the script's own
    # prof.step(loss) takes over; step 0 keeps the loss given there, and no empty step appears.
    db = str(tmp_path / "run.db")
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8, device="npu")
    losses = []
    with npuscope.profile(db=db) as prof:
        for _ in range(3):
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step(loss)
            losses.append(float(loss))
    rows = query(db, "SELECT step, loss FROM steps WHERE run_id=? ORDER BY step", prof.run_id)
    assert [r[0] for r in rows] == [0, 1, 2]
    assert [r[1] for r in rows] == pytest.approx(losses, rel=1e-6)


class Lookahead(torch.optim.Optimizer):
    """An optimizer whose step calls another optimizer's step (as timm's Lookahead does)."""

    def __init__(self, inner):
        self.inner = inner
        super().__init__(inner.param_groups, inner.defaults)

    def step(self, closure=None):
        return self.inner.step(closure)


def test_steps_end_once_per_outer_step_whoever_holds_the_step_method(tmp_path):
    db = str(tmp_path / "run.db")
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)  # wraps opt.step first
    x = torch.randn(4, 8, device="npu")
    with npuscope.profile(db=db) as prof:
        for _ in range(3):
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    rows = query(db, "SELECT step, lr FROM steps WHERE run_id=? ORDER BY step", prof.run_id)
    assert rows == [(0, 0.1), (1, 0.05), (2, 0.025)]
    outer = Lookahead(torch.optim.SGD(model.parameters(), lr=0.1))
    with npuscope.profile(db=db) as prof:
        for _ in range(3):
            loss = model(x).square().mean()
            outer.zero_grad()
            loss.backward()
            outer.step()
    assert query(db, "SELECT count(*) FROM steps WHERE run_id=?", prof.run_id) == [(3,)]


def test_module_scopes_of_a_raising_forward_end_with_their_step(tmp_path):
    class Flaky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(8, 8)

        def forward(self, x):
            self.inner(x)
            raise ValueError("bad batch")

    db = str(tmp_path / "run.db")
    model, flaky = make_model(), Flaky().npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8, device="npu")
    with npuscope.profile(db=db) as prof:
        for _ in range(2):
            with pytest.raises(ValueError):
                flaky(x)
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    # The Sequential's scope is a root scope in both steps, not nested inside the failed Flaky.
    roots = query(db, """SELECT step, count(*) FROM ops WHERE run_id=? AND name='nn.Module: Sequential'
                         AND depth=0 GROUP BY step""", prof.run_id)
    assert roots == [(0, 1), (1, 1)]


def test_module_calls_keep_their_arguments_results_and_hooks(tmp_path):
    """While with_modules wraps Module.__call__: positional and keyword arguments arrive as given,
    the result comes back, the module's own forward hooks still run, and each call is one scope."""
    class Scale(torch.nn.Module):
        def forward(self, x, factor=1.0, *, shift=0.0):
            return x * factor + shift

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = Scale()

        def forward(self):  # no argument at all
            return self.scale(torch.ones(2, device="npu"), 3.0, shift=0.5)

    seen = []
    outer = Outer()
    outer.scale.register_forward_hook(lambda m, args, out: seen.append((len(args), out.sum().item())))
    db = str(tmp_path / "run.db")
    with npuscope.profile(db=db) as prof:
        out = outer()
        kw = outer.scale(torch.ones(3, device="npu"), factor=2.0)
    assert out.cpu().tolist() == [3.5, 3.5]
    assert kw.cpu().tolist() == [2.0, 2.0, 2.0]
    assert seen == [(2, 7.0), (1, 6.0)]  # a forward hook sees the positional arguments only
    rows = query(db, """SELECT name, depth FROM ops WHERE run_id=? AND name LIKE 'nn.Module:%' ORDER BY id""",
                 prof.run_id)
    assert rows == [("nn.Module: Outer", 0), ("nn.Module: scale (Scale)", 1), ("nn.Module: scale (Scale)", 0)]


def test_memory_by_owner_names_a_plain_scripts_parameters_and_its_adam_state(tmp_path):
    """No amp: npuscope.profile tags the model's parameters by name; torch.optim.Adam's state
    (two fp32 buffers per parameter) is inferred from when it was allocated and how long it
    lived; npu.memory_snapshot() adds up to memory_allocated(). In a process of its own: the
    device's memory is the process's."""
    db = str(tmp_path / "mem.db")
    script = textwrap.dedent(f"""
        import json, torch, npuscope
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).npu()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        x, y = torch.randn(16, 8, device="npu"), torch.randn(16, 4, device="npu")
        with npuscope.profile(db={db!r}):
            for _ in range(4):
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
        snapshot = npuscope.npu.memory_snapshot()
        print(json.dumps({{"snapshot": snapshot, "allocated": npuscope.npu.memory_allocated(),
                           "params": {{n: p.numel() for n, p in model.named_parameters()}}}}))
    """)
    r = run_python(["-c", script], tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    numel = out["params"]
    assert sum(b["size"] for b in out["snapshot"]) == out["allocated"]
    assert {b["owner"] for b in out["snapshot"] if b["category"] == "parameter"} == set(numel)

    owners = dict(query(db, "SELECT owner, requested FROM memory_blocks WHERE category=1 AND free_seq IS NULL"))
    assert owners == {n: k * 4 for n, k in numel.items()}
    # Adam's exp_avg and exp_avg_sq: allocated by its first step, after backward, kept to the end.
    state = query(db, "SELECT requested FROM memory_blocks WHERE category=4 AND free_seq IS NULL")
    assert sorted(r for (r,) in state) == sorted([k * 4 for k in numel.values()] * 2)
    # Gradients: allocated in backward, kept past it.
    grads = query(db, "SELECT requested FROM memory_blocks WHERE category=3 AND free_seq IS NULL")
    assert sorted(r for (r,) in grads) == sorted(k * 4 for k in numel.values())
