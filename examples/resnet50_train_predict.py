#!/usr/bin/env python3
"""ResNet-50 training steps on npuscope's emulated NPU, and the throughput a real NPU is predicted at.

torchvision's resnet50 (random seeded weights), apex-style ``amp.initialize(opt_level="O2")``,
SGD with momentum, ImageNet-shaped synthetic batches; every step recorded. The emulator's CPU
computes each step in seconds; the recording's predicted timeline (docs/device.md, "Predicted
timeline") says what one Ascend card would take, read here from ``npuscope report --json``:

    PYTHONPATH=build/python /usr/bin/python3 examples/resnet50_train_predict.py --batch-size 32 --steps 3

Compare with a published figure, e.g. Ascend ModelZoo's ResNet50_for_PyTorch: 1p, O2, batch 512.
"""
import argparse
import json
import os
import subprocess
import time

import torch
import torch.nn.functional as F
import torchvision

import npuscope
from npuscope import amp


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=3, help="training steps (the middle ones are predicted)")
    p.add_argument("--db", default="resnet50_train.db")
    p.add_argument("--opt-level", default="O2")
    p.add_argument("--npuscope", default=os.environ.get("NPUSCOPE_CLI", os.path.join(os.path.dirname(__file__), "..",
                                                                                    "build", "profiler", "npuscope")),
                   help="the npuscope CLI, for its report (default: $NPUSCOPE_CLI or the build tree's)")
    args = p.parse_args()

    torch.manual_seed(0)
    model = torchvision.models.resnet50().npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model, optimizer = amp.initialize(model, optimizer, opt_level=args.opt_level)
    gen = torch.Generator().manual_seed(0)
    started = time.perf_counter()
    with npuscope.profile(db=args.db) as prof:
        for _ in range(args.steps):
            x = torch.randn(args.batch_size, 3, 224, 224, generator=gen).npu()
            y = torch.randint(0, 1000, (args.batch_size,), generator=gen).npu()
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            with amp.scale_loss(loss, optimizer) as scaled:
                scaled.backward()
            optimizer.step()
            prof.step(loss)
        run_id = prof.run_id
    measured = (time.perf_counter() - started) / args.steps
    report = json.loads(subprocess.run([args.npuscope, "report", "--json", "--run", str(run_id), args.db],
                                       check=True, capture_output=True, text=True).stdout)
    pred = report["predicted"]
    step_s = pred["median_step_ns"] / 1e9
    print(f"resnet50 {args.opt_level} batch {args.batch_size}: emulator {measured:.2f} s/step "
          f"({args.batch_size / measured:.1f} images/s on this CPU)")
    print(f"predicted on one npu: {step_s * 1e3:.2f} ms/step = {args.batch_size / step_s:.0f} images/s "
          f"({pred['bound']}; device busy {100 * (1 - pred['device_idle_share']):.1f} %, "
          f"{pred['kernels'] // pred['steps']} kernels and {pred['syncs'] // pred['steps']} syncs per step)")
    print(f"recorded run {run_id} in {args.db}")


if __name__ == "__main__":
    main()
