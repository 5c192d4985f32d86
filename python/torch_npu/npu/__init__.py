"""torch.npu / torch_npu.npu on npuscope: npuscope.npu's device API (device selection, memory,
float status, seeds), streams and events (one stream per device), run-time options, and
``torch.npu.amp``. See docs/python.md."""
from npuscope.npu import *  # noqa: F401,F403
from npuscope.npu import _index  # noqa: F401
from . import amp  # noqa: F401
