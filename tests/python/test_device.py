"""The npu device from Python: strings, the torch.npu API, memory accounting, the fp64 refusal."""
import textwrap

import pytest
import torch

import npuscope
from conftest import run_python


def test_npu_strings_work_where_users_write_devices():
    x = torch.randn(3, 4).to("npu:0")
    assert str(x.device) == "privateuseone:0"          # what torch itself prints (1.13 cannot rename)
    assert npuscope.format_device(x.device) == "npu:0"  # what npuscope prints
    assert x.is_npu and not torch.randn(1).is_npu
    assert torch.zeros(2, device="npu:1").device == torch.device("privateuseone", 1)
    assert torch.ones(2, device="npu").device.type == "privateuseone"
    assert torch.randn(2).npu().device.index == npuscope.npu.current_device()
    assert x.new_zeros(3, device="npu:2").device.index == 2
    m = torch.nn.Linear(2, 2).npu()
    assert m.weight.device.type == "privateuseone"
    m.to("cpu")
    assert m.weight.device.type == "cpu"
    m.to("npu:1")
    assert m.weight.device.index == 1
    assert npuscope.device("npu", 3) == torch.device("privateuseone", 3)
    # Values survive the round trip.
    cpu = torch.arange(12.0).reshape(3, 4)
    assert torch.equal(cpu.to("npu").mul(2).cpu(), cpu * 2)


def test_bad_device_strings_name_the_device():
    with pytest.raises(RuntimeError, match="npu:99"):
        torch.zeros(1, device="npu:99")
    with pytest.raises(RuntimeError, match="npu:x"):
        torch.zeros(1).to("npu:x")


def test_fp64_is_refused_with_our_message():
    x = torch.randn(2, device="npu")
    with pytest.raises(RuntimeError, match="does not support Double"):
        x.double()
    with pytest.raises(RuntimeError, match="no fp64"):
        torch.zeros(2, dtype=torch.float64).to("npu")


def test_torch_npu_api():
    npu = npuscope.npu
    assert npu.is_available() and npu.device_count() == 8
    npu.set_device(2)
    try:
        assert npu.current_device() == 2
        assert torch.zeros(1, device="npu").device.index == 2
        with npu.device(5):
            assert npu.current_device() == 5
        assert npu.current_device() == 2
    finally:
        npu.set_device(0)
    npu.synchronize()
    npu.empty_cache()
    npu.reset_peak_memory_stats()
    before = npu.memory_allocated()
    t = torch.empty(1 << 20, dtype=torch.float32, device="npu")  # 4 MiB
    assert npu.memory_allocated() - before >= 4 << 20
    assert npu.max_memory_allocated() >= npu.memory_allocated()
    assert npu.memory_reserved() >= npu.memory_allocated()
    del t
    assert npu.memory_allocated() == before
    assert npu.max_memory_allocated() >= before + (4 << 20)
    npu.reset_peak_memory_stats()
    assert npu.max_memory_allocated() == before
    assert npu.max_memory_reserved() >= npu.memory_reserved()


def test_float_status_register():
    npu = npuscope.npu
    npu.set_float_status_tracking(True)
    try:
        npu.clear_float_status()
        torch.ones(4, device="npu").half().mul(1e5)  # overflows fp16
        assert npu.get_float_status()
        npu.clear_float_status()
        assert not npu.get_float_status()
    finally:
        npu.set_float_status_tracking(False)
    assert npu.get_overflow_mode() == "inf_nan"


def test_environment_variables_behave_as_in_the_cli(tmp_path):
    script = textwrap.dedent("""
        import torch, npuscope
        print(npuscope.npu.device_count(), npuscope.npu.current_device())
        print(npuscope.npu.get_overflow_mode())
        try:
            torch.empty(1 << 20, device="npu")
        except Exception as e:
            print(type(e).__name__, str(e).splitlines()[0])
    """)
    r = run_python(["-c", script], tmp_path, env={"ASCEND_RT_VISIBLE_DEVICES": "4,6", "ASCEND_DEVICE_ID": "1",
                                                  "NPUSCOPE_OVERFLOW_MODE": "saturation",
                                                  "NPUSCOPE_NPU_MEMORY": "1M"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "2 1"
    assert lines[1] == "saturation"
    assert "out of memory" in lines[2] and "npu:1" in lines[2]
    bad = run_python(["-c", "import npuscope; print(npuscope.npu.is_available()); npuscope.npu.current_device()"],
                     tmp_path, env={"ASCEND_RT_VISIBLE_DEVICES": "zero"})
    assert bad.stdout.splitlines()[0] == "False"
    assert bad.returncode != 0 and "ASCEND_RT_VISIBLE_DEVICES" in bad.stderr


def test_npu_tensors_print_save_load_and_deepcopy(tmp_path):
    import copy
    x = torch.tensor([[1.5, -2.0]], device="npu:1", requires_grad=True)
    assert repr(x) == "tensor([[ 1.5000, -2.0000]], device='npu:1', requires_grad=True)"
    assert repr(x.detach().half()) == "tensor([[ 1.5000, -2.0000]], dtype=torch.float16, device='npu:1')"
    assert "grad_fn=<MulBackward0>" in repr(x * 2)
    path = tmp_path / "t.pt"
    model = torch.nn.Linear(3, 2).npu()
    torch.save({"x": x, "model": model.state_dict()}, path)
    loaded = torch.load(path)
    assert loaded["x"].device == x.device and torch.equal(loaded["x"].cpu(), x.detach().cpu())
    assert loaded["x"].requires_grad
    for k, v in model.state_dict().items():
        assert loaded["model"][k].is_npu and torch.equal(loaded["model"][k].cpu(), v.cpu())
    twin = copy.deepcopy(model)
    assert twin.weight.is_npu and twin.weight is not model.weight
    assert torch.equal(twin.weight.cpu(), model.weight.cpu())


def test_losses_on_the_npu_match_the_cpu_without_warnings():
    import warnings
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.nn.functional.mse_loss(a.npu(), b.npu())
    assert [str(w.message) for w in caught] == []
    assert torch.equal(got.cpu(), torch.nn.functional.mse_loss(a, b))


def test_torchscript_still_compiles_torch_factories():
    @torch.jit.script
    def ones_plus(n: int):
        return torch.zeros(n) + 1

    assert torch.equal(ones_plus(3), torch.ones(3))
