"""`npuscope run`: a user's unmodified script under recording, its exit status kept, a failing
script's run marked failed with the exception's last line."""
import json
import os
import re
import subprocess
import textwrap

from conftest import query

TRAIN = textwrap.dedent("""
    import os, sys, time, torch
    import npuscope
    m = torch.nn.Linear(8, 2).npu()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x = torch.randn(16, 8, device="npu")
    pause = float(os.environ.get("TRAIN_STEP_SLEEP", "0"))  # seconds a step, to slow a run down
    for i in range(int(sys.argv[1])):
        loss = m(x).square().mean()
        opt.zero_grad(); loss.backward(); opt.step()
        time.sleep(pause)
    print("trained", sys.argv[1:])
    if len(sys.argv) > 2:
        if sys.argv[2] == "raise":
            raise RuntimeError("loss diverged at step 3\\nsecond line")
        sys.exit(int(sys.argv[2]))
""")


def npuscope_run(cli, cwd, *args):
    env = dict(os.environ)
    return subprocess.run([cli, "run", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_a_script_runs_recorded_and_reported(cli, tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    r = npuscope_run(cli, tmp_path, "--db", "run.db", "--", "train.py", "4")
    assert r.returncode == 0, r.stderr
    assert "trained ['4']" in r.stdout
    assert "Operators by self time" in r.stdout and "aten::addmm" in r.stdout  # the report follows
    db = str(tmp_path / "run.db")
    (status, command, results), = query(db, "SELECT status, command, results_json FROM runs")
    assert status == "completed" and command == "run train.py 4"
    assert json.loads(results)["exit_status"] == 0
    assert query(db, "SELECT count(*) FROM steps")[0][0] == 4


def test_exit_status_is_kept_and_a_raising_script_leaves_a_failed_run(cli, tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    r = npuscope_run(cli, tmp_path, "--db", "run.db", "--no-report", "--", "train.py", "2", "3")
    assert r.returncode == 3
    r = npuscope_run(cli, tmp_path, "--db", "run.db", "--no-report", "--", "train.py", "2", "raise")
    assert r.returncode == 1
    assert "RuntimeError: loss diverged at step 3" in r.stderr  # the traceback, as python prints it
    db = str(tmp_path / "run.db")
    runs = query(db, "SELECT id, status, results_json FROM runs ORDER BY id")
    assert [s for _, s, _ in runs] == ["failed", "failed"]
    assert json.loads(runs[0][2])["exit_status"] == 3
    assert json.loads(runs[1][2])["error"] == "RuntimeError: loss diverged at step 3"
    assert query(db, "SELECT count(*) FROM steps WHERE run_id=?", runs[1][0])[0][0] == 2  # kept
    assert query(db, "PRAGMA integrity_check") == [("ok",)]


def test_bad_invocations_fail_with_one_line(cli, tmp_path):
    r = npuscope_run(cli, tmp_path, "--", "missing.py")
    assert r.returncode == 1 and r.stderr.strip() == "npuscope: error: run: missing.py: no such script"
    (tmp_path / "t.py").write_text("print('hi')\n")
    (tmp_path / "acl.json").write_text("{")
    r = npuscope_run(cli, tmp_path, "--dump-config", "acl.json", "--", "t.py")
    assert r.returncode == 1 and "acl.json" in r.stderr and "hi" not in r.stdout
    assert r.stderr.startswith("npuscope: error: ") and r.stderr.count("\n") == 1, r.stderr
    r = npuscope_run(cli, tmp_path, "--db", "no_such_folder/run.db", "--", "t.py")
    assert r.returncode == 1 and "hi" not in r.stdout
    assert r.stderr == ("npuscope: error: no_such_folder/run.db: cannot open for writing: "
                        "no_such_folder: no such folder\n"), r.stderr


def test_an_unmodified_cuda_script_runs_through_transfer_to_npu(cli, examples, tmp_path):
    r = npuscope_run(cli, tmp_path, "--db", "cuda.db", "--transfer-to-npu", "--no-report", "--",
                     os.path.join(examples, "cuda_amp_script.py"))
    assert r.returncode == 0, r.stderr
    assert "device privateuseone:0" in r.stdout and "output dtype torch.float16" in r.stdout
    db = str(tmp_path / "cuda.db")
    steps = query(db, "SELECT count(*), min(loss_scale), max(loss_scale) FROM steps")
    assert steps == [(24, 65536.0, 65536.0)]  # 3 epochs x 8 batches, one step per scaler.update()
    # fp16 matmuls ran under autocast (the Cube), the loss in fp32
    dtypes = {r[0] for r in query(db, "SELECT input_dtypes FROM ops WHERE name='aten::addmm'")}
    assert any("Half" in d for d in dtypes)
    # Without the transfer the same script stops: it asks for CUDA.
    r = npuscope_run(cli, tmp_path, "--db", "cuda.db", "--no-report", "--", os.path.join(examples, "cuda_amp_script.py"))
    assert r.returncode != 0 and "needs a CUDA device" in r.stderr


def test_sigterm_ends_the_run_failed_with_everything_kept(cli, tmp_path):
    import signal
    import time
    (tmp_path / "loop.py").write_text(textwrap.dedent("""
        import time, torch, npuscope
        m = torch.nn.Linear(8, 2).npu(); opt = torch.optim.SGD(m.parameters(), lr=0.1)
        x = torch.randn(4, 8, device="npu")
        print("training", flush=True)
        while True:
            loss = m(x).square().mean(); opt.zero_grad(); loss.backward(); opt.step(); time.sleep(0.01)
    """))
    p = subprocess.Popen([cli, "run", "--db", "run.db", "--no-report", "--", "loop.py"], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "training"
    time.sleep(1.5)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)  # to npuscope, which passes it on
    p.communicate(timeout=30)
    assert p.returncode == 143 and time.monotonic() - t0 < 5
    db = str(tmp_path / "run.db")
    (status, results), = query(db, "SELECT status, results_json FROM runs")
    assert status == "failed" and json.loads(results)["error"] == "terminated (SIGTERM)"
    assert query(db, "SELECT count(*) FROM steps")[0][0] > 10
    assert query(db, "PRAGMA integrity_check") == [("ok",)]


def test_a_full_disk_is_told_when_it_happens_and_the_scripts_own_status_kept(cli, tmp_path):
    """The trace file's disk fills while the script trains (an injected 2 MiB disk): one warning
    when a step finds it, the script goes on to its end, the run keeps what was committed and ends
    failed with the reason; `npuscope run` exits 1 and tells the script's own status (0) apart."""
    (tmp_path / "train.py").write_text(TRAIN)
    # 1 ms a step, ~3 s in all on any machine: the writer commits (and fills the disk) meanwhile.
    env = dict(os.environ, NPUSCOPE_FAULT_DISK_BYTES="2M", TRAIN_STEP_SLEEP="0.001")
    r = subprocess.run([cli, "run", "--db", "run.db", "--no-report", "--", "train.py", "3000"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stderr
    assert "trained ['3000']" in r.stdout  # the script ran to its end
    warnings = [line for line in r.stderr.splitlines() if line.startswith("npuscope: warning: ")]
    assert len(warnings) == 1, r.stderr
    assert "run.db: the filesystem of " in warnings[0] and " is full (injected: NPUSCOPE_FAULT_DISK_BYTES=2M); " in warnings[0]
    m = re.search(r"; recording stopped (after step (\d+): what came later \(ops, steps, dumps\) is not in the file|"
                  r"before the first step was committed); the run goes on unrecorded$", warnings[0])
    assert m, warnings[0]
    errors = [line for line in r.stderr.splitlines() if line.startswith("npuscope: error: ")]
    assert len(errors) == 1 and errors[0].startswith("npuscope: error: " + str(tmp_path / "run.db") + ": "), r.stderr
    assert r.stderr.index(warnings[0]) < r.stderr.index(errors[0])  # told before the end
    assert "(script exit status 0; exit status 1: the recording failed)" in r.stderr
    db = str(tmp_path / "run.db")
    (status, results), = query(db, "SELECT status, results_json FROM runs")
    assert status == "failed" and " is full " in json.loads(results)["error"]  # the first reason stays
    assert json.loads(results)["exit_status"] == 0  # and what the script ended with
    assert query(db, "SELECT count(*) FROM steps")[0][0] == (int(m.group(2)) + 1 if m.group(2) else 0)
    assert query(db, "PRAGMA integrity_check") == [("ok",)]


def test_a_script_exit_status_beyond_255_is_not_taken_for_a_failed_recording(cli, tmp_path):
    """sys.exit(256) leaves the process with status 0, as python itself does; the recording
    worked, so nothing says it failed."""
    (tmp_path / "train.py").write_text(TRAIN)
    r = npuscope_run(cli, tmp_path, "--db", "run.db", "--no-report", "--", "train.py", "2", "256")
    assert r.returncode == 0, r.stderr
    assert "recording failed" not in r.stderr
    assert "(script exit status 0)" in r.stderr


def test_nproc_launches_ranks_as_torchrun_keeps_each_recording_and_names_the_slow_rank(cli, examples, tmp_path):
    script = os.path.join(examples, "ddp_hccl.py")
    r = npuscope_run(cli, tmp_path, "--nproc", "2", "--db", "job.db", "--", script, "--steps", "4", "--slow-rank", "1")
    assert r.returncode == 0, r.stderr
    # every line of a rank's output carries its rank; no line holds two ranks' output
    steps = [line for line in r.stdout.splitlines() if " loss " in line]
    assert sorted(line.split(" loss ")[0] for line in steps) == sorted(
        f"[rank{k}] step {s}" for k in range(2) for s in range(4)), r.stdout
    # both ranks' recordings, each knowing its place in one job
    jobs = set()
    for name, rank in (("job.db", 0), ("job.rank1.db", 1)):
        (status, rk, world, job), = query(str(tmp_path / name), "SELECT status, rank, world_size, job FROM runs")
        assert (status, rk, world) == ("completed", rank, 2)
        assert query(str(tmp_path / name), "SELECT count(*) FROM steps")[0][0] == 4
        jobs.add(job)
    assert len(jobs) == 1
    assert "recorded run 1 in job.rank1.db" in r.stderr and "recorded run 1 in job.db" in r.stderr
    assert "cluster: job " in r.stdout and "Slow rank: rank 1" in r.stdout and "slow_rank_delay" in r.stdout


def test_nproc_ends_the_other_ranks_when_one_fails(cli, tmp_path):
    (tmp_path / "ddp.py").write_text(textwrap.dedent("""
        import os, time, torch, torch.distributed as dist
        import torch_npu
        dist.init_process_group("hccl")
        if os.environ["RANK"] == "1":
            raise SystemExit(3)
        time.sleep(120)   # rank 0 would wait for ever: the launcher ends it
    """))
    r = npuscope_run(cli, tmp_path, "--nproc", "2", "--no-report", "--", "ddp.py")
    assert r.returncode == 3, r.stderr
    assert "rank 1 exited with code 3" in r.stderr
    statuses = {query(str(tmp_path / n), "SELECT status FROM runs")[0][0] for n in ("npuscope.db", "npuscope.rank1.db")}
    assert statuses == {"failed"}
