"""bench_distributed: the hccl backend's costs on 2 ranks (loopback TCP), as ratios measured in one run.

    PYTHONPATH=build/python /usr/bin/python3 benchmarks/bench_distributed.py   (or: ninja -C build bench_distributed)

Both ranks run the same sequence of blocks; rank 0 times them. Blocks of A and B alternate (AB,
BA, ...) and each adjacent pair gives one ratio; the median is reported (as bench_python.py and
benchmarks/ratio.h do), beside total-over-total.
  ratio_allreduce_vs_gloo_cpu       allreduce of 16 MiB fp32 on npu tensors through the hccl group
                                    vs c10d's Gloo group on CPU tensors (target <= 1.1: the npu
                                    tensors reach Gloo as zero-copy views)
  ratio_ddp_step_recorded_vs_not    a DistributedDataParallel training step of the built-in CNN
                                    (batch 64 per rank) on the npu inside npuscope.profile vs
                                    outside (target <= 1.05); starting the recording and its
                                    first step are not timed
"""
import datetime
import json
import os
import socket
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import npuscope

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_python import Cnn  # noqa: E402  (the CLI's built-in cnn, as bench_python measures it)

PAIRS_ALLREDUCE, REPS_ALLREDUCE = 25, 4
PAIRS_DDP, STEPS_DDP = 25, 6


def alternate(run_a, run_b, pairs, setup_a=None, teardown_a=None):
    """Setting A up and tearing it down (starting and stopping a recording) is not timed."""
    ta, tb = [], []
    for i in range(pairs):
        order = [(run_a, ta, setup_a, teardown_a), (run_b, tb, None, None)]
        for run, times, setup, teardown in (order if i % 2 == 0 else order[::-1]):
            if setup:
                setup()
            dist.barrier()  # both ranks start each block together
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
            if teardown:
                teardown()
    ratios = [a / b for a, b in zip(ta, tb)]
    return statistics.median(ratios), sum(ta) / sum(tb)


def allreduce(cpu_group):
    n = 16 * 1024 * 1024 // 4
    npu_t, cpu_t = torch.ones(n).npu(), torch.ones(n)

    def on(t, group):
        def run():
            for _ in range(REPS_ALLREDUCE):
                dist.all_reduce(t, group=group)
        return run
    on(npu_t, None)(), on(cpu_t, cpu_group)()  # warm up: Gloo's buffers, pairs of sockets
    return alternate(on(npu_t, None), on(cpu_t, cpu_group), PAIRS_ALLREDUCE)


def ddp_step(rank, db):
    torch.manual_seed(0)
    model = Cnn().npu()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = torch.randn(64, 1, 28, 28).npu(), torch.randint(0, 10, (64,)).npu()

    holder = {}

    def one_step():
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if "p" in holder:
            holder["p"].step(loss)
        return loss

    def steps():
        for _ in range(STEPS_DDP):
            loss = one_step()
        float(loss)

    def start():
        # Starting a recording is not timed, nor is its first step, which costs once per
        # recording (3-4 ms more than the next ones on this CNN): a steady-state step is what is
        # compared.
        holder["p"] = npuscope.profile(db=db).start()
        one_step()

    def stop():
        holder.pop("p").stop()

    steps()  # warm up
    return alternate(steps, steps, PAIRS_DDP, setup_a=start, teardown_a=stop)


def rank_main(rank, world, port, out_path):
    dist.init_process_group("hccl", init_method=f"tcp://127.0.0.1:{port}", world_size=world, rank=rank,
                            timeout=datetime.timedelta(minutes=5))
    cpu_group = dist.new_group(backend="gloo")
    r1, m1 = allreduce(cpu_group)
    with tempfile.TemporaryDirectory() as tmp:
        r2, m2 = ddp_step(rank, os.path.join(tmp, f"rank{rank}.db"))
    if rank == 0:
        out = {"ratio_allreduce_vs_gloo_cpu": round(r1, 3), "ratio_allreduce_vs_gloo_cpu_of_means": round(m1, 3),
               "ratio_ddp_step_recorded_vs_not": round(r2, 3), "ratio_ddp_step_recorded_vs_not_of_means": round(m2, 3),
               "targets": {"ratio_allreduce_vs_gloo_cpu": "<= 1.1", "ratio_ddp_step_recorded_vs_not": "<= 1.05"}}
        with open(out_path, "w") as f:
            json.dump(out, f)
    dist.destroy_process_group()


def main():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "result.json")
        mp.spawn(rank_main, args=(2, port, out_path), nprocs=2)
        with open(out_path) as f:
            out = json.load(f)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
