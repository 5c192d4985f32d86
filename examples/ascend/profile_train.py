#!/usr/bin/env python3
"""A training script as torch_npu 2.x users write it for a card: apex amp O2 with an
apex.optimizers optimizer, torch.npu.amp for evaluation, and torch_npu.profiler with a schedule
and tensorboard_trace_handler. It runs unchanged on npuscope (and on a card):

    python3 examples/ascend/profile_train.py --steps 6 --out ./result

It leaves ./result/{worker}_{timestamp}_ascend_pt/ (the 3 active steps 2-4), which MindStudio
Insight opens and `npuscope import` reads back; ./result/npuscope.db is npuscope's own
recording of the same steps (`npuscope report`, the GUI).
"""
import argparse

import torch
import torch_npu
from apex import amp
from apex.optimizers import NpuFusedAdam


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1))
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--out", default="./result")
    args = p.parse_args()

    torch.npu.set_device("npu:0")
    device = torch.device("npu:0")
    torch.manual_seed(0)
    model = Net().to(device)
    optimizer = NpuFusedAdam(model.parameters(), lr=1e-3)
    model, optimizer = amp.initialize(model, optimizer, opt_level="O2", loss_scale="dynamic", combine_grad=True)
    criterion = torch.nn.CrossEntropyLoss().to(device)

    experimental_config = torch_npu.profiler._ExperimentalConfig(
        export_type=torch_npu.profiler.ExportType.Text,
        profiler_level=torch_npu.profiler.ProfilerLevel.Level0,
        aic_metrics=torch_npu.profiler.AiCMetrics.AiCoreNone,
        data_simplification=False)
    with torch_npu.profiler.profile(
            activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
            schedule=torch_npu.profiler.schedule(wait=1, warmup=1, active=3, repeat=1, skip_first=0),
            on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(args.out),
            record_shapes=True, profile_memory=True, with_stack=False,
            experimental_config=experimental_config) as prof:
        for step in range(args.steps):
            images = torch.randn(args.batch_size, 3, 32, 32).to(device, non_blocking=True)
            target = torch.randint(0, 10, (args.batch_size,)).to(device, non_blocking=True)
            output = model(images)
            loss = criterion(output, target)
            optimizer.zero_grad()
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            optimizer.step()
            prof.step()
            print(f"step {step}: loss {loss.item():.4f}")

    model.eval()
    with torch.no_grad(), torch.npu.amp.autocast():
        images = torch.randn(args.batch_size, 3, 32, 32).npu()
        print("eval logits dtype under torch.npu.amp.autocast:", model(images).dtype)
    torch.npu.synchronize()


if __name__ == "__main__":
    main()
