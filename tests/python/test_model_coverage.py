"""Real architectures on the emulated npu: torchvision's classification families, a
torch.nn.TransformerEncoder, an LSTM and a GRU classifier.

Every architecture gets both checks below (14 architectures, 42 cases):

* ``test_fp32_matches_cpu[<arch>]``: the same weights (a deepcopy) in eval mode, on the CPU and on
  the npu, in fp32. The CPU is the independent expectation: the logits and the gradients of every
  parameter (of the summed cross entropy) must agree to a relative error of 1e-4, measured as
  max|npu - cpu| / max(max|cpu|, 1e-6) per tensor. BatchNorm's running statistics are set to
  non-trivial values first, so eval-mode BatchNorm is not the identity.
* ``test_amp_training_step[<arch>-O1|O2]``: apex's usage at O1 and at O2 (``from apex import amp``,
  a fused optimizer from ``apex.optimizers``: NpuFusedSGD for the CNNs, NpuFusedAdamW for the
  attention and recurrent models), in train mode (dropout, stochastic depth and batch statistics
  on). The loss is finite, the model's parameters have the level's dtype, one step changes
  parameters and leaves every parameter (and, at O2, every fp32 master weight) finite. The dynamic
  loss scale starts at 128 (Ascend apex's ``dynamic_init_scale``); a step amp skips on a gradient
  overflow halves it and the next attempt runs, up to ``MAX_ATTEMPTS`` attempts.

Sizes are kept small so that the whole file runs in well under a minute on two cores: batch 2,
10 classes, 3x64x64 images for the CNNs (at 32x32 the last BatchNorms of ResNet/MobileNet/
EfficientNet/RegNet see 1x1 maps, i.e. two values per channel, and their gradients reach 1e9-1e13
in fp32 already) and 3x32x32 for ConvNeXt, Swin and ViT. The standard torchvision builders are used
for resnet18, mobilenet_v2, mobilenet_v3_small, efficientnet_b0, shufflenet_v2_x0_5,
regnet_x_400mf and googlenet (aux_logits=False, init_weights=True); DenseNet, ConvNeXt, Swin and
ViT are the torchvision classes in small configurations (DenseNet: growth 8, blocks (2, 2, 2, 2);
ConvNeXt: three one-block stages of 16/32/64 channels; Swin: embed 16, depths (2, 2), window 4 so
the second block of the first stage runs shifted windows with the attention mask; ViT: image 32,
patch 8, 2 layers, hidden 64, MLP 128, 4 heads, the head drawn from N(0, 0.02) instead of
torchvision's zeros, so that gradients reach the encoder).
"""
import copy

import pytest
import torch
import torchvision
from torchvision.models.convnext import CNBlockConfig, ConvNeXt
from torchvision.models.swin_transformer import SwinTransformer
from torchvision.models.vision_transformer import VisionTransformer

import npuscope
from apex import amp
from apex.optimizers import NpuFusedAdamW, NpuFusedSGD
from npuscope import _C

NPU = "npu:0"
CLASSES = 10
BATCH = 2
VOCAB, SEQ, FEATURES, WIDTH = 50, 12, 8, 32
RTOL = 1e-4
MAX_ATTEMPTS = 6
M = torchvision.models


@pytest.fixture(autouse=True)
def fresh_amp():
    """One amp state per process, as in apex: each case starts and ends without one."""
    _C.amp.reset()
    yield
    _C.amp.reset()


# ---- the architectures -------------------------------------------------------------------------

class TransformerClassifier(torch.nn.Module):
    """Token embedding, a causal (masked) batch_first TransformerEncoder, mean pooling, a linear head."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        layer = torch.nn.TransformerEncoderLayer(WIDTH, nhead=4, dim_feedforward=64, dropout=0.1, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2)
        self.head = torch.nn.Linear(WIDTH, CLASSES)

    def forward(self, tokens):
        n = tokens.shape[1]
        mask = torch.triu(torch.full((n, n), float("-inf"), device=tokens.device), diagonal=1)
        return self.head(self.encoder(self.embed(tokens), mask=mask).mean(dim=1))


class RecurrentClassifier(torch.nn.Module):
    """Embedding (LSTM) or linear (GRU) input, a two-layer batch_first recurrent net, a linear head
    on the last time step."""

    def __init__(self, kind):
        super().__init__()
        self.inp = torch.nn.Embedding(VOCAB, WIDTH) if kind == "lstm" else torch.nn.Linear(FEATURES, WIDTH)
        rnn = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
        self.rnn = rnn(WIDTH, WIDTH, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(WIDTH, CLASSES)

    def forward(self, x):
        out, _ = self.rnn(self.inp(x))
        return self.head(out[:, -1])


def tiny_vit():
    model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128,
                              num_classes=CLASSES)
    # torchvision zero-initializes the head, which would leave the encoder without gradients
    torch.nn.init.normal_(model.heads.head.weight, std=0.02)
    return model


def images(size):
    return lambda: torch.randn(BATCH, 3, size, size)


def tokens():
    return torch.randint(0, VOCAB, (BATCH, SEQ))


def sequences():
    return torch.randn(BATCH, SEQ, FEATURES)


# id -> (builder, input maker, fused optimizer class)
ARCHS = {
    "resnet18": (lambda: M.resnet18(num_classes=CLASSES), images(64), NpuFusedSGD),
    "mobilenet_v2": (lambda: M.mobilenet_v2(num_classes=CLASSES), images(64), NpuFusedSGD),
    "mobilenet_v3_small": (lambda: M.mobilenet_v3_small(num_classes=CLASSES), images(64), NpuFusedSGD),
    "efficientnet_b0": (lambda: M.efficientnet_b0(num_classes=CLASSES), images(64), NpuFusedSGD),
    "densenet_small": (lambda: M.DenseNet(growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16,
                                          bn_size=2, num_classes=CLASSES), images(64), NpuFusedSGD),
    "shufflenet_v2_x0_5": (lambda: M.shufflenet_v2_x0_5(num_classes=CLASSES), images(64), NpuFusedSGD),
    "regnet_x_400mf": (lambda: M.regnet_x_400mf(num_classes=CLASSES), images(64), NpuFusedSGD),
    "googlenet": (lambda: M.googlenet(num_classes=CLASSES, aux_logits=False, init_weights=True), images(64),
                  NpuFusedSGD),
    "convnext_small_cfg": (lambda: ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, 64, 1),
                                             CNBlockConfig(64, None, 1)], stochastic_depth_prob=0.1,
                                            num_classes=CLASSES), images(32), NpuFusedAdamW),
    "swin_small_cfg": (lambda: SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                                               window_size=[4, 4], stochastic_depth_prob=0.1,
                                               num_classes=CLASSES), images(32), NpuFusedAdamW),
    "vit_tiny": (tiny_vit, images(32), NpuFusedAdamW),
    "transformer_encoder": (TransformerClassifier, tokens, NpuFusedAdamW),
    "lstm": (lambda: RecurrentClassifier("lstm"), tokens, NpuFusedAdamW),
    "gru": (lambda: RecurrentClassifier("gru"), sequences, NpuFusedAdamW),
}


def make(arch):
    """The model (CPU, fp32, seeded weights), one input batch and its targets."""
    build, data, _ = ARCHS[arch]
    torch.manual_seed(0)
    model = build()
    x = data()
    y = torch.arange(BATCH) % CLASSES
    return model, x, y


def relative_error(got, expected):
    return (got - expected).abs().max().item() / max(expected.abs().max().item(), 1e-6)


def randomize_norm_statistics(model):
    """Non-trivial running statistics, so eval-mode BatchNorm actually normalizes."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats:
                m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))


# ---- fp32: the npu against the CPU -----------------------------------------------------------

@pytest.mark.parametrize("arch", list(ARCHS))
def test_fp32_matches_cpu(arch):
    cpu, x, y = make(arch)
    randomize_norm_statistics(cpu)
    cpu.eval()
    npu = copy.deepcopy(cpu).to(NPU)

    expected = cpu(x)
    torch.nn.functional.cross_entropy(expected, y, reduction="sum").backward()
    got = npu(x.to(NPU))
    assert str(got.device) == "privateuseone:0" and got.dtype == torch.float32
    torch.nn.functional.cross_entropy(got, y.to(NPU), reduction="sum").backward()

    err = relative_error(got.detach().cpu(), expected.detach())
    assert err <= RTOL, f"{arch}: fp32 logits differ from the CPU's by a relative {err:.3e}"
    worst = (0.0, None)
    for (name, p), q in zip(npu.named_parameters(), cpu.parameters()):
        assert (p.grad is None) == (q.grad is None), f"{arch}: {name} has a gradient on one device only"
        if q.grad is not None:
            worst = max(worst, (relative_error(p.grad.cpu(), q.grad), name), key=lambda t: t[0])
    assert worst[0] <= RTOL, f"{arch}: fp32 gradient of {worst[1]} differs from the CPU's by a relative {worst[0]:.3e}"


# ---- apex amp O1 / O2 with a fused optimizer -------------------------------------------------

@pytest.mark.parametrize("level", ["O1", "O2"])
@pytest.mark.parametrize("arch", list(ARCHS))
def test_amp_training_step(arch, level):
    model, x, y = make(arch)
    model = model.to(NPU).train()
    fused = ARCHS[arch][2]
    opt = fused(model.parameters(), lr=0.01, momentum=0.9) if fused is NpuFusedSGD else fused(model.parameters(),
                                                                                                lr=1e-3)
    model, opt = amp.initialize(model, opt, opt_level=level, dynamic_init_scale=128.0, verbosity=0)
    for module in model.modules():  # O1: fp32 weights; O2: fp16 weights but fp32 affine BatchNorm
        bn = isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and module.affine
        weights = torch.float32 if level == "O1" or bn else torch.float16
        for name, p in module.named_parameters(recurse=False):
            assert p.dtype == weights, f"{arch} {level}: {type(module).__name__}.{name} is {p.dtype}, not {weights}"

    x, y = x.to(NPU), y.to(NPU)
    before = [p.detach().clone() for p in model.parameters()]
    losses, scales = [], []
    for _ in range(MAX_ATTEMPTS):
        out = model(x)
        assert out.dtype == torch.float32  # amp casts the model's outputs back to fp32
        loss = torch.nn.functional.cross_entropy(out, y)
        losses.append(loss.item())
        assert torch.isfinite(loss), f"{arch} {level}: non-finite loss {losses}"
        opt.zero_grad()
        with amp.scale_loss(loss, opt) as scaled:
            scaled.backward()
        scales.append(amp.loss_scale())
        opt.step()
        changed = sum(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
        if changed:
            break
    assert changed, f"{arch} {level}: every step was skipped (losses {losses}, loss scales {scales})"
    assert changed >= len(before) // 2, f"{arch} {level}: the step changed only {changed}/{len(before)} parameters"
    for name, p in model.named_parameters():
        assert torch.isfinite(p).all(), f"{arch} {level}: {name} is not finite after the step"
    if level == "O2":
        masters = list(amp.master_params(opt))
        assert masters and all(m.dtype == torch.float32 and torch.isfinite(m).all() for m in masters)
