"""NVIDIA apex's README usage, on npuscope's npu: amp.initialize + amp.scale_loss.

    PYTHONPATH=build/python /usr/bin/python3 examples/apex_amp.py --opt-level O2

A small MLP learns a fixed random regression target; the loss falls and the loss scale is
printed. With an apex install, `from apex import amp` would be the only change.
"""
import argparse

import torch

import npuscope  # noqa: F401  (the npu device)
from npuscope import amp


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opt-level", default="O1", choices=["O0", "O1", "O2", "O3"])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--db", default="", help="record the run into this trace file")
    args = parser.parse_args()

    torch.manual_seed(0)
    N, D_in, H, D_out = 64, 256, 128, 16
    x = torch.randn(N, D_in, device="npu")
    y = torch.randn(N, D_out, device="npu")

    model = torch.nn.Sequential(torch.nn.Linear(D_in, H), torch.nn.ReLU(), torch.nn.Linear(H, D_out)).npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    # Declare model and optimizer as usual, with default (FP32) precision, then let amp cast
    # and rewire them. Use the optimizer it returns (under O2 the fused twin with fp32 masters).
    model, optimizer = amp.initialize(model, optimizer, opt_level=args.opt_level)

    recording = npuscope.profile(db=args.db) if args.db else None
    if recording:
        recording.start()
    first = None
    for step in range(args.steps):
        y_pred = model(x)
        loss = torch.nn.functional.mse_loss(y_pred, y)
        optimizer.zero_grad()
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()
        first = float(loss) if first is None else first
    if recording:
        recording.stop()
        print(f"recorded run {recording.run_id} in {args.db}")
    print(f"opt level {args.opt_level}: weights {model[0].weight.dtype}, optimizer {type(optimizer).__name__}")
    print(f"loss {first:.4f} -> {float(loss):.4f} after {args.steps} steps, loss scale {amp.loss_scale():g}")


if __name__ == "__main__":
    main()
