"""bench_python: the Python front-end's costs, as ratios measured in one run.

    PYTHONPATH=build/python /usr/bin/python3 benchmarks/bench_python.py   (or: ninja -C build bench_python)

Blocks of A and B alternate (AB, BA, AB, ...) and each adjacent pair gives one ratio; the median
is reported (as benchmarks/ratio.h does for the C++ benchmarks), beside total-over-total.
  ratio_py_small_op_vs_cpu    a Python loop of small in-place adds on an npu tensor vs on a CPU
                              tensor: the device's dispatch cost seen from Python (target <= 1.3)
  ratio_py_profile_overhead   a CNN training step from Python (forward, backward, NpuFusedAdam)
                              inside npuscope.profile vs outside (target <= 1.05)
  ratio_py_profile_overhead_transformer
                              the same for a small transformer (4 encoder layers, d_model 64,
                              about 1,700 ops per step: many small ops, as language models have)
  ratio_py_msprobe_statistics the same step dumped by msprobe's PrecisionDebugger (task statistics,
                              level mix: every API and module call, forward and backward, its
                              dump.json written each step) vs not dumped (target <= 1.3)
"""
import json
import os
import statistics
import sys
import tempfile
import time

import torch

import npuscope
from npuscope import optimizers


def alternate(run_a, run_b, pairs, setup_a=None, setup_b=None, teardown_a=None):
    """Median over adjacent block pairs of time(A)/time(B), and total(A)/total(B)."""
    ta, tb = [], []

    def timed(setup, run, teardown):
        if setup:
            setup()
        t0 = time.perf_counter()
        run()
        dt = time.perf_counter() - t0
        if teardown:
            teardown()
        return dt

    for i in range(pairs):
        if i % 2 == 0:
            ta.append(timed(setup_a, run_a, teardown_a))
            tb.append(timed(setup_b, run_b, None))
        else:
            tb.append(timed(setup_b, run_b, None))
            ta.append(timed(setup_a, run_a, teardown_a))
    ratios = [a / b for a, b in zip(ta, tb)]
    return statistics.median(ratios), sum(ta) / sum(tb), statistics.median(ta), statistics.median(tb)


def small_ops(pairs, reps):
    npu = torch.zeros(64, device="npu")
    cpu = torch.zeros(64)

    def loop(t):
        def run():
            for _ in range(reps):
                t.add_(1.0)
        return run
    loop(npu)(), loop(cpu)()  # warm up
    return alternate(loop(npu), loop(cpu), pairs)


class Cnn(torch.nn.Module):
    """The CLI's built-in `cnn`."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc = torch.nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(self.conv1(x).relu(), 2)
        x = torch.nn.functional.max_pool2d(self.conv2(x).relu(), 2)
        return self.fc(x.flatten(1))


def cnn_batch():
    return Cnn().npu(), torch.randn(64, 1, 28, 28, device="npu"), torch.randint(0, 10, (64,), device="npu")


def transformer_batch():
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0,
                                             batch_first=True)
    model = torch.nn.Sequential(torch.nn.Embedding(100, 64), torch.nn.TransformerEncoder(layer, num_layers=4),
                                torch.nn.Linear(64, 100), torch.nn.Flatten(0, 1)).npu()
    return model, torch.randint(0, 100, (8, 32), device="npu"), torch.randint(0, 100, (8 * 32,), device="npu")


def profile_overhead(pairs, steps, db, batch=cnn_batch):
    torch.manual_seed(0)
    model, x, y = batch()
    opt = optimizers.NpuFusedAdam(model.parameters(), lr=1e-3)

    def run():
        for _ in range(steps):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        float(loss)

    holder = {}

    def start():
        holder["p"] = npuscope.profile(db=db).start()

    def stop():
        holder.pop("p").stop()

    run()  # warm up
    return alternate(run, run, pairs, setup_a=start, teardown_a=stop)


def msprobe_overhead(pairs, steps, dump_path):
    from npuscope.msprobe import PrecisionDebugger
    torch.manual_seed(0)
    model = Cnn().npu()
    opt = optimizers.NpuFusedAdam(model.parameters(), lr=1e-3)
    x = torch.randn(64, 1, 28, 28, device="npu")
    y = torch.randint(0, 10, (64,), device="npu")
    debugger = PrecisionDebugger(task="statistics", dump_path=dump_path, level="mix")

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    def plain():
        for _ in range(steps):
            loss = step()
        float(loss)

    def dumped():
        for _ in range(steps):
            debugger.start(model)
            loss = step()
            debugger.stop()
            debugger.step()
        float(loss)

    plain(), dumped()  # warm up
    try:
        return alternate(dumped, plain, pairs)
    finally:
        debugger.close()


def main():
    quick = "--quick" in sys.argv
    out = {}
    r, total, a, b = small_ops(pairs=8 if quick else 16, reps=2000)
    out["ratio_py_small_op_vs_cpu"] = round(r, 3)
    out["ratio_py_small_op_vs_cpu_of_means"] = round(total, 3)
    out["py_small_op_npu_us"] = round(a / 2000 * 1e6, 3)
    out["py_small_op_cpu_us"] = round(b / 2000 * 1e6, 3)
    with tempfile.TemporaryDirectory() as d:
        r, total, a, b = profile_overhead(pairs=4 if quick else 10, steps=5, db=os.path.join(d, "bench.db"))
    out["ratio_py_profile_overhead"] = round(r, 3)
    out["ratio_py_profile_overhead_of_means"] = round(total, 3)
    out["py_cnn_step_ms"] = round(b / 5 * 1e3, 3)
    with tempfile.TemporaryDirectory() as d:
        r, total, a, b = profile_overhead(pairs=6 if quick else 12, steps=3, db=os.path.join(d, "bench.db"),
                                          batch=transformer_batch)
    out["ratio_py_profile_overhead_transformer"] = round(r, 3)
    out["py_transformer_step_ms"] = round(b / 3 * 1e3, 3)
    with tempfile.TemporaryDirectory() as d:
        r, total, a, b = msprobe_overhead(pairs=4 if quick else 10, steps=5, dump_path=d)
    out["ratio_py_msprobe_statistics"] = round(r, 3)
    out["ratio_py_msprobe_statistics_of_means"] = round(total, 3)
    out["targets"] = {"ratio_py_small_op_vs_cpu": "<= 1.3", "ratio_py_profile_overhead": "<= 1.05",
                      "ratio_py_msprobe_statistics": "<= 1.3"}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
