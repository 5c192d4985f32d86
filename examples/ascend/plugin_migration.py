#!/usr/bin/env python3
"""The migration idioms of Ascend's plugin-adaptation overview (《适配方案简介》, manual migration
and mixed precision; seed document 003), put together in one small training script as a user
porting a CUDA script writes them. The idioms are the document's; the model and data around them
are this example's (the document shows fragments: `if torch.__version__ > 1.5:` and
`GradScaler(anabled_use_amp)` there are not runnable as printed, so they read
`import torch_npu` and `GradScaler(enabled=use_amp)` here).

    python3 examples/ascend/plugin_migration.py [--world-size 1] [--epochs 2]
"""
import argparse
import socket

import torch
import torch_npu  # noqa: F401  (1. 导入NPU相关库)
import torch.distributed as dist
from apex import amp


def make_model(in_size, out_size, num_layers):
    layers = []
    for _ in range(num_layers - 1):
        layers += [torch.nn.Linear(in_size, in_size), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(in_size, out_size))
    return torch.nn.Sequential(*layers)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    args = p.parse_args()
    rank = 0

    # 2. 指定device类型为npu
    device = torch.device("npu:0")
    torch.npu.set_device(device)

    # 4. 分布式代码迁移: nccl -> hccl (one rank here)
    dist.init_process_group(backend="hccl", init_method=f"tcp://127.0.0.1:{free_port()}", world_size=1, rank=rank)

    in_size, out_size, num_layers, batch = 64, 8, 3, 32
    torch.manual_seed(0)
    data = [torch.randn(batch, in_size).to("npu:0") for _ in range(4)]
    targets = [torch.randn(batch, out_size).to("npu:0") for _ in range(4)]
    loss_fn = torch.nn.MSELoss()

    # 3. mixed precision, 方式一: torch.cuda.amp written for the npu (torch.npu.amp, torch.autocast("npu"))
    use_amp = True
    net = make_model(in_size, out_size, num_layers).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.001)
    scaler = torch.npu.amp.GradScaler(enabled=use_amp)
    for epoch in range(args.epochs):
        for input, target in zip(data, targets):
            with torch.autocast(device_type="npu", dtype=torch.float16, enabled=use_amp):
                output = net(input)
                loss = loss_fn(output, target)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
        torch.npu.synchronize()
        print(f"torch.npu.amp epoch {epoch} loss {loss.item():.4f} output {output.dtype}")

    # 方式二: apex.amp
    model = torch.nn.Linear(in_size, out_size).npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
    for epoch in range(args.epochs):
        for input, target in zip(data, targets):
            loss = loss_fn(model(input).float(), target)
            optimizer.zero_grad()
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            optimizer.step()
        print(f"apex O1 epoch {epoch} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
