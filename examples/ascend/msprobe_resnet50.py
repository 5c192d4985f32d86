#!/usr/bin/env python3
"""Why does my NPU run diverge? msprobe dumps of a ResNet-50 training step, on the npu under apex
O2 and on the CPU in fp32, compared by npuscope.

The script is an Ascend one (torch_npu, apex, msprobe's PrecisionDebugger) and runs unchanged on
npuscope's emulated npu; ``--device cpu`` runs the same step in fp32 on the CPU, the bench a user
without a GPU compares against::

    PYTHONPATH=build/python /usr/bin/python3 examples/ascend/msprobe_resnet50.py --device npu --dump-path dump_npu
    PYTHONPATH=build/python /usr/bin/python3 examples/ascend/msprobe_resnet50.py --device cpu --dump-path dump_cpu
    build/cli/npuscope compare dump_npu dump_cpu --csv compare_result.csv

The compare names the first API whose statistics leave msprobe's pass band, the module it ran
in and the line that called it; the CSV has msprobe's summary columns, one row per tensor.
"""
import argparse

import torch
import torch.nn.functional as F
import torchvision


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=["npu", "cpu"], default="npu")
    p.add_argument("--dump-path", default="./dump_path")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--level", default="mix", choices=["L0", "L1", "mix"])
    p.add_argument("--opt-level", default="O2", help="apex opt level on the npu")
    args = p.parse_args()

    torch.manual_seed(0)
    model = torchvision.models.resnet50()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if args.device == "npu":
        import torch_npu  # noqa: F401  (torch.npu, the npu device)
        from apex import amp
        model = model.npu()
        model, optimizer = amp.initialize(model, optimizer, opt_level=args.opt_level, loss_scale=128.0)
    from msprobe.pytorch import PrecisionDebugger, seed_all
    seed_all(0)
    debugger = PrecisionDebugger(task="statistics", dump_path=args.dump_path, level=args.level)

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(args.batch_size, 3, args.image_size, args.image_size, generator=gen)
    y = torch.randint(0, 1000, (args.batch_size,), generator=gen)
    if args.device == "npu":
        x, y = x.npu(), y.npu()
    debugger.start(model)
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    if args.device == "npu":
        with amp.scale_loss(loss, optimizer) as scaled:
            scaled.backward()
    else:
        loss.backward()
    optimizer.step()
    debugger.stop()
    debugger.step()
    print(f"{args.device}: loss {loss.item():.4f}; msprobe dump in {args.dump_path}/step0")


if __name__ == "__main__":
    main()
