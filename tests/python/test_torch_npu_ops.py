"""torch_npu's fused operators on the emulated npu, checked against torch_npu's documented formulas
written here with plain CPU torch ops: values in fp32 and fp16, gradients, refusals, recording."""
import pytest
import torch

import npuscope
import torch_npu
from conftest import query

DTYPES = [torch.float32, torch.float16]


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def rand(*shape, dtype=torch.float32):
    """A CPU tensor already in `dtype`, so the reference and the npu start from the same values."""
    return torch.randn(*shape).to(dtype)


def check(got, expected, dtype):
    """`got` lives on the npu in `dtype`; `expected` is the fp32 formula, rounded to `dtype` here."""
    assert str(got.device) == "privateuseone:0" and got.dtype == dtype
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-3, atol=1e-3)
    torch.testing.assert_close(got.cpu().float(), expected.to(dtype).float(), **tol)


# ---- the documented formulas (fp32, CPU) ------------------------------------------------------

def ref_rms_norm(x, gamma, eps=1e-6):
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    rstd = torch.rsqrt(x.pow(2).mean(dim=dims, keepdim=True) + eps)
    return x * rstd * gamma, rstd


def ref_rotary(x, r1, r2, mode="half"):
    if mode == "half":
        h = x.shape[-1] // 2
        rotated = torch.cat((-x[..., h:], x[..., :h]), dim=-1)
    else:  # pairs (x0, x1) -> (-x1, x0)
        rotated = torch.empty_like(x)
        rotated[..., 0::2] = -x[..., 1::2]
        rotated[..., 1::2] = x[..., 0::2]
    return x * r1 + rotated * r2


def ref_swiglu(x, dim=-1):
    a, b = x.chunk(2, dim=dim)
    return a * torch.sigmoid(a) * b


def ref_fast_gelu(x):
    return x / (1 + torch.exp(-1.702 * x.abs())) * torch.exp(0.851 * (x - x.abs()))


def ref_scaled_masked_softmax(x, mask, scale, triu=False):
    if triu:
        mask = torch.ones(x.shape[-2], x.shape[-1], dtype=torch.bool).triu(1)
    return torch.softmax((x * scale).masked_fill(mask, -10000.0), dim=-1)


def ref_attention(q, k, v, scale, mask=None, causal=False):
    """BNSD tensors; key/value heads repeated per group. Returns out, row max, row sum of exp."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) * scale
    if causal:
        mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).triu(1)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    mx = scores.amax(dim=-1, keepdim=True)
    e = torch.exp(scores - mx)
    return (e / e.sum(-1, keepdim=True)) @ v, mx, e.sum(-1, keepdim=True)


def to_layout(t, layout):  # from BNSD
    if layout == "BNSD":
        return t.contiguous()
    bsnd = t.transpose(1, 2).contiguous()
    return bsnd if layout == "BSND" else bsnd.flatten(2)


# ---- values ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("gamma_shape", [(8,), (4, 8)])
def test_rms_norm(dtype, gamma_shape):
    x, gamma = rand(2, 4, 8, dtype=dtype), rand(*gamma_shape, dtype=dtype)
    y, rstd = torch_npu.npu_rms_norm(x.npu(), gamma.npu(), epsilon=1e-5)
    ey, erstd = ref_rms_norm(x.float(), gamma.float(), 1e-5)
    check(y, ey, dtype)
    assert rstd.dtype == torch.float32 and rstd.shape == erstd.shape  # reduced dims kept as 1
    assert rstd.shape == ((2, 4, 1) if len(gamma_shape) == 1 else (2, 1, 1))
    check(rstd, erstd, torch.float32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["half", "interleave"])
def test_rotary_mul(dtype, mode):
    x, r1, r2 = rand(2, 5, 3, 8, dtype=dtype), rand(1, 5, 1, 8, dtype=dtype), rand(1, 5, 1, 8, dtype=dtype)
    y = torch_npu.npu_rotary_mul(x.npu(), r1.npu(), r2.npu(), rotary_mode=mode)
    check(y, ref_rotary(x.float(), r1.float(), r2.float(), mode), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [-1, 0])
def test_swiglu(dtype, dim):
    x = rand(4, 6, 10, dtype=dtype)
    y = torch_npu.npu_swiglu(x.npu(), dim=dim)
    check(y, ref_swiglu(x.float(), dim), dtype)
    assert y.shape[dim] == x.shape[dim] // 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_fast_gelu(dtype):
    x = rand(3, 33, dtype=dtype) * 4
    check(torch_npu.fast_gelu(x.npu()), ref_fast_gelu(x.float()), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("triu", [False, True])
def test_scaled_masked_softmax(dtype, triu):
    x, mask = rand(2, 3, 6, 6, dtype=dtype), torch.rand(2, 1, 6, 6) < 0.3
    y = torch_npu.npu_scaled_masked_softmax(x.npu(), mask.npu(), scale=0.5, fixed_triu_mask=triu)
    check(y, ref_scaled_masked_softmax(x.float(), mask, 0.5, triu), dtype)


@pytest.mark.parametrize("transpose_first", [True, False])
def test_confusion_transpose(transpose_first):
    x = rand(2, 3, 4, 5)
    if transpose_first:
        perm, shape, expected = (0, 2, 1, 3), (2, 4, 15), x.permute(0, 2, 1, 3).reshape(2, 4, 15)
    else:
        perm, shape, expected = (0, 2, 1, 3), (2, 6, 2, 5), x.reshape(2, 6, 2, 5).permute(0, 2, 1, 3)
    y = torch_npu.npu_confusion_transpose(x.npu(), perm, shape, transpose_first)
    assert y.shape == expected.shape and torch.equal(y.cpu(), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout,heads,kv_heads,masked", [("BSH", 4, 4, True), ("BNSD", 4, 4, False),
                                                         ("BSND", 4, 2, True), ("BSH", 4, 1, False)])
def test_fusion_attention(dtype, layout, heads, kv_heads, masked):
    b, sq, skv, d, scale = 2, 5, 7, 8, 0.35
    q = rand(b, heads, sq, d, dtype=dtype)
    k, v = rand(b, kv_heads, skv, d, dtype=dtype), rand(b, kv_heads, skv, d, dtype=dtype)
    mask = (torch.rand(sq, skv) < 0.3) if masked else None
    if mask is not None:
        mask[:, 0] = False  # no fully masked row
    got = torch_npu.npu_fusion_attention(to_layout(q, layout).npu(), to_layout(k, layout).npu(),
                                         to_layout(v, layout).npu(), heads, layout, scale=scale,
                                         atten_mask=None if mask is None else mask.npu())
    assert len(got) == 7
    out, smax, ssum, sout = got[:4]
    eout, emax, esum = ref_attention(q.float(), k.float(), v.float(), scale, mask)
    check(out, to_layout(eout, layout), dtype)
    assert smax.shape == ssum.shape == (b, heads, sq, 8)
    check(smax, emax.expand(-1, -1, -1, 8), torch.float32)
    check(ssum, esum.expand(-1, -1, -1, 8), torch.float32)
    assert sout.numel() == 0 and tuple(got[4:]) == (0, 0, 0)


def test_fusion_attention_causal_sparse_mode_2():
    q, k, v = rand(1, 2, 6, 8), rand(1, 2, 6, 8), rand(1, 2, 6, 8)
    out = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 2, "BNSD", atten_mask=CAUSAL.npu(),
                                         scale=0.5, sparse_mode=2)[0]
    check(out, ref_attention(q, k, v, 0.5, causal=True)[0], torch.float32)


# ---- gradients: backward on the npu against torch.autograd on the CPU formula ------------------

def grads(fn, inputs, weight, device):
    """d(sum(fn(inputs) * weight)) / d inputs, computed on `device`."""
    leaves = [t.detach().to(device).requires_grad_() for t in inputs]
    out = fn(*leaves)
    (out * weight.to(device)).sum().backward()
    return [t.grad.cpu() for t in leaves]


torch.manual_seed(0)  # the gradient cases' constant operands
R1, R2 = torch.randn(1, 5, 1, 8), torch.randn(1, 5, 1, 8)
MASK = torch.rand(2, 1, 5, 5) < 0.3
ATT_MASK = torch.tensor([[False] + [i % 3 == 1 for i in range(5)]] * 5)  # [Sq=5, Skv=6]
CAUSAL = torch.ones(2048, 2048, dtype=torch.bool).triu(1)  # torch_npu's compressed mask for sparse_mode 2

GRAD_CASES = {
    "rms_norm": (lambda x, g: torch_npu.npu_rms_norm(x, g)[0], lambda x, g: ref_rms_norm(x, g)[0],
                 lambda: [rand(2, 3, 8), rand(8)]),
    "rotary_mul": (lambda x: torch_npu.npu_rotary_mul(x, R1.npu(), R2.npu()), lambda x: ref_rotary(x, R1, R2),
                   lambda: [rand(2, 5, 3, 8)]),
    "swiglu": (torch_npu.npu_swiglu, ref_swiglu, lambda: [rand(3, 4, 12)]),
    "fast_gelu": (torch_npu.fast_gelu, ref_fast_gelu, lambda: [rand(4, 9) * 3]),
    "scaled_masked_softmax": (lambda x: torch_npu.npu_scaled_masked_softmax(x, MASK.npu(), 0.7),
                              lambda x: ref_scaled_masked_softmax(x, MASK, 0.7), lambda: [rand(2, 2, 5, 5)]),
    "fusion_attention_gqa": (
        lambda q, k, v: torch_npu.npu_fusion_attention(q, k, v, 4, "BNSD", atten_mask=ATT_MASK.npu(), scale=0.3)[0],
        lambda q, k, v: ref_attention(q, k, v, 0.3, ATT_MASK)[0],
        lambda: [rand(2, 4, 5, 8), rand(2, 2, 6, 8), rand(2, 2, 6, 8)]),
    "fusion_attention_bsh_causal": (
        lambda q, k, v: torch_npu.npu_fusion_attention(q, k, v, 2, "BSH", scale=0.3, sparse_mode=2,
                                                       atten_mask=CAUSAL.npu())[0],
        lambda q, k, v: to_layout(ref_attention(*(t.unflatten(2, (-1, 8)).transpose(1, 2) for t in (q, k, v)),
                                                0.3, causal=True)[0], "BSH"),
        lambda: [rand(1, 5, 16), rand(1, 5, 16), rand(1, 5, 16)]),
}


@pytest.mark.parametrize("case", list(GRAD_CASES))
def test_backward_matches_autograd_of_the_formula(case):
    npu_fn, ref_fn, make = GRAD_CASES[case]
    inputs = make()
    weight = torch.randn(ref_fn(*inputs).shape)
    got = grads(npu_fn, inputs, weight, "npu")
    expected = grads(ref_fn, inputs, weight, "cpu")
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == inputs[i].shape
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4, msg=lambda m: f"{case} input {i}: {m}")


# ---- refusals and formats ----------------------------------------------------------------------

def test_dropout_is_refused_as_not_emulated():
    q = rand(2, 5, 16).npu()
    with pytest.raises(RuntimeError, match="not emulated"):
        torch_npu.npu_fusion_attention(q, q, q, 2, "BSH", keep_prob=0.9)


@pytest.mark.parametrize("heads,head_dim", [(2, 8), (12, 64)])  # 12 x 64: BERT-base's heads
def test_tnd_layout_is_refused_as_not_emulated(heads, head_dim):
    t = rand(10, heads, head_dim).npu()  # T, N, D
    with pytest.raises(RuntimeError, match="TND.*not emulated"):
        torch_npu.npu_fusion_attention(t, t, t, heads, "TND")


def test_unknown_torch_npu_op_is_named_as_not_emulated():
    with pytest.raises(AttributeError, match="npu_some_unknown_op.*not emulated"):
        torch_npu.npu_some_unknown_op
    assert not hasattr(torch_npu, "npu_some_unknown_op")


def test_format_cast_is_metadata():
    t, flat = rand(2, 3, 4, 5).npu(), rand(6, 7).npu()
    assert torch_npu.get_npu_format(t) == 0 and torch_npu.get_npu_format(flat) == 2
    assert torch_npu.get_npu_format(rand(3).npu()) == 2
    nz = torch_npu.npu_format_cast(flat, 29)
    assert torch_npu.get_npu_format(nz) == 29 and torch.equal(nz.cpu(), flat.cpu())
    with pytest.raises(ValueError, match="format 7"):
        torch_npu.npu_format_cast(t, 7)


# ---- recording ---------------------------------------------------------------------------------

def test_rms_norm_is_recorded_as_one_device_op(tmp_path):
    db = str(tmp_path / "run.db")
    x, gamma = rand(4, 16).npu(), rand(16).npu()
    with npuscope.profile(db=db) as prof:
        torch_npu.npu_rms_norm(x, gamma)
    rows = query(db, "SELECT id, device, device_start_ns, device_dur_ns FROM ops WHERE run_id=? AND name=?",
                 prof.run_id, "npu::npu_rms_norm")
    assert len(rows) == 1
    op_id, device, device_start, device_dur = rows[0]
    assert device == "npu:0" and device_start is not None and device_dur > 0
    assert query(db, "SELECT name FROM ops WHERE parent_id=?", op_id) == []
    inner = query(db, "SELECT count(*) FROM ops WHERE run_id=? AND name IN ('aten::rsqrt', 'aten::mean', "
                      "'aten::mul', 'aten::pow', 'aten::add')", prof.run_id)
    assert inner == [(0,)]
