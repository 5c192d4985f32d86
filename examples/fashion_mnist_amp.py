#!/usr/bin/env python3
"""Fashion-MNIST training in plain PyTorch on npuscope's emulated NPU, with apex-style AMP.

The same network as npuscope's C++ built-in ``cnn`` (``npuscope train --model cnn``), trained with
``npuscope.optimizers.NpuFusedAdam`` under ``amp.initialize(model, optimizer, opt_level="O2")``
and ``amp.scale_loss``; the test accuracy is measured after every epoch (``model.eval()`` and
``torch.no_grad()``). Data: the IDX files of Debian's fashion-mnist package in
/usr/share/datasets/fashion-mnist/ (``--data-dir``), read with gzip and numpy.

With ``--db FILE`` the run is recorded with ``npuscope.profile``: every training batch is one step
(its loss, loss scale, overflow and learning rate), and each epoch's evaluation is one more step
(loss NULL) inside a ``evaluate epoch N`` user scope, so the training steps keep their own timing.

    PYTHONPATH=build/python /usr/bin/python3 examples/fashion_mnist_amp.py --epochs 5 --db fmnist.db
"""
import argparse
import contextlib
import gzip
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

import npuscope
from npuscope import amp, optimizers

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's pixel mean and std (after /255), as the C++ loader
CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")


def read_idx(path):
    """An IDX file (optionally gzipped) as a numpy array: magic 0x00 0x00 <type> <ndim>, then ndim
    big-endian int32 sizes, then the data (only unsigned bytes, type 0x08, occur here)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path}: not an IDX file")
    if raw[2] != 0x08:
        raise ValueError(f"{path}: IDX data type 0x{raw[2]:02x}; expected unsigned bytes (0x08)")
    ndim = raw[3]
    dims = np.frombuffer(raw, dtype=">i4", count=ndim, offset=4).astype(np.int64)
    offset = 4 + 4 * ndim
    expected = int(np.prod(dims))
    if len(raw) - offset != expected:
        raise ValueError(f"{path}: {len(raw) - offset} data bytes for shape {tuple(dims)} ({expected} expected)")
    return np.frombuffer(raw, dtype=np.uint8, offset=offset).reshape(tuple(dims))


class FashionMNIST(Dataset):
    """Fashion-MNIST from the IDX files: (1x28x28 float image normalized as (x/255 - 0.2860) / 0.3530,
    int64 label)."""

    def __init__(self, root=FASHION_MNIST_DIR, train=True):
        prefix = "train" if train else "t10k"
        images = read_idx(self._find(root, f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(self._find(root, f"{prefix}-labels-idx1-ubyte"))
        if images.ndim != 3 or images.shape[1:] != (28, 28) or labels.shape != (images.shape[0],):
            raise ValueError(f"{root}: unexpected shapes {images.shape} / {labels.shape}")
        x = torch.from_numpy(images.astype(np.float32)).div_(255.0).unsqueeze_(1)  # N x 1 x 28 x 28
        self.images = x.sub_(MEAN).div_(STD)
        self.labels = torch.from_numpy(labels.astype(np.int64))

    @staticmethod
    def _find(root, stem):
        for name in (stem + ".gz", stem):
            path = os.path.join(root, name)
            if os.path.isfile(path):
                return path
        raise FileNotFoundError(f"{os.path.join(root, stem)}.gz: missing (Debian: apt-get install fashion-mnist, "
                                "or give --data-dir)")

    def __len__(self):
        return self.labels.shape[0]

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


class Cnn(nn.Module):
    """npuscope's built-in ``cnn`` (workloads/src/models.cpp): two 3x3 conv + ReLU + 2x2 max-pool
    blocks (16, 32 channels), then a linear classifier; same module names."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Fashion-MNIST CNN training on npuscope's emulated NPU with apex AMP "
                                            "and NpuFusedAdam")
    p.add_argument("--epochs", type=int, default=5, help="epochs (default 5)")
    p.add_argument("--max-steps-per-epoch", type=int, default=0,
                   help="stop each epoch after this many batches; 0 = the whole training set (default 0)")
    p.add_argument("--batch-size", type=int, default=64, help="training batch size (default 64)")
    p.add_argument("--eval-batch-size", type=int, default=1000, help="test batch size (default 1000)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    p.add_argument("--opt-level", default="O2", help="apex opt level (default O2)")
    p.add_argument("--db", default="", help="record the run into this trace file (default: no recording)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and the shuffling (default 0)")
    p.add_argument("--device", default="npu:0", help="device (default npu:0)")
    p.add_argument("--data-dir", default=FASHION_MNIST_DIR, help=f"IDX files (default {FASHION_MNIST_DIR})")
    args = p.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or args.eval_batch_size < 1 or args.max_steps_per_epoch < 0:
        p.error("--epochs, --batch-size, --eval-batch-size must be >= 1 and --max-steps-per-epoch >= 0")
    return args


def evaluate(model, loader, device):
    """(accuracy, mean cross-entropy) over the loader."""
    model.eval()
    correct = total = 0
    loss_sum = 0.0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            logits = model(x)
            loss_sum += float(F.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(dim=1) == y).sum())
            total += y.shape[0]
    return correct / total, loss_sum / total


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)  # before the model: its initial weights come from this seed

    train_set = FashionMNIST(args.data_dir, train=True)
    test_set = FashionMNIST(args.data_dir, train=False)
    shuffle_gen = torch.Generator().manual_seed(args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, generator=shuffle_gen)
    test_loader = DataLoader(test_set, batch_size=args.eval_batch_size, shuffle=False)
    steps_per_epoch = len(train_loader)
    if args.max_steps_per_epoch:
        steps_per_epoch = min(steps_per_epoch, args.max_steps_per_epoch)

    model = Cnn().to(args.device)
    opt = optimizers.NpuFusedAdam(model.parameters(), lr=args.lr)
    model, opt = amp.initialize(model, opt, opt_level=args.opt_level)
    print(f"=> cnn on {args.device}, amp opt_level {args.opt_level}, {type(opt).__name__} lr {args.lr}, "
          f"batch {args.batch_size}; {len(train_set)} train / {len(test_set)} test images; "
          f"{args.epochs} epoch(s) of {steps_per_epoch} steps")

    recording = npuscope.profile(db=args.db) if args.db else contextlib.nullcontext()
    accuracies = []
    train_steps = eval_steps = 0
    t0 = time.perf_counter()
    with recording as prof:
        for epoch in range(1, args.epochs + 1):
            model.train()
            e0 = time.perf_counter()
            loss_sum = 0.0
            seen = 0
            for step, (x, y) in enumerate(train_loader):
                if step >= steps_per_epoch:
                    break
                x, y = x.to(args.device), y.to(args.device)
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad()
                with amp.scale_loss(loss, opt) as scaled_loss:
                    scaled_loss.backward()
                opt.step()  # amp skips it (and lowers the loss scale) when the gradients overflowed
                if prof is not None:
                    prof.step(loss)
                train_steps += 1
                loss_sum += float(loss) * y.shape[0]
                seen += y.shape[0]
            train_seconds = time.perf_counter() - e0

            v0 = time.perf_counter()
            if prof is not None:
                with npuscope.record_function(f"evaluate epoch {epoch}"):
                    acc, test_loss = evaluate(model, test_loader, args.device)
                prof.step()  # the evaluation is a step of its own (no loss)
                eval_steps += 1
            else:
                acc, test_loss = evaluate(model, test_loader, args.device)
            eval_seconds = time.perf_counter() - v0
            accuracies.append(acc)
            print(f"epoch {epoch}/{args.epochs}  train loss {loss_sum / max(seen, 1):.4f}  "
                  f"test loss {test_loss:.4f}  test accuracy {acc:.4f}  "
                  f"loss scale {amp.loss_scale():g}  "
                  f"({train_seconds:.1f} s train, {seen / train_seconds:.0f} images/s; {eval_seconds:.1f} s test)")
        run_id = prof.run_id if prof is not None else None
    seconds = time.perf_counter() - t0

    print()
    print("=== fashion-mnist summary ===")
    print("per-epoch test accuracy " + " ".join(f"{a:.4f}" for a in accuracies))
    print(f"time                    {seconds:.1f} s ({train_steps} training steps)")
    if run_id is not None:
        print(f"recorded                run {run_id} in {args.db}: {train_steps} training steps + "
              f"{eval_steps} evaluation step(s)")
    print(f"test accuracy {accuracies[-1]:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
