#!/usr/bin/env python3
"""A data-parallel training script written as for torchrun on Ascend: it reads RANK / LOCAL_RANK /
WORLD_SIZE from the environment, joins the job with backend "hccl" (env://), wraps its model in
DistributedDataParallel and records itself with npuscope.profile(db="run.db") on every rank.

    npuscope run --nproc 2 -- examples/ddp_hccl.py --steps 4

(`npuscope run --nproc` starts the ranks as torchrun would; rank R records into the run's file's
.rankR sibling, and the cluster report follows.) ``--slow-rank R`` makes rank R lose 50 ms a step
in an annotated section, so the report has a slow rank to find.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch_npu  # noqa: F401  (torch.npu, the hccl backend)

import npuscope


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--slow-rank", type=int, default=-1)
    args = p.parse_args()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    torch.npu.set_device(local_rank)
    dist.init_process_group(backend="hccl")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).npu()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)
    with npuscope.profile(db="run.db") as prof:
        for step in range(args.steps):
            x, y = torch.randn(16, 32, generator=g).npu(), torch.randn(16, 4, generator=g).npu()
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            if rank == args.slow_rank:
                with torch.autograd.profiler.record_function("slow_rank_delay"):
                    time.sleep(0.05)
            loss.backward()
            opt.step()
            prof.step(loss)
            print(f"step {step} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
