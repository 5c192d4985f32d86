"""A Python-driven run killed with SIGKILL at random moments: the file passes integrity_check,
every step committed >= 1 s before the kill is there with its ops, no dump row refers to bytes
that are not stored, and the next writer ends the orphaned run as failed."""
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import npuscope
from conftest import query

CHILD = textwrap.dedent("""
    import sys, time, torch, npuscope
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).npu()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(32, 64, device="npu")
    with npuscope.profile(db=sys.argv[1], dump_config=sys.argv[2]) as prof:
        step = 0
        while True:
            loss = m(x).square().mean()
            opt.zero_grad(); loss.backward(); opt.step()
            prof.step(loss)
            print(f"step {step} t {time.time_ns()}", flush=True)
            step += 1
""")


def test_sigkill_keeps_committed_steps_and_dumps_consistent(tmp_path):
    rng = random.Random(7)
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "acl.json").write_text(json.dumps({"dump": {"dump_mode": "all", "dump_data": "tensor",
                                                           "dump_step": "0-100000"}}))
    checked = 0
    for round_ in range(3):
        db = str(tmp_path / f"kill{round_}.db")
        p = subprocess.Popen([sys.executable, str(tmp_path / "child.py"), db, str(tmp_path / "acl.json")],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert p.stdout.readline().startswith("step 0 ")  # running
        time.sleep(rng.uniform(1.5, 3.0))
        kill_ns = time.time_ns()
        p.send_signal(signal.SIGKILL)
        out, _ = p.communicate()
        assert p.returncode == -signal.SIGKILL
        printed = [tuple(map(int, line.split()[1::2])) for line in out.splitlines() if line.startswith("step ")]
        assert query(db, "PRAGMA integrity_check") == [("ok",)]
        steps = {s for (s,) in query(db, "SELECT step FROM steps WHERE run_id=1")}
        ops = dict(query(db, "SELECT step, count(*) FROM ops WHERE run_id=1 GROUP BY step"))
        for step, t in printed:
            if t > kill_ns - 1_000_000_000:
                continue  # not yet owed
            assert step in steps, (round_, step)
            assert ops.get(step, 0) > 0, (round_, step)
            checked += 1
        # No half-written dump rows: each row holds its bytes or names a stored row of its step.
        dangling = query(db, """SELECT count(*) FROM tensor_dumps d LEFT JOIN tensor_dumps r ON d.data_ref = r.id
                                WHERE d.data IS NULL AND (r.id IS NULL OR r.step != d.step OR r.data IS NULL)""")
        assert dangling == [(0,)]
        assert query(db, "SELECT count(DISTINCT step) FROM tensor_dumps")[0][0] >= 1
        assert query(db, "SELECT status FROM runs WHERE id=1") == [("running",)]  # nobody ended it yet
        with npuscope.profile(db=db):  # the next writer: the killed process is gone
            pass
        (status, results), = query(db, "SELECT status, results_json FROM runs WHERE id=1")
        assert status == "failed" and f"pid {p.pid} on " in json.loads(results)["error"]
    assert checked > 10, "the kills came too early to check anything"
