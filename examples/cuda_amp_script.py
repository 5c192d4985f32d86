"""An unmodified CUDA training script: torch.cuda.amp (the snippet of the plugin-adaptation
guide), nothing npuscope-specific. Run it on the npu with

    build/cli/npuscope run --transfer-to-npu -- examples/cuda_amp_script.py

(or add `import npuscope.transfer_to_npu` at its top, as with torch_npu's transfer_to_npu).
"""
import torch


def make_model(in_size, out_size, num_layers):
    layers = []
    for _ in range(num_layers - 1):
        layers += [torch.nn.Linear(in_size, in_size), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(in_size, out_size))
    return torch.nn.Sequential(*layers).cuda()


def main():
    if not torch.cuda.is_available():
        raise SystemExit("this script needs a CUDA device")
    torch.manual_seed(0)
    batch_size, in_size, out_size, num_layers, epochs = 64, 512, 16, 3, 3
    data = [torch.randn(batch_size, in_size, device="cuda") for _ in range(8)]
    targets = [torch.randn(batch_size, out_size, device="cuda") for _ in range(8)]
    loss_fn = torch.nn.MSELoss().cuda()

    use_amp = True
    net = make_model(in_size, out_size, num_layers)
    opt = torch.optim.SGD(net.parameters(), lr=0.001)
    scaler = torch.cuda.amp.GradScaler(enabled=use_amp)

    for epoch in range(epochs):
        for input, target in zip(data, targets):
            with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=use_amp):
                output = net(input)
                loss = loss_fn(output, target)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
        print(f"epoch {epoch} loss {loss.item():.4f} output dtype {output.dtype} scale {scaler.get_scale():g}")
    torch.cuda.synchronize()
    print(f"device {input.device}, {torch.cuda.memory_allocated()} bytes allocated, "
          f"peak {torch.cuda.max_memory_allocated()}")


if __name__ == "__main__":
    main()
