"""torch_npu.profiler on npuscope: the schedule gives torch's actions, a scheduled profile leaves
one *_ascend_pt folder per active cycle laid out as the real 910B export in tests/data/traces
(file names, header rows, bare trace_view array with string ts, one ProfilerStep# per active
step), which `npuscope import` reads back with its steps; the torch_npu 2.x-style example trains
unchanged under plain python and under `npuscope run`."""
import csv
import glob
import json
import os
import subprocess

import pytest
import torch

from conftest import ROOT, run_python

SAMPLE = os.path.join(ROOT, "tests", "data", "traces", "ascend_alexnet_rank0_ascend_pt", "ASCEND_PROFILER_OUTPUT")
EXAMPLE = os.path.join(ROOT, "examples", "ascend", "profile_train.py")

# A tiny training loop with a torch_npu profile around it; {schedule} and {steps} are filled in.
LOOP = """
import sys
import torch
import torch_npu
torch.npu.set_device(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).npu()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8).npu()
y = torch.randint(0, 4, (4,)).npu()
prof = torch_npu.profiler.profile(
    activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
    schedule={schedule},
    on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./out", worker_name="w0"),
    record_shapes=True, profile_memory=True)
prof.start()
for i in range({steps}):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    {step_call}
prof.stop()
print("FOLDERS", len(prof.folders))
prof.export_chrome_trace("last_cycle.json")
"""


def header(path):
    with open(path, newline="") as f:
        return next(csv.reader(f))


def profiler_steps(folder):
    with open(os.path.join(folder, "ASCEND_PROFILER_OUTPUT", "trace_view.json")) as f:
        events = json.load(f)
    assert isinstance(events, list), "trace_view.json is a bare array"
    assert all(isinstance(e["ts"], str) for e in events if "ts" in e)
    return sorted(int(e["name"].split("#")[1]) for e in events
                  if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"))


def imported_steps(cli, folder, db):
    out = subprocess.run([cli, "import", folder, "--db", db], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    import sqlite3
    con = sqlite3.connect(db)
    try:
        return [r[0] for r in con.execute("SELECT step FROM steps ORDER BY step")]
    finally:
        con.close()


@pytest.mark.filterwarnings("ignore:Profiler won.t be using warmup")
@pytest.mark.parametrize("params", [dict(wait=1, warmup=1, active=3), dict(wait=0, active=1),
                                    dict(wait=2, warmup=1, active=2, repeat=2, skip_first=3),
                                    dict(wait=1, active=2, repeat=1)])
def test_schedule_gives_torchs_actions(params):
    import torch_npu
    ours = torch_npu.profiler.schedule(**params)
    theirs = torch.profiler.schedule(**{"warmup": 0, **params})  # torch's own (warmup required there)
    assert [ours(s) for s in range(40)] == [theirs(s) for s in range(40)]


def test_schedule_refuses_bad_values():
    import torch_npu
    with pytest.raises(ValueError, match="active must be at least 1"):
        torch_npu.profiler.schedule(wait=1, active=0)
    with pytest.raises(ValueError, match="wait must be a non-negative integer"):
        torch_npu.profiler.schedule(wait=-1, active=1)


def test_one_folder_per_active_cycle_with_its_steps(tmp_path, cli):
    script = tmp_path / "loop.py"
    script.write_text(LOOP.format(schedule="torch_npu.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)",
                                  steps=10, step_call="prof.step()"))
    out = run_python([str(script)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "FOLDERS 2" in out.stdout
    folders = sorted(glob.glob(str(tmp_path / "out" / "w0_*_ascend_pt")))
    assert len(folders) == 2
    # Cycles: steps 0 wait, 1 warmup, 2-3 active; 4 wait, 5 warmup, 6-7 active; then none.
    assert [profiler_steps(f) for f in folders] == [[2, 3], [6, 7]]
    assert imported_steps(cli, folders[1], str(tmp_path / "back.db")) == [6, 7]
    # export_chrome_trace: the last cycle's timeline, as torch_npu's trace_view.json.
    with open(tmp_path / "last_cycle.json") as f:
        last = json.load(f)
    assert sorted(e["name"] for e in last if e.get("name", "").startswith("ProfilerStep#")) == \
        ["ProfilerStep#6", "ProfilerStep#7"]
    # npuscope's own file holds only the active steps.
    from conftest import query
    assert [r[0] for r in query(str(tmp_path / "out" / "npuscope.db"), "SELECT step FROM steps ORDER BY step")] == \
        [2, 3, 6, 7]


def test_a_folder_that_cannot_be_written_costs_one_line_not_the_training(tmp_path):
    # The handler's folder cannot be made (a file stands where its parent should be): the script
    # trains on, one line per cycle says so, and the recording keeps the steps.
    script = tmp_path / "loop.py"
    script.write_text(LOOP.format(schedule="torch_npu.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)",
                                  steps=10, step_call="prof.step()").replace('worker_name="w0"', 'worker_name="blocker/w0"')
                      .replace('prof.export_chrome_trace("last_cycle.json")', 'print("TRAINED")'))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "blocker").write_text("not a folder")
    out = run_python([str(script)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "FOLDERS 0" in out.stdout and "TRAINED" in out.stdout
    lines = [l for l in out.stderr.splitlines() if "not written to" in l]
    assert len(lines) == 2 and "steps 2-3 not written to" in lines[0] and "cannot make the folder" in lines[0], out.stderr
    from conftest import query
    assert [r[0] for r in query(str(tmp_path / "out" / "npuscope.db"), "SELECT step FROM steps ORDER BY step")] == \
        [2, 3, 6, 7]


def test_without_a_schedule_the_whole_profile_is_written_at_stop(tmp_path):
    script = tmp_path / "loop.py"
    # No prof.step() at all: the optimizer's steps end the recorded steps; stop() writes them.
    script.write_text(LOOP.format(schedule="None", steps=3, step_call="pass"))
    out = run_python([str(script)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    folders = glob.glob(str(tmp_path / "out" / "w0_*_ascend_pt"))
    assert len(folders) == 1
    assert profiler_steps(folders[0]) == [0, 1, 2]
    info = json.load(open(os.path.join(folders[0], "profiler_info.json")))
    assert info["config"]["common_config"]["schedule"] is None
    assert info["config"]["common_config"]["record_shapes"] is True


def test_default_arguments_still_write_the_kernels(tmp_path):
    """torch_npu's defaults (record_shapes=False, profile_memory=False): the folder still has the
    device's kernels (as a real export does); only their input shapes are left out."""
    script = tmp_path / "loop.py"
    text = LOOP.format(schedule="None", steps=2, step_call="prof.step()")
    script.write_text(text.replace("record_shapes=True, profile_memory=True", ""))
    out = run_python([str(script)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    folders = glob.glob(str(tmp_path / "out" / "w0_*_ascend_pt"))
    assert len(folders) == 1
    info = json.load(open(os.path.join(folders[0], "profiler_info.json")))
    assert info["config"]["common_config"]["record_shapes"] is False
    with open(os.path.join(folders[0], "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    assert {"MatMulV2"} <= {r["Type"] for r in rows}
    assert {int(r["Step Id"]) for r in rows} == {0, 1}
    assert all(r["Input Shapes"].strip() in ("", "N/A") for r in rows)


def test_bad_arguments_are_refused_in_one_line():
    import torch_npu
    with pytest.raises(ValueError, match="export_type 'xml' is not one of"):
        torch_npu.profiler._ExperimentalConfig(export_type="xml")
    with pytest.raises(ValueError, match="experimental_config must be"):
        torch_npu.profiler.profile(experimental_config={"level": 0})
    with pytest.raises(ValueError, match="worker_name must be a string"):
        torch_npu.profiler.tensorboard_trace_handler("./x", worker_name=3)


def check_acceptance_folder(cli, tmp_path, result):
    folders = glob.glob(os.path.join(result, "*_ascend_pt"))
    assert len(folders) == 1, folders
    folder = folders[0]
    assert profiler_steps(folder) == [2, 3, 4]  # schedule(wait=1, warmup=1, active=3): the 3 active steps
    out = os.path.join(folder, "ASCEND_PROFILER_OUTPUT")
    for name in ["op_statistic.csv", "operator_details.csv", "api_statistic.csv", "step_trace_time.csv",
                 "memory_record.csv", "operator_memory.csv"]:
        assert header(os.path.join(out, name)) == header(os.path.join(SAMPLE, name)), name
    real = header(os.path.join(SAMPLE, "kernel_details.csv"))
    assert header(os.path.join(out, "kernel_details.csv")) == real[:len(header(os.path.join(out, "kernel_details.csv")))]
    with open(os.path.join(out, "kernel_details.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(r["Start Time(us)"].endswith("\t") for r in rows)
    assert {int(r["Step Id"]) for r in rows} == {2, 3, 4}
    assert {"Conv2D", "MatMulV2"} <= {r["Type"] for r in rows}
    info = json.load(open(os.path.join(folder, "profiler_info.json")))
    assert info["config"]["common_config"]["schedule"] == {"wait": 1, "warmup": 1, "active": 3, "repeat": 1,
                                                           "skip_first": 0}
    assert info["config"]["experimental_config"]["_profiler_level"] == "Level0"
    meta = json.load(open(os.path.join(folder, "profiler_metadata.json")))
    assert "predicted" in meta["npuscope"]["device_rows"]
    assert imported_steps(cli, folder, str(tmp_path / "imported.db")) == [2, 3, 4]


def test_the_torch_npu_2x_training_script_runs_unchanged(tmp_path, cli):
    out = run_python([EXAMPLE, "--steps", "6", "--out", "./result"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "step 5: loss" in out.stdout
    check_acceptance_folder(cli, tmp_path, str(tmp_path / "result"))


def test_the_training_script_under_npuscope_run(tmp_path, cli):
    run = subprocess.run([cli, "run", "--db", "outer.db", "--", EXAMPLE, "--steps", "6", "--out", "./result"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    # The profile rides on `npuscope run`'s recording (every step of the script is in outer.db);
    # the folder still holds the schedule's active steps only.
    check_acceptance_folder(cli, tmp_path, str(tmp_path / "result"))
