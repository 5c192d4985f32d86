"""torch_npu's fused operators: each is the dispatcher op ``torch.ops.npu.<name>`` that npuscope's
device library defines (the documented formula in fp32, rounded like the device; recorded as one
op). Tensor formats (``npu_format_cast``) are metadata here: the emulator stores every tensor
plainly, so the math is unchanged and ``get_npu_format`` answers what was asked for."""
import torch

import npuscope  # noqa: F401  (loads the device library, which defines torch.ops.npu)

EMULATED_OPS = ("npu_confusion_transpose", "npu_rms_norm", "npu_rotary_mul", "npu_fusion_attention", "npu_swiglu",
                "fast_gelu", "npu_fast_gelu", "npu_scaled_masked_softmax", "npu_format_cast", "npu_format_cast_",
                "get_npu_format")


class NotEmulatedError(AttributeError, NotImplementedError):
    """A torch_npu operator npuscope does not emulate (an AttributeError, so hasattr() is False)."""


def not_emulated(name):
    return NotEmulatedError(f"torch_npu.{name}: not emulated by npuscope (emulated: {', '.join(EMULATED_OPS)})")


def npu_confusion_transpose(self, perm, shape, transpose_first):
    return torch.ops.npu.npu_confusion_transpose(self, list(perm), list(shape), bool(transpose_first))


def npu_rms_norm(self, gamma, epsilon=1e-6):
    return torch.ops.npu.npu_rms_norm(self, gamma, float(epsilon))


def npu_rotary_mul(self, r1, r2, rotary_mode="half"):
    return torch.ops.npu.npu_rotary_mul(self, r1, r2, rotary_mode)


def npu_swiglu(self, dim=-1):
    return torch.ops.npu.npu_swiglu(self, int(dim))


def fast_gelu(self):
    return torch.ops.npu.fast_gelu(self)


npu_fast_gelu = fast_gelu


def npu_scaled_masked_softmax(x, mask, scale=1.0, fixed_triu_mask=False):
    return torch.ops.npu.npu_scaled_masked_softmax(x, mask, scale, bool(fixed_triu_mask))


def npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None,
                         scale=1.0, keep_prob=1.0, pre_tockens=2147483647, next_tockens=2147483647, inner_precise=0,
                         prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                         gen_mask_parallel=True, sync=False):
    """Returns (attention_out, softmax_max, softmax_sum, softmax_out, seed, offset, numels) as
    torch_npu does; softmax_out is empty, seed/offset/numels are 0 (no dropout: keep_prob 1)."""
    return torch.ops.npu.npu_fusion_attention(
        query, key, value, int(head_num), input_layout, pse, padding_mask, atten_mask, float(scale), float(keep_prob),
        int(pre_tockens), int(next_tockens), int(inner_precise), prefix, actual_seq_qlen, actual_seq_kvlen,
        int(sparse_mode), bool(gen_mask_parallel), bool(sync))


# ACL formats (aclFormat): the ones scripts name.
FORMATS = {0: "NCHW", 1: "NHWC", 2: "ND", 3: "NC1HWC0", 4: "FRACTAL_Z", 29: "FRACTAL_NZ", 30: "NCDHW",
           32: "NDC1HWC0", 33: "FRACTAL_Z_3D"}


def _check_format(acl_format):
    acl_format = int(acl_format)
    if acl_format not in FORMATS:
        raise ValueError(f"npu_format_cast: format {acl_format}: expected one of "
                         + ", ".join(f"{k} ({v})" for k, v in FORMATS.items()))
    return acl_format


def npu_format_cast(self, acl_format):
    """The same values (an alias of `self`) carrying format `acl_format`."""
    out = self.view_as(self)
    out._npu_format = _check_format(acl_format)
    return out


def npu_format_cast_(self, acl_format):
    self._npu_format = _check_format(acl_format)
    return self


def get_npu_format(self):
    """The format last cast to, else torch_npu's default: NCHW (0) for 4-D tensors, ND (2) otherwise."""
    return getattr(self, "_npu_format", 0 if self.dim() == 4 else 2)
