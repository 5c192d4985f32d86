#!/usr/bin/env python3
"""Online inference of ResNet-50 on npuscope's emulated NPU, recorded into a trace file.

The flow of Ascend's online-inference guide, on synthetic data (nothing is downloaded):

* torchvision's resnet50 with random (seeded) weights, moved to the npu;
* ``amp.initialize(model, opt_level="O2")`` without an optimizer (inference: returns the model);
* ``model.eval()`` and ``torch.no_grad()``;
* ImageNet-shaped batches (N x 3 x 224 x 224, normalized with ImageNet's mean and std) with random
  labels from a seeded generator;
* top-1 / top-5 accuracy and throughput (images/s), every batch a step of an npuscope recording.

The weights and the labels are random, so the accuracies are chance level: about 0.1 % (top-1) and
0.5 % (top-5) over many images; on a few dozen images they are usually 0. What the run measures is
the flow and its cost: read the recording with ``npuscope report resnet50_infer.db``.

    PYTHONPATH=build/python /usr/bin/python3 examples/resnet50_inference.py --batch-size 8 --batches 4
"""
import argparse
import time

import torch
import torch.nn.functional as F
import torchvision

import npuscope
from npuscope import amp

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
NUM_CLASSES = 1000


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="ResNet-50 online inference on npuscope's emulated NPU (synthetic "
                                            "ImageNet-shaped data, random weights)")
    p.add_argument("--batch-size", type=int, default=8, help="images per batch (default 8)")
    p.add_argument("--batches", type=int, default=4, help="batches to run (default 4)")
    p.add_argument("--db", default="resnet50_infer.db", help="trace file to record into (default resnet50_infer.db)")
    p.add_argument("--opt-level", default="O2", help="apex opt level for amp.initialize (default O2)")
    p.add_argument("--device", default="npu:0", help="device (default npu:0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights, images and labels (default 0)")
    args = p.parse_args(argv)
    if args.batch_size < 1 or args.batches < 1:
        p.error("--batch-size and --batches must be at least 1")
    return args


def synthetic_imagenet(n, seed):
    """n ImageNet-shaped images (pixels uniform in [0, 1), then normalized with ImageNet's mean and
    std, as transforms.Normalize does after ToTensor) and n random labels in [0, 1000)."""
    gen = torch.Generator().manual_seed(seed)
    images = torch.rand(n, 3, 224, 224, generator=gen)
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    images = (images - mean) / std
    labels = torch.randint(0, NUM_CLASSES, (n,), generator=gen)
    return images, labels


def topk_correct(logits, target, ks=(1, 5)):
    """How many of the batch have their label among the k highest logits, for each k."""
    maxk = max(ks)
    pred = logits.topk(maxk, dim=1, largest=True, sorted=True).indices  # N x maxk
    hit = pred.eq(target.view(-1, 1))                                    # N x maxk
    return [int(hit[:, :k].any(dim=1).sum()) for k in ks]


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)  # the random weights of resnet50

    print(f"=> resnet50 (random weights, seed {args.seed}) on {args.device}, amp opt_level {args.opt_level}")
    model = torchvision.models.resnet50()  # weights=None: nothing is downloaded
    model = model.to(args.device)
    model = amp.initialize(model, opt_level=args.opt_level)  # no optimizer: returns the model alone
    model.eval()

    n = args.batch_size * args.batches
    images, labels = synthetic_imagenet(n, args.seed)
    print(f"=> {n} synthetic ImageNet-shaped images (3x224x224, ImageNet-normalized), random labels; "
          f"{args.batches} batch(es) of {args.batch_size}")

    top1 = top5 = seen = 0
    batch_seconds = []
    with npuscope.profile(db=args.db) as prof, torch.no_grad():
        for b in range(args.batches):
            start = time.perf_counter()
            x = images[b * args.batch_size:(b + 1) * args.batch_size].to(args.device)
            y = labels[b * args.batch_size:(b + 1) * args.batch_size].to(args.device)
            logits = model(x)                     # fp32 out (amp casts the outputs back)
            loss = F.cross_entropy(logits, y)     # recorded as the step's loss (ln 1000 = 6.9 at chance)
            c1, c5 = topk_correct(logits.cpu(), y.cpu())
            npuscope.npu.synchronize()
            batch_seconds.append(time.perf_counter() - start)
            prof.step(loss)
            top1 += c1
            top5 += c5
            seen += x.shape[0]
            print(f"batch [{b + 1}/{args.batches}]  {batch_seconds[-1]:7.3f} s  "
                  f"{x.shape[0] / batch_seconds[-1]:7.2f} images/s  loss {float(loss):.4f}  "
                  f"top-1 {c1}/{x.shape[0]}  top-5 {c5}/{x.shape[0]}")
        run_id = prof.run_id
        ops = prof.recorded_ops

    total = sum(batch_seconds)
    print()
    print("=== resnet50 online inference summary ===")
    print(f"device              {args.device} (npuscope emulated NPU), opt_level {args.opt_level}")
    print(f"images              {seen} ({args.batches} batches of {args.batch_size})")
    print(f"top-1 accuracy      {top1 / seen:.4f} ({top1}/{seen})")
    print(f"top-5 accuracy      {top5 / seen:.4f} ({top5}/{seen})")
    print("                    random weights and random labels: chance is 0.0010 (top-1) and 0.0050 (top-5)")
    print(f"total time          {total:.3f} s")
    print(f"throughput          {seen / total:.2f} images/s")
    if args.batches > 1:
        rest = batch_seconds[1:]
        print(f"throughput (warm)   {args.batch_size * len(rest) / sum(rest):.2f} images/s "
              f"(batches 2..{args.batches}, first batch left out)")
    print(f"recorded            run {run_id} in {args.db}: {args.batches} steps, {ops} ops")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
