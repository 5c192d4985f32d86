"""apex semantics of npuscope.amp, checked against independent expectations (the preset table of
references.md, a CPU run, bit-identity of a skipped step, an uninterrupted run)."""
import copy

import pytest
import torch

import npuscope
from npuscope import amp, optimizers


def make_model(bn=True):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(8, 16)]
    if bn:
        layers.append(torch.nn.BatchNorm1d(16))
    layers += [torch.nn.ReLU(), torch.nn.Linear(16, 4)]
    return torch.nn.Sequential(*layers)


def data(n=32, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, generator=g), torch.randn(n, 4, generator=g)


@pytest.mark.parametrize("level,cast,patch,keep_bn,masters,scale", [
    ("O0", "Float", False, False, False, 1.0),
    ("O1", None, True, False, False, "dynamic"),
    ("O2", "Half", False, True, True, "dynamic"),
    ("O3", "Half", False, False, False, 1.0),
])
def test_presets(level, cast, patch, keep_bn, masters, scale):
    model = make_model().npu()
    opt = optimizers.NpuFusedSGD(model.parameters(), lr=0.1)
    amp.initialize(model, opt, opt_level=level, verbosity=0)
    p = amp.properties()
    assert (p["cast_model_type"], p["patch_torch_functions"], p["master_weights"], p["loss_scale"]) == \
        (cast, patch, masters, scale)
    if cast == "Half":
        assert p["keep_batchnorm_fp32"] == keep_bn


def test_overrides_and_contradictions():
    model = make_model().npu()
    opt = optimizers.NpuFusedAdam(model.parameters())
    model, opt = amp.initialize(model, opt, opt_level="O2", loss_scale=128.0, keep_batchnorm_fp32=False, verbosity=0)
    assert amp.properties()["loss_scale"] == 128.0
    assert model[1].weight.dtype == torch.float16  # BatchNorm cast too
    with pytest.raises(ValueError, match="amp.initialize"):
        amp.initialize(make_model().npu(), optimizers.NpuFusedAdam(make_model().npu().parameters()),
                       opt_level="O1", master_weights=True)  # apex refuses master weights without a cast model
    with pytest.raises(ValueError, match="opt_level"):
        amp.initialize(make_model().npu(), opt_level="O4")


def test_o2_casts_the_model_keeps_batchnorm_and_returns_the_shapes_given():
    model = make_model().npu()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    [m], [opt] = amp.initialize([model], [sgd], opt_level="O2", verbosity=0)
    assert m is model
    assert model[0].weight.dtype == torch.float16 and model[3].weight.dtype == torch.float16
    assert model[1].weight.dtype == torch.float32 and model[1].running_mean.dtype == torch.float32
    assert isinstance(opt, optimizers.NpuFusedSGD)  # master weights: the fused twin steps fp32 masters
    masters = list(amp.master_params(opt))
    assert all(p.dtype == torch.float32 for p in masters) and len(masters) == len(list(model.parameters()))
    out = model(torch.randn(4, 8, device="npu"))     # fp32 input cast in, fp32 output out
    assert out.dtype == torch.float32


def test_o1_runs_linear_in_fp16_inside_forward_only():
    model = make_model(bn=False).npu()
    seen = []
    model[0].register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level="O1", verbosity=0)
    out = model(torch.randn(4, 8, device="npu"))
    assert seen == [torch.float16] and out.dtype == torch.float32
    assert model[0].weight.dtype == torch.float32
    assert (torch.randn(2, 2, device="npu") @ torch.randn(2, 2, device="npu")).dtype == torch.float32


def train(model, opt, x, y, steps, level, **kw):
    losses = []
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        with amp.scale_loss(loss, opt) as scaled:
            scaled.backward()
        opt.step()
        losses.append(float(loss))
    return losses


def test_o0_on_the_npu_matches_the_cpu():
    x, y = data()
    cpu = make_model(bn=False)
    npu_model = copy.deepcopy(cpu).npu()
    ref_opt = torch.optim.SGD(cpu.parameters(), lr=0.05, momentum=0.9)
    for _ in range(20):
        loss = torch.nn.functional.mse_loss(cpu(x), y)
        ref_opt.zero_grad()
        loss.backward()
        ref_opt.step()
    opt = torch.optim.SGD(npu_model.parameters(), lr=0.05, momentum=0.9)
    npu_model, opt = amp.initialize(npu_model, opt, opt_level="O0", verbosity=0)
    train(npu_model, opt, x.npu(), y.npu(), 20, "O0")
    for a, b in zip(npu_model.parameters(), cpu.parameters()):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fused", [True, False])
def test_an_overflowing_step_is_skipped_bit_identically(fused):
    x, y = data()
    model = make_model(bn=False).npu()
    if fused:
        opt = optimizers.NpuFusedAdam(model.parameters(), lr=1e-2)
        level = "O2"
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        level = "O1"
    model, opt = amp.initialize(model, opt, opt_level=level, verbosity=0)
    x, y = x.npu(), y.npu()
    train(model, opt, x, y, 3, level)
    params = [p.detach().clone() for p in model.parameters()]
    masters = [p.detach().clone() for p in amp.master_params(opt)]
    state = copy.deepcopy(opt.state_dict()["state"])
    scale = amp.loss_scale()

    loss = torch.nn.functional.mse_loss(model(x), y) * float("inf")
    opt.zero_grad()
    with amp.scale_loss(loss, opt) as scaled:
        scaled.backward()
    opt.step()

    assert amp.loss_scale() == scale / 2
    for a, b in zip(model.parameters(), params):
        assert torch.equal(a, b)
    for a, b in zip(amp.master_params(opt), masters):
        assert torch.equal(a, b)
    after = opt.state_dict()["state"]
    for i, slots in state.items():
        for k, v in slots.items():
            assert torch.equal(torch.as_tensor(after[i][k]), torch.as_tensor(v)), (i, k)
    train(model, opt, x, y, 2, level)  # and training goes on
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_dynamic_scale_grows_after_the_window_and_state_dict_round_trips():
    x, y = data()
    model = make_model(bn=False).npu()
    opt = optimizers.NpuFusedSGD(model.parameters(), lr=0.05)
    model, opt = amp.initialize(model, opt, opt_level="O2", scale_window=3, dynamic_init_scale=1024.0,
                                scale_growth_factor=4.0, verbosity=0)
    train(model, opt, x.npu(), y.npu(), 7, "O2")
    assert amp.loss_scale() == 1024.0 * 4 * 4
    assert amp.state_dict() == {"loss_scaler0": {"loss_scale": 16384.0, "unskipped": 1}}
    amp.load_state_dict({"loss_scaler0": {"loss_scale": 8.0, "unskipped": 2}})
    assert amp.loss_scale() == 8.0
    train(model, opt, x.npu(), y.npu(), 1, "O2")
    assert amp.loss_scale() == 32.0


def run_resumable(total, stop_at, tmp_path):
    """Trains `total` steps under O2; when stop_at is set, saves model/optimizer/amp state there,
    rebuilds everything from scratch, loads and finishes. Returns the final parameters."""
    x, y = data()
    x, y = x.npu(), y.npu()
    model = make_model().npu()
    opt = optimizers.NpuFusedAdam(model.parameters(), lr=1e-2)
    model, opt = amp.initialize(model, opt, opt_level="O2", verbosity=0)
    train(model, opt, x, y, stop_at or total, "O2")
    if stop_at:
        ck = tmp_path / "ck.pt"
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "amp": amp.state_dict()}, ck)
        model = make_model().npu()
        opt = optimizers.NpuFusedAdam(model.parameters(), lr=1e-2)
        model, opt = amp.initialize(model, opt, opt_level="O2", verbosity=0)
        saved = torch.load(ck)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        amp.load_state_dict(saved["amp"])
        train(model, opt, x, y, total - stop_at, "O2")
    return [p.detach().cpu().clone() for p in model.parameters()]


def test_checkpoint_resume_is_exact(tmp_path):
    straight = run_resumable(12, None, tmp_path)
    resumed = run_resumable(12, 5, tmp_path)
    for a, b in zip(straight, resumed):
        assert torch.equal(a, b)


def test_scale_loss_needs_the_initialized_optimizer_and_an_exception_changes_nothing():
    model = make_model(bn=False).npu()
    opt = optimizers.NpuFusedSGD(model.parameters(), lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level="O2", verbosity=0)
    other = optimizers.NpuFusedSGD(make_model(bn=False).npu().parameters(), lr=0.1)
    loss = model(torch.randn(2, 8, device="npu")).sum()
    with pytest.raises(RuntimeError, match="amp.initialize"):
        with amp.scale_loss(loss, other):
            pass
    scale = amp.loss_scale()
    with pytest.raises(KeyError):
        with amp.scale_loss(loss, opt) as scaled:
            raise KeyError("user code failed")
    assert amp.loss_scale() == scale


def test_autocast_and_grad_scaler_follow_torch_amp():
    model = make_model(bn=False).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = amp.GradScaler(init_scale=256.0, growth_interval=2)
    x, y = data()
    x, y = x.npu(), y.npu()
    scales = []
    for i in range(5):
        with amp.autocast():
            out = model(x)
            assert out.dtype == torch.float16
            loss = torch.nn.functional.mse_loss(out, y)
            assert loss.dtype == torch.float32  # losses run in fp32
        if i == 2:
            loss = loss * float("inf")
        before = [p.detach().clone() for p in model.parameters()]
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        if i == 2:
            assert all(torch.equal(a, b) for a, b in zip(model.parameters(), before))
        scales.append(scaler.get_scale())
    # growth every 2 clean steps, halving on the overflow at step 2 (torch.amp's rule)
    assert scales == [256.0, 512.0, 256.0, 256.0, 512.0]
    sd = scaler.state_dict()
    assert sd["scale"] == 512.0 and sd["_growth_tracker"] == 0 and sd["growth_interval"] == 2
    again = amp.GradScaler()
    again.load_state_dict(sd)
    assert again.get_scale() == 512.0
    with pytest.raises(RuntimeError, match="unscale_"):
        scaler.scale(loss.detach().requires_grad_())
        scaler.unscale_(opt)
        scaler.unscale_(opt)


def test_grad_scaler_skips_parameters_without_gradients():
    model = make_model(bn=False).npu()
    frozen = torch.nn.Parameter(torch.zeros(3, device="npu"))  # never used: its grad stays None
    opt = torch.optim.SGD(list(model.parameters()) + [frozen], lr=0.05)
    scaler = amp.GradScaler(init_scale=64.0)
    x, y = data()
    before = model[0].weight.detach().clone()
    with amp.autocast():
        loss = torch.nn.functional.mse_loss(model(x.npu()), y.npu())
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert frozen.grad is None and not torch.equal(model[0].weight, before)


def test_lr_scheduler_made_after_initialize_drives_the_amp_optimizer():
    model = make_model(bn=False).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level="O1", verbosity=0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    x, y = data()
    train(model, opt, x.npu(), y.npu(), 1, "O1")
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05)


def test_a_refused_initialize_changes_nothing():
    model = make_model().npu()
    adagrad = torch.optim.Adagrad(model.parameters(), lr=0.1)  # no fused twin for O2's masters
    with pytest.raises(TypeError, match="Adagrad has no npuscope fused twin"):
        amp.initialize(model, adagrad, opt_level="O2", verbosity=0)
    assert model[0].weight.dtype == torch.float32
    assert "forward" not in model.__dict__  # not patched
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.optim.lr_scheduler.StepLR(sgd, step_size=1)
    with pytest.raises(RuntimeError, match="create the scheduler after amp.initialize"):
        amp.initialize(model, sgd, opt_level="O2", verbosity=0)
    fused = optimizers.NpuFusedAdam(model.parameters())
    with pytest.raises(ValueError, match="combine_grad"):
        amp.initialize(model, fused, opt_level="O2", combine_grad=False, verbosity=0)
    assert model[0].weight.dtype == torch.float32


def test_initialize_after_optimizer_state_is_refused_and_groups_are_fixed_after_it():
    x, y = data()
    model = make_model(bn=False).npu()
    opt = optimizers.NpuFusedAdam(model.parameters(), lr=1e-2)
    for _ in range(2):
        loss = torch.nn.functional.mse_loss(model(x.npu()), y.npu())
        opt.zero_grad()
        loss.backward()
        opt.step()
    with pytest.raises(RuntimeError, match="initialize amp first, then load checkpoints"):
        amp.initialize(model, opt, opt_level="O2", verbosity=0)
    model = make_model(bn=False).npu()
    opt = optimizers.NpuFusedAdam(model.parameters(), lr=1e-2)
    model, opt = amp.initialize(model, opt, opt_level="O2", verbosity=0)
    with pytest.raises(RuntimeError, match="before amp.initialize"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(2, device="npu"))]})


@pytest.mark.parametrize("level,fused", [("O2", True), ("O1", False)])
def test_a_failed_second_loss_block_leaves_the_first_blocks_gradients(level, fused):
    # apex's several scale_loss blocks per step: the gradients add up. A block that raises drops
    # its own contribution and keeps what the earlier block left: the step equals a step with
    # the first block alone.
    def run(fail_second):
        x, y = data()
        x, y = x.npu(), y.npu()
        model = make_model(bn=False).npu()
        opt = optimizers.NpuFusedSGD(model.parameters(), lr=0.1) if fused else \
            torch.optim.SGD(model.parameters(), lr=0.1)
        model, opt = amp.initialize(model, opt, opt_level=level, verbosity=0)
        opt.zero_grad()
        with amp.scale_loss(torch.nn.functional.mse_loss(model(x), y), opt) as scaled:
            scaled.backward()
        if fail_second:
            with pytest.raises(ZeroDivisionError):
                with amp.scale_loss(model(x).square().mean(), opt) as scaled:
                    scaled.backward()
                    1 / 0
        opt.step()
        return [p.detach().cpu().clone() for p in model.parameters()]
    for a, b in zip(run(False), run(True)):
        assert torch.equal(a, b)
