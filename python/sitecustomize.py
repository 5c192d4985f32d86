# npuscope's build tree (PYTHONPATH=build/python): `import torch.npu` finds npuscope's torch_npu,
# as `npuscope-ascend.pth` arranges in an install. Then the interpreter's own sitecustomize runs.
import _npuscope_ascend

_npuscope_ascend.install()
_npuscope_ascend.chain_sitecustomize(__file__)
