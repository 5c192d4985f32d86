"""benchmarks/bench_table.py, the table scripts/bench.sh prints: figures read from Google
Benchmark's JSON and bench_python's, held against benchmarks/targets.tsv and the last run recorded
on this machine, WORSE only beyond the noise between recorded runs, and each run recorded."""
import glob
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "..", "..", "benchmarks", "bench_table.py")
sys.path.insert(0, os.path.dirname(TABLE))
import bench_table  # noqa: E402


def gbench(**counters):
    """A Google Benchmark JSON output with one entry carrying these user counters."""
    entry = {"name": "BM_X/iterations:3", "run_type": "iteration", "iterations": 3, "real_time": 5.0,
             "cpu_time": 4.0, "time_unit": "ms", **counters}
    return json.dumps({"context": {"num_cpus": 2}, "benchmarks": [entry]})


def run_table(raw, results, *extra):
    return subprocess.run([sys.executable, TABLE, str(raw), "--results", str(results), *extra],
                          capture_output=True, text=True)


def line_of(out, metric):
    return next(l for l in out.splitlines() if l.startswith(metric + " "))


def test_figures_targets_last_run_and_noise(tmp_path):
    raw, results = tmp_path / "raw", tmp_path / "results"
    raw.mkdir()
    (raw / "bench_profiler.json").write_text(gbench(added_ns_per_op=150.0, writer_rows_per_s=2.0e6))
    (raw / "bench_python.json").write_text(json.dumps({"ratio_py_profile_overhead": 1.02, "targets": {"x": "<= 1"}}))
    first = run_table(raw, results)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "no recorded run on this machine yet" in first.stdout
    # Targets: added_ns_per_op <= 200 met, writer_rows_per_s >= 2.5M missed; not run: not measured.
    assert line_of(first.stdout, "added_ns_per_op").rstrip().endswith("meets")
    assert line_of(first.stdout, "writer_rows_per_s").rstrip().endswith("MISSES")
    assert line_of(first.stdout, "import_MBps").rstrip().endswith("not measured")
    assert line_of(first.stdout, "ratio_py_profile_overhead").rstrip().endswith("meets")
    [saved] = glob.glob(str(results / "*.json"))
    record = json.load(open(saved))
    assert record["figures"]["added_ns_per_op"] == 150.0
    assert "real_time" not in record["figures"]  # Google Benchmark's own keys are not figures
    assert record["machine"] == bench_table.machine()
    assert sorted(record["benchmarks"]) == ["bench_profiler", "bench_python"]

    # The second run: 8 % slower recording is within the 10 % noise of one recorded run; writer
    # rows/s 30 % lower is WORSE (higher is better); both against the first run's figures.
    (raw / "bench_profiler.json").write_text(gbench(added_ns_per_op=162.0, writer_rows_per_s=1.4e6))
    second = run_table(raw, results)
    assert "last recorded: " + os.path.basename(saved) in second.stdout
    rows = line_of(second.stdout, "writer_rows_per_s")
    assert "-30.0%" in rows and rows.rstrip().endswith("MISSES WORSE")
    assert "+8.0%" in line_of(second.stdout, "added_ns_per_op")
    assert "WORSE" not in line_of(second.stdout, "added_ns_per_op")
    assert "1 figure(s) worse than the last recorded run by more than its noise: writer_rows_per_s" in second.stdout

    # Two recorded runs now: the noise of added_ns_per_op is their spread (162/150 - 1 = 8 %);
    # --no-save compares without recording.
    (raw / "bench_profiler.json").write_text(gbench(added_ns_per_op=180.0, writer_rows_per_s=1.4e6))
    third = run_table(raw, results, "--no-save")
    added = line_of(third.stdout, "added_ns_per_op")
    assert "    8%" in added and "+11.1%" in added and added.rstrip().endswith("meets WORSE")
    assert len(glob.glob(str(results / "*.json"))) == 2


def test_a_benchmark_that_failed_is_an_error(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    out = json.loads(gbench(added_ns_per_op=100.0))
    out["benchmarks"][0].update(error_occurred=True, error_message="no trace file")
    (raw / "bench_profiler.json").write_text(json.dumps(out))
    r = run_table(raw, tmp_path / "results", "--no-save")
    assert r.returncode == 1
    assert "error: bench_profiler: BM_X/iterations:3: no trace file" in r.stdout


def test_reference_figures_have_no_verdict_on_a_target(tmp_path):
    """Rows of targets.tsv whose target is "-" (the host's floors under a figure: libtorch's cost of
    observing an op, a plain SQLite loop) are shown as references: never MISSES, never counted as
    missed, still compared with the last run."""
    refs = [t["metric"] for t in bench_table.targets() if t["target"] == "-"]
    assert "callback_floor_ns_per_op" in refs and "sqlite_plain_rows_per_s" in refs
    raw, results = tmp_path / "raw", tmp_path / "results"
    raw.mkdir()
    (raw / "bench_profiler.json").write_text(gbench(callback_floor_ns_per_op=230.0, added_ns_per_op=390.0))
    r = run_table(raw, results)
    assert r.returncode == 0, r.stdout + r.stderr
    row = line_of(r.stdout, "callback_floor_ns_per_op")
    assert row.rstrip().endswith("reference") and " - " in row
    assert line_of(r.stdout, "added_ns_per_op").rstrip().endswith("MISSES")
    assert "1 figure(s) miss their target: added_ns_per_op" in r.stdout
    (raw / "bench_profiler.json").write_text(gbench(callback_floor_ns_per_op=300.0, added_ns_per_op=390.0))
    again = run_table(raw, results, "--no-save")
    assert line_of(again.stdout, "callback_floor_ns_per_op").rstrip().endswith("reference WORSE")
