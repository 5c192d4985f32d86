"""Scripts written for Ascend run unchanged: `import torch_npu`, `import torch.npu`, `from apex
import amp`, apex's optimizers and parallel helpers, torch.npu's API; a real torch_npu or apex is
never shadowed; Ascend's published online-inference sample runs verbatim."""
import json
import os
import socket
import textwrap

import pytest

from conftest import ROOT, query, run_python


def py(code, cwd, env=None):
    r = run_python(["-c", textwrap.dedent(code)], cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr
    return r


def test_import_torch_npu_in_a_fresh_interpreter(tmp_path):
    r = py("""
        import sys, torch
        import torch.npu                       # Ascend's own torch builds had it; nothing imported before
        import torch_npu
        assert torch.npu is torch_npu.npu is sys.modules["torch.npu"]
        assert "npuscope" in torch_npu.__version__
        torch.npu.set_device("npu:0")
        x = torch.ones(2, 3).npu() * 2
        torch.npu.synchronize()
        print(torch.npu.is_available(), torch.npu.current_device(), float(x.sum().cpu()))
        """, tmp_path)
    assert r.stdout.split() == ["True", "0", "12.0"]


def test_torch_npu_api_scripts_call(tmp_path):
    r = py("""
        import torch, torch_npu
        torch.npu.manual_seed(7); a = torch.rand(3, device="npu")
        state = torch.npu.get_rng_state(); b = torch.rand(3, device="npu")
        torch.npu.set_rng_state(state); c = torch.rand(3, device="npu")
        torch.npu.manual_seed_all(7); d = torch.rand(3, device="npu")
        assert torch.equal(b.cpu(), c.cpu()) and torch.equal(a.cpu(), d.cpu())
        s = torch.npu.current_stream()
        assert s == torch.npu.default_stream() == torch.npu.Stream() and s.query()
        with torch.npu.stream(torch.npu.Stream()):
            pass
        start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
        start.record(); torch.ones(64, 64, device="npu").sum(); end.record(); end.synchronize()
        assert start.elapsed_time(end) >= 0
        torch.npu.set_compile_mode(jit_compile=False)
        torch.npu.set_option({"ACL_PRECISION_MODE": "allow_fp32_to_fp16"})
        torch.npu.config.allow_internal_format = False
        assert torch.npu.get_options() == {"jit_compile": False, "ACL_PRECISION_MODE": "allow_fp32_to_fp16",
                                           "allow_internal_format": False}
        from torch_npu.optim import NpuFusedAdamW
        from torch_npu.npu import amp
        assert amp.autocast is torch.npu.amp.autocast
        print("ok")
        """, tmp_path)
    assert r.stdout.strip() == "ok"


def test_set_option_is_kept_with_the_recording(tmp_path):
    py("""
        import torch, torch_npu, npuscope
        torch.npu.set_option({"ACL_OP_COMPILER_CACHE_MODE": "enable"})
        with npuscope.profile(db="run.db"):
            torch.ones(4, device="npu").add_(1)
        """, tmp_path)
    (results,) = query(str(tmp_path / "run.db"), "SELECT results_json FROM runs")[0]
    assert json.loads(results)["npu_options"] == {"ACL_OP_COMPILER_CACHE_MODE": "enable"}


def test_npu_amp_grad_scaler_static_and_dynamic(tmp_path):
    r = py("""
        import torch, torch_npu
        for dynamic in (False, True):
            model = torch.nn.Linear(4, 1).npu()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.npu.amp.GradScaler(init_scale=2.**10, dynamic=dynamic)
            with torch.npu.amp.autocast():
                y = model(torch.ones(2, 4, device="npu"))
            assert y.dtype == torch.float16
            scaler.scale(y.float().sum() * float("inf")).backward()   # an overflowing step
            before = model.weight.detach().cpu().clone()
            scaler.step(opt); scaler.update()
            assert torch.equal(model.weight.detach().cpu(), before)  # skipped
            print(dynamic, scaler.get_scale())
        """, tmp_path)
    assert r.stdout.split() == ["False", "1024.0", "True", "512.0"]


def test_apex_names_map_onto_npuscope(tmp_path):
    r = py("""
        import torch
        import apex
        from apex import amp
        import apex.amp, npuscope
        assert amp is npuscope.amp is apex.amp
        from apex.optimizers import FusedAdam, FusedSGD, FusedLAMB, NpuFusedAdam
        params = [torch.nn.Parameter(torch.zeros(3, device="npu"))]
        names = [type(FusedAdam(params)).__name__, type(FusedAdam(params, adam_w_mode=False)).__name__,
                 type(FusedSGD(params, lr=0.1, momentum=0.9)).__name__, type(FusedLAMB(params)).__name__]
        assert FusedLAMB(params).param_groups[0]["variant"] == 1
        try:
            FusedSGD(params, lr=0.1, wd_after_momentum=True)
            raise SystemExit("wd_after_momentum accepted")
        except ValueError as e:
            assert "wd_after_momentum" in str(e)
        try:
            apex.optimizers.FusedNovoGrad
            raise SystemExit("FusedNovoGrad found")
        except AttributeError as e:
            assert "FusedNovoGrad" in str(e)
        from apex.parallel import SyncBatchNorm, convert_syncbn_model, DistributedDataParallel
        m = convert_syncbn_model(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4)))
        assert isinstance(m[1], SyncBatchNorm)
        print(" ".join(names))
        """, tmp_path)
    assert r.stdout.split() == ["NpuFusedAdamW", "NpuFusedAdam", "NpuFusedSGD", "NpuFusedLamb"]


def test_transfer_to_npu_maps_nccl_to_hccl(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = py(f"""
        import torch, torch_npu
        from torch_npu.contrib import transfer_to_npu
        import torch.distributed as dist
        dist.init_process_group(backend="nccl", init_method="tcp://127.0.0.1:{port}", world_size=1, rank=0)
        t = torch.ones(3).cuda()
        dist.all_reduce(t)
        print(dist.get_backend(), str(t.device), float(t.sum().cpu()))
        dist.destroy_process_group()
        """, tmp_path)
    assert r.stdout.split() == ["hccl", "privateuseone:0", "3.0"]


@pytest.mark.parametrize("package", ["torch_npu", "apex"])
def test_a_real_package_is_never_shadowed(tmp_path, package):
    real = tmp_path / "site" / package
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("REAL = True\n")
    env = {"PYTHONPATH": os.environ["PYTHONPATH"] + os.pathsep + str(tmp_path / "site")}
    r = py(f"import {package}; assert {package}.REAL; print('real')", tmp_path, env=env)
    assert r.stdout.strip() == "real"
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"a real {package} is installed" in lines[0] and str(real.parent) in lines[0]


def _image_folder(root):
    """ImageFolder layout the sample reads: root/val/<class>/<image>; 6 small images, 2 classes."""
    from PIL import Image
    for c, shade in (("cat", 40), ("dog", 200)):
        os.makedirs(root / "val" / c)
        for i in range(3):
            Image.new("RGB", (40 + 8 * i, 32), (shade, 255 - shade, 10 * i)).save(root / "val" / c / f"{i}.png")


def test_ascends_online_inference_sample_runs_verbatim(tmp_path, cli):
    script = os.path.join(ROOT, "examples", "ascend", "resnet50_infer_for_pytorch.py")
    with open(script, encoding="utf-8") as f:
        text = f.read()
    assert "import torch.npu\nfrom apex import amp\n" in text and "torch_npu" not in text  # as published
    _image_folder(tmp_path)
    args = ["--data", str(tmp_path), "-b", "3", "-j", "0"]
    plain = run_python([script] + args, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert "use  npu:0" in plain.stdout and " * Acc@1 " in plain.stdout and "Test: [1/2]" in plain.stdout

    import subprocess
    run = subprocess.run([cli, "run", "--db", "seed.db", "--", script] + args, cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert " * Acc@1 " in run.stdout
    (status, results), = query(str(tmp_path / "seed.db"), "SELECT status, results_json FROM runs")
    assert status == "completed" and json.loads(results)["opt_level"] == "O2"


def test_the_plugin_overviews_migration_idioms_train(tmp_path):
    """examples/ascend/plugin_migration.py: torch.device("npu:0"), torch.npu.set_device, .to("npu:0"),
    hccl, torch.autocast(device_type="npu") with torch.npu.amp.GradScaler, then apex O1."""
    r = run_python([os.path.join(ROOT, "examples", "ascend", "plugin_migration.py"), "--epochs", "2"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line.split(" loss ")[0] for line in lines] == ["torch.npu.amp epoch 0", "torch.npu.amp epoch 1",
                                                           "apex O1 epoch 0", "apex O1 epoch 1"], r.stdout
    assert all(line.endswith("output torch.float16") for line in lines[:2])  # autocast("npu") ran in fp16
    losses = [float(line.split(" loss ")[1].split()[0]) for line in lines]
    assert losses[1] < losses[0] and losses[3] < losses[2]  # both ways train


def test_torch_device_spells_npu_after_import_torch_npu(tmp_path):
    r = py("""
        import pickle, torch, torch_npu
        d = torch.device("npu", 0)
        assert isinstance(d, torch.device) and d == torch.device("npu:0") == torch.device("privateuseone:0")
        assert torch.device("cpu").type == "cpu" and torch.device("cuda", 1).index == 1
        assert pickle.loads(pickle.dumps(d)) == d
        print(torch.zeros(2, device=torch.device("npu")).device)
        """, tmp_path)
    assert r.stdout.strip() == "privateuseone:0"
