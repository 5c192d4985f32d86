"""msprobe's dump format, written by npuscope.msprobe's PrecisionDebugger and read back by the
CLI: names as msprobe gives them, statistics against torch's own reductions, a real msprobe GPU
dump of ResNet-50 matched by name and shape, the npu under O2 against the CPU in fp32, md5 and
overflow_check tasks, the real sample's numbers back exactly from `dump show`."""
import json
import os
import re
import subprocess
import zlib

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import npuscope  # noqa: F401  (the npu device)
from msprobe.pytorch import PrecisionDebugger, seed_all

from conftest import ROOT, run_python

SAMPLES = os.path.join(ROOT, "tests", "data", "msprobe")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.fc = nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        x = self.relu(self.bn(self.conv(x)))
        return self.fc(torch.flatten(x, 1))


def load(folder, name="dump.json"):
    with open(os.path.join(folder, name), encoding="utf-8") as f:
        return json.load(f)


def train_step(tmp_path, device="cpu", level="mix", **kwargs):
    seed_all(0)
    net = Net().to(device)
    seen = {}

    def keep(module, args, out):
        seen["fc"] = out.detach().clone()  # returns None: the output stays the module's
    net.fc.register_forward_hook(keep)
    dbg = PrecisionDebugger(dump_path=str(tmp_path), level=level, **kwargs)
    x = torch.randn(4, 3, 8, 8).to(device)
    y = torch.randint(0, 10, (4,)).to(device)
    dbg.start(net)
    F.cross_entropy(net(x), y).backward()
    dbg.stop()
    dbg.step()
    dbg.close()
    return os.path.join(str(tmp_path), "step0", "rank"), seen


def test_names_levels_and_files_follow_msprobe(tmp_path):
    folder, _ = train_step(tmp_path)
    data = load(folder)
    assert data["task"] == "statistics" and data["level"] == "mix" and data["framework"] == "pytorch"
    names = list(data["data"])
    for expected in ["Functional.conv2d.0.forward", "Module.conv.Conv2d.forward.0", "Functional.batch_norm.0.forward",
                     "Torch.flatten.0.forward", "Functional.linear.0.forward", "Module.fc.Linear.forward.0",
                     "Functional.cross_entropy.0.forward", "Functional.linear.0.backward",
                     "Module.fc.Linear.backward.0", "Functional.conv2d.0.backward"]:
        assert expected in names, (expected, names)
    # A module's entry follows the APIs inside it; backward entries follow the forward ones.
    assert names.index("Functional.conv2d.0.forward") < names.index("Module.conv.Conv2d.forward.0")
    assert names.index("Functional.cross_entropy.0.forward") < names.index("Functional.linear.0.backward")
    # Backward: input = gradients of the forward's outputs, output = those of its inputs.
    lin = data["data"]["Functional.linear.0.backward"]
    assert lin["input"][0]["shape"] == [4, 10]
    assert [o["shape"] if o else None for o in lin["output"]] == [[4, 288], [10, 288], [10]]
    construct = load(folder, "construct.json")
    assert construct["Functional.conv2d.0.forward"] == "Module.conv.Conv2d.forward.0"
    assert construct["Module.conv.Conv2d.forward.0"] is None
    assert construct["Functional.linear.0.backward"] == "Module.fc.Linear.backward.0"
    stacks = load(folder, "stack.json")
    groups = {name: frames for names_, frames in stacks.values() for name in names_}
    assert any("test_msprobe.py" in f for f in groups["Functional.conv2d.0.forward"])
    assert all(re.match(r"File .*, line \d+, in \S+, \n ", f) for f in groups["Functional.conv2d.0.forward"])
    # L1: APIs only, an empty construct.json; L0: modules only.
    l1, _ = train_step(tmp_path / "l1", level="L1")
    assert not any(n.startswith("Module.") for n in load(l1)["data"]) and load(l1, "construct.json") == {}
    l0, _ = train_step(tmp_path / "l0", level="L0")
    assert all(n.startswith("Module.") for n in load(l0)["data"]), list(load(l0)["data"])


def test_statistics_are_torchs(tmp_path):
    folder, seen = train_step(tmp_path)
    out = load(folder)["data"]["Module.fc.Linear.forward.0"]["output"][0]
    ref = seen["fc"].double()
    assert out["dtype"] == "torch.float32" and out["shape"] == [4, 10] and out["requires_grad"] is True
    assert out["Max"] == pytest.approx(ref.max().item(), rel=1e-6)
    assert out["Min"] == pytest.approx(ref.min().item(), rel=1e-6)
    assert out["Mean"] == pytest.approx(ref.mean().item(), rel=1e-5, abs=1e-7)
    assert out["Norm"] == pytest.approx(ref.norm().item(), rel=1e-6)


def test_md5_is_the_crc32_of_the_bytes_and_overflow_check_keeps_overflows(tmp_path):
    dbg = PrecisionDebugger(dump_path=str(tmp_path / "md5"), level="L1", summary_mode="md5")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    dbg.start()
    y = torch.matmul(x, x.t())
    dbg.stop()
    dbg.step()
    dbg.close()
    leaf = load(str(tmp_path / "md5" / "step0" / "rank"))["data"]["Torch.matmul.0.forward"]["output"][0]
    assert leaf["md5"] == "%08x" % zlib.crc32(y.contiguous().numpy().tobytes())

    dbg = PrecisionDebugger(dump_path=str(tmp_path / "ovf"), task="overflow_check", level="L1", overflow_nums=-1)
    a = torch.tensor([1.0, 0.0, 2.0])
    dbg.start()
    torch.exp(a)
    torch.div(a, a)          # 0 / 0: NaN
    torch.mul(a, 1e39)       # inf in float32
    dbg.stop()
    dbg.step()
    dbg.close()
    data = load(str(tmp_path / "ovf" / "step0" / "rank"))
    assert data["task"] == "overflow_check"
    assert sorted(data["data"]) == ["Torch.div.0.forward", "Torch.mul.0.forward"]


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_tensor_task_saves_each_tensor_as_msprobe_names_it(tmp_path, device):
    """task tensor: every tensor leaf of dump.json names its file in dump_tensor_data/, which
    torch.load reads back as the tensor the call saw (on the host), with the leaf's dtype, shape
    and statistics; an in-place change after the call does not reach the saved input."""
    folder, seen = train_step(tmp_path, device=device, task="tensor")
    dump = load(folder)
    assert dump["task"] == "tensor"
    data_dir = dump["dump_data_dir"]
    assert data_dir == os.path.join(os.path.abspath(folder), "dump_tensor_data")
    named = 0

    def check(leaf, expected_name):
        nonlocal named
        if isinstance(leaf, list):
            for i, v in enumerate(leaf):
                check(v, f"{expected_name}.{i}")
            return
        if not isinstance(leaf, dict) or leaf.get("type") != "torch.Tensor":
            return
        assert leaf["data_name"] == expected_name + ".pt"
        t = torch.load(os.path.join(data_dir, leaf["data_name"]))
        assert t.device.type == "cpu"
        assert str(t.dtype) == leaf["dtype"] and list(t.shape) == leaf["shape"]
        if t.numel() and t.is_floating_point():
            assert t.double().max().item() == pytest.approx(leaf["Max"], rel=1e-6, abs=1e-12)
            assert t.double().norm().item() == pytest.approx(leaf["Norm"], rel=1e-6, abs=1e-12)
        named += 1

    for entry, record in dump["data"].items():
        for key, value in record.items():
            io = "input" if key.startswith("input") else "output"
            if key == "input_kwargs":
                for k, v in value.items():
                    check(v, f"{entry}.{io}.{k}")
            else:
                for i, v in enumerate(value):
                    check(v, f"{entry}.{io}.{i}")
    files = sorted(os.listdir(data_dir))
    assert named == len(files) and named > 20, (named, len(files))
    # The fc module's output, file for file the tensor the model produced.
    out = torch.load(os.path.join(data_dir, "Module.fc.Linear.forward.0.output.0.pt"))
    assert torch.equal(out, seen["fc"].cpu())
    # The ReLU is in place: its input file holds the values before it (negatives kept).
    relu_in = torch.load(os.path.join(data_dir, "Functional.relu.0.forward.input.0.pt"))
    assert relu_in.min().item() < 0


def test_tensor_task_on_a_full_disk_keeps_the_statistics_and_says_which_file(tmp_path):
    """A tensor file that cannot be written (here: it leads to /dev/full, which refuses every
    write with ENOSPC) ends the step's dump with one line naming the file; dump.json, written
    first, keeps every call's statistics."""
    folder = tmp_path / "step0" / "rank"
    (folder / "dump_tensor_data").mkdir(parents=True)
    os.symlink("/dev/full", str(folder / "dump_tensor_data" / "Torch.matmul.0.forward.output.0.pt"))
    dbg = PrecisionDebugger(dump_path=str(tmp_path), task="tensor", level="L1")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    dbg.start()
    torch.matmul(x, x.t())
    dbg.stop()
    dbg.step()
    with pytest.raises(OSError) as e:
        dbg.close()
    message = str(e.value)
    assert "\n" not in message
    assert "cannot write the msprobe dump" in message and "Torch.matmul.0.forward.output.0.pt" in message, message
    data = load(str(folder))["data"]
    assert data["Torch.matmul.0.forward"]["output"][0]["Max"] == 50.0  # [[5, 14], [14, 50]]


def test_inside_a_recording_each_entry_is_linked_to_its_op_and_its_tensors_are_rows(tmp_path, cli):
    """PrecisionDebugger inside npuscope.profile (task tensor, level mix, on the npu): the trace
    file gets every dumped call as a dump_entries row linked to the op it became — an API's own
    aten op, a module's first op (never the debugger's own host copies), a backward entry's
    autograd node — and every tensor of dump.json as a tensor_dumps row of that op, with the
    same statistics and, exported, the same values as the .pt file msprobe's name gives."""
    import sqlite3
    import numpy as np
    seed_all(0)
    net = Net().to("npu")
    db = str(tmp_path / "run.db")
    dbg = PrecisionDebugger(dump_path=str(tmp_path / "dump"), level="mix", task="tensor")
    with npuscope.profile(db) as prof:
        for _ in range(2):
            x = torch.randn(4, 3, 8, 8).to("npu")
            y = torch.randint(0, 10, (4,)).to("npu")
            dbg.start(net)
            F.cross_entropy(net(x), y).backward()
            dbg.stop()
            dbg.step()
            prof.step()
    dbg.close()
    con = sqlite3.connect(db)
    rows = con.execute("SELECT e.step, e.name, e.op_id, o.step, s.value FROM dump_entries e "
                       "LEFT JOIN op_events o ON o.id = e.op_id LEFT JOIN strings s ON s.id = o.name_id "
                       "ORDER BY e.id").fetchall()
    for step in (0, 1):
        data = load(str(tmp_path / "dump" / f"step{step}" / "rank"))["data"]
        mine = {name: (op, op_step, op_name) for s_, name, op, op_step, op_name in rows if s_ == step}
        assert set(mine) == set(data), "one row per entry of dump.json"
        for name, (op, op_step, op_name) in mine.items():
            assert op is not None and op_step == step, (name, op, op_step)
        assert mine["Functional.conv2d.0.forward"][2] == "aten::conv2d"
        assert mine["Functional.linear.0.forward"][2] == "aten::linear"
        assert mine["Functional.batch_norm.0.forward"][2] == "aten::batch_norm"
        assert mine["Module.conv.Conv2d.forward.0"][0] == mine["Functional.conv2d.0.forward"][0]
        assert mine["Module.fc.Linear.forward.0"][2] == "aten::linear"
        assert mine["Functional.conv2d.0.backward"][2] == "autograd::engine::evaluate_function: ConvolutionBackward0"
        assert mine["Module.fc.Linear.backward.0"][2] == "autograd::engine::evaluate_function: AddmmBackward0"
    # Tensors: a row per leaf of dump.json, on its entry's op, with its statistics.
    data = load(str(tmp_path / "dump" / "step0" / "rank"))["data"]
    dumps = {(name, arg): (op, mx, norm) for name, arg, op, mx, norm in con.execute(
        "SELECT op_name, arg, op_id, max, l2norm FROM tensor_dumps WHERE step = 0")}
    entry_op = {name: op for s_, name, op, _, _ in rows if s_ == 0}
    leaves = 0

    def walk(leaf, name, arg):
        nonlocal leaves
        if isinstance(leaf, list):
            for i, v in enumerate(leaf):
                walk(v, name, f"{arg}.{i}")
        elif isinstance(leaf, dict) and leaf.get("type") == "torch.Tensor":
            op, mx, norm = dumps[(name, arg)]
            assert op == entry_op[name]
            assert mx == pytest.approx(leaf["Max"], rel=1e-12) and norm == pytest.approx(leaf["Norm"], rel=1e-12)
            leaves += 1

    for name, record in data.items():
        for key, value in record.items():
            io = "input" if key.startswith("input") else "output"
            if key == "input_kwargs":
                for k, v in value.items():
                    walk(v, name, f"{io}.{k}")
            else:
                for i, v in enumerate(value):
                    walk(v, name, f"{io}.{i}")
    assert leaves > 20
    con.close()
    # The payloads, exported under msprobe's names, are the .pt files' values.
    out = tmp_path / "npy"
    r = subprocess.run([cli, "dump", "export", db, "--out", str(out), "--format", "npy", "--step", "0"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    data_dir = tmp_path / "dump" / "step0" / "rank" / "dump_tensor_data"
    pt = sorted(f[:-3] for f in os.listdir(data_dir))
    npy = sorted(f[:-4] for f in os.listdir(out / "0"))
    assert npy == pt
    for stem in pt:
        want = torch.load(str(data_dir / (stem + ".pt"))).numpy()
        assert np.array_equal(np.load(str(out / "0" / (stem + ".npy"))), want), stem


def test_npu_under_o2_against_the_cpu_names_the_first_divergent_api(tmp_path, cli):
    example = os.path.join(ROOT, "examples", "ascend", "msprobe_resnet50.py")
    for device in ("npu", "cpu"):
        r = run_python([example, "--device", device, "--dump-path", str(tmp_path / device), "--batch-size", "2",
                        "--image-size", "64"], cwd=str(tmp_path))
        assert r.returncode == 0, r.stderr
    csv = tmp_path / "compare.csv"
    r = subprocess.run([cli, "compare", str(tmp_path / "npu"), str(tmp_path / "cpu"), "--csv", str(csv)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    first = re.search(r"first divergent op: (\S+) \(step 0, (warning|error)\)", r.stdout)
    assert first, r.stdout
    assert "in module: Module." in r.stdout and "called from:" in r.stdout
    npu = load(str(tmp_path / "npu" / "step0" / "rank"))["data"]
    assert first.group(1) in npu
    rows = csv.read_text().splitlines()
    assert rows[0].startswith("Step,NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,"
                              "Max diff,Min diff,Mean diff,L2norm diff,MaxRelativeErr")
    tensors = re.search(r": (\d+) tensors, (\d+) pass, (\d+) warning, (\d+) error, (\d+) not compared", r.stdout)
    assert len(rows) - 1 == int(tensors.group(1)), "one CSV row per tensor"
    assert int(tensors.group(3)) + int(tensors.group(4)) > 0, "fp16 under O2 differs somewhere from fp32"


def test_resnet50_forward_matches_a_real_msprobe_gpu_dump(tmp_path):
    torchvision = pytest.importorskip("torchvision")
    real = load(os.path.join(SAMPLES, "resnet50_gpu_step0"))["data"]
    seed_all(1234)
    model = torchvision.models.resnet50()
    model.train()
    dbg = PrecisionDebugger(task="statistics", dump_path=str(tmp_path), level="mix")
    x = torch.rand(32, 3, 224, 224)
    y = torch.randint(0, 1000, (32,))
    dbg.start(model)
    with torch.no_grad():
        nn.CrossEntropyLoss()(model(x), y)
    dbg.stop()
    dbg.step()
    dbg.close()
    ours = load(os.path.join(str(tmp_path), "step0", "rank"))["data"]

    def shapes(entry):
        return [tuple(v["shape"]) for k in ("input_args", "output") for v in entry.get(k, [])
                if isinstance(v, dict) and "shape" in v]
    forward = [k for k in real if k.endswith(".forward") or ".forward." in k]
    assert len(forward) > 400
    matched = [k for k in forward if k in ours and shapes(ours[k]) == shapes(real[k])]
    assert len(matched) >= 0.95 * len(forward), sorted(set(forward) - set(matched))[:10]


# msprobe's own expectation for its layer-mapping fixture (Ascend/msprobe
# test/msprobe_test/mindspore_ut/compare/test_layer_mapping.py, the api mapping of
# tests/data/msprobe/mindspore_mix against pytorch_mix under layer_mapping.yaml), less its two
# Tensor.__add__ entries: msprobe places those by the framework function in their call stack
# (MindSpore's __getitem__), which npuscope's mapping does not read.
MSPROBE_LAYER_MAPPING = {
    "Tensor.__bool__.1.forward": "N/A",
    "Mint.logical_or.0.forward": "Tensor.__or__.0.forward",
    "Distributed.all_reduce.0.forward": "Distributed.all_reduce.0.forward",
    "Cell.network_with_loss.module.language_model.embedding.word_embeddings.VocabParallelEmbedding.forward.0":
        "Module.module.module.language_model.embedding.word_embeddings.VocabParallelEmbedding.forward.0",
    "Primitive.norm.RmsNorm.0.forward": "NPU.npu_rms_norm.0.forward",
    "Cell.network_with_loss.module.language_model.encoder.layers.0.ParallelTransformerLayer.forward.0":
        "Module.module.module.language_model.encoder.layers.0.ParallelTransformerLayer.forward.0",
    "Cell.network_with_loss.module.language_model.encoder.layers.0.input_norm.FusedRMSNorm.backward.0": "N/A",
    "Cell.network_with_loss.module.language_model.encoder.layers.0.attention.ParallelAttention.forward.0":
        "Module.module.module.language_model.encoder.layers.0.self_attention.ParallelAttention.forward.0",
    "Mint.cos.0.forward": "Torch.cos.0.forward",
    "Functional.flash_attention_score.0.forward": "NPU.npu_fusion_attention.0.forward",
    "Functional.flash_attention_score.0.backward": "NPU.npu_fusion_attention.0.backward",
}


def test_layer_mapping_pairs_renamed_modules_as_msprobe_does(tmp_path, cli):
    """compare --layer-mapping on msprobe's own fixture (a MindSpore dump against a PyTorch one,
    cells renamed, APIs replaced): every entry pairs as msprobe's test expects, tensors by their
    argument; without the mapping the renamed calls have no partner; a bad file is one line."""
    csv = tmp_path / "lm.csv"
    a, b = os.path.join(SAMPLES, "mindspore_mix"), os.path.join(SAMPLES, "pytorch_mix")
    r = subprocess.run([cli, "compare", a, b, "--layer-mapping", os.path.join(SAMPLES, "layer_mapping.yaml"),
                        "--csv", str(csv)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    import csv as csvlib
    rows = list(csvlib.DictReader(csv.read_text().splitlines()))
    seen = set()
    for row in rows:
        npu = row["NPU Name"]
        m = re.match(r"^(.*\.(?:forward|backward)(?:\.\d+)?)\.((?:input|output).*)$", npu)
        if npu == "N/A" or not m or m.group(1) not in MSPROBE_LAYER_MAPPING:
            continue
        entry, arg = m.groups()
        want = MSPROBE_LAYER_MAPPING[entry]
        seen.add(entry)
        if want == "N/A":
            assert row["Bench Name"] == "N/A", row
        elif row["Bench Name"] != "N/A":
            assert row["Bench Name"] == f"{want}.{arg}", row
        else:
            assert "missing in bench" in row["Err_message"], row  # a kwarg the bench call lacks
    assert seen == set(MSPROBE_LAYER_MAPPING)
    paired = [row for row in rows if row["NPU Name"].startswith("Cell.") and row["Bench Name"] != "N/A"]
    assert len(paired) >= 4
    # By name alone, no Cell finds its Module.
    plain = tmp_path / "plain.csv"
    r = subprocess.run([cli, "compare", a, b, "--csv", str(plain)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = list(csvlib.DictReader(plain.read_text().splitlines()))
    assert all(row["Bench Name"] == "N/A" for row in rows if row["NPU Name"].startswith("Cell."))
    # A dump folder against itself: every tensor passes (it was refused as "needs two runs").
    r = subprocess.run([cli, "compare", a, a], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "first divergent op: none" in r.stdout and " 0 warning, 0 error, 0 not compared" in r.stdout, r.stdout
    empty = tmp_path / "empty.yaml"
    empty.write_text("{}\n")  # msprobe's own empty mapping: structure alone
    r = subprocess.run([cli, "compare", a, b, "--layer-mapping", str(empty)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("TopLayer:\n  network_with_loss module\n")
    r = subprocess.run([cli, "compare", a, b, "--layer-mapping", str(bad)], capture_output=True, text=True)
    assert r.returncode != 0
    assert r.stderr.strip().splitlines()[-1].endswith(
        "bad.yaml: line 2: expected `Class:` or an indented `name: golden_name` (msprobe's layer_mapping.yaml)"), r.stderr


def test_the_real_sample_imports_and_shows_its_numbers_exactly(tmp_path, cli):
    sample = os.path.join(SAMPLES, "pytorch_mix")
    db = str(tmp_path / "m.db")
    r = subprocess.run([cli, "import", sample, "--db", db], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    entry = load(sample)["data"]["NPU.npu_fusion_attention.0.backward"]["output"][1]
    r = subprocess.run([cli, "dump", "show", db, "NPU.npu_fusion_attention.0.backward.output.1"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    stats = dict(re.findall(r"(min|max|mean|l2norm) (\S+)", r.stdout))
    assert float(stats["max"]) == entry["Max"] and float(stats["min"]) == entry["Min"]
    assert float(stats["mean"]) == entry["Mean"] and float(stats["l2norm"]) == entry["Norm"]
    assert "bfloat16" in r.stdout and "[4096, 1, 1536]" in r.stdout


def test_bad_config_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="msprobe task 'tensors' is not provided"):
        PrecisionDebugger(task="tensors", dump_path=str(tmp_path))
    bad = tmp_path / "config.json"
    bad.write_text("{\"task\": ")
    with pytest.raises(ValueError, match="config.json: not valid JSON"):
        PrecisionDebugger(config_path=str(bad))
    cfg = tmp_path / "ok.json"
    cfg.write_text(json.dumps({"task": "statistics", "dump_path": str(tmp_path / "d"), "level": "L1", "step": [1],
                               "statistics": {"list": ["relu"]}}))
    dbg = PrecisionDebugger(config_path=str(cfg))
    for _ in range(2):
        dbg.start()
        F.relu(torch.ones(2))
        torch.exp(torch.ones(2))
        dbg.stop()
        dbg.step()
    dbg.close()
    assert not (tmp_path / "d" / "step0").exists(), "step [1] only"
    assert list(load(str(tmp_path / "d" / "step1" / "rank"))["data"]) == ["Functional.relu.0.forward"]


# ---- the first bad rank of a job -----------------------------------------------------------------
def nan_rank(rank, world, port, dump_path):
    import torch.distributed as dist
    from test_distributed import init
    init(rank, world, port)
    torch.manual_seed(0)
    net = nn.Linear(8, 4).npu()
    dbg = PrecisionDebugger(task="statistics", dump_path=dump_path, level="L1")
    dbg.start(net)
    F.mse_loss(net(torch.randn(2, 8).npu()), torch.zeros(2, 4).npu()).backward()
    grad = net.weight.grad
    if rank == 1:
        grad = torch.div(grad, torch.zeros_like(grad))  # injected: finite inputs, an inf/NaN output
    dist.all_reduce(grad)  # the gradient all-reduce carries it to rank 0
    dbg.stop()
    dbg.step()
    dbg.close()
    dist.destroy_process_group()


def test_the_first_bad_rank_of_a_job_and_how_the_others_got_it(tmp_path, cli):
    from test_distributed import spawn
    dump = str(tmp_path / "dump")
    spawn(nan_rank, 2, dump)
    assert sorted(os.listdir(os.path.join(dump, "step0"))) == ["rank0", "rank1"]
    db = str(tmp_path / "job.db")
    r = subprocess.run([cli, "import", dump, "--db", db], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([cli, "report", "--cluster", "--json", db], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout)["first_nonfinite"]
    assert found["origin"]["rank"] == 1 and found["origin"]["step"] == 0
    assert found["origin"]["op"] == "Torch.div.0.forward" and found["origin"]["kind"] == "produced"
    assert [(o["rank"], o["op"], o["kind"]) for o in found["others"]] == [(0, "Distributed.all_reduce.0.forward", "arrived")]
    r = subprocess.run([cli, "report", "--cluster", db], capture_output=True, text=True)
    assert "rank 0: step 0, Distributed.all_reduce.0.forward output.0 — arrived through the collective from rank 1" in r.stdout
    r = subprocess.run([cli, "advise", db], capture_output=True, text=True)
    assert "First NaN/inf of the dumps: rank 1, step 0, Torch.div.0.forward" in r.stdout, r.stdout
