"""msprobe on npuscope (npuscope-emulation): Ascend's accuracy tool's dump API, written by npuscope.

``from msprobe.pytorch import PrecisionDebugger, seed_all`` gives npuscope.msprobe's
PrecisionDebugger: msprobe's config.json, start / stop / step, and msprobe's dump folders
(statistics, md5, tensor and overflow_check tasks; levels L0, L1, mix). Compare the dumps with
``npuscope compare A B`` (msprobe's metrics and thresholds). A real msprobe later on sys.path is
used instead (one line says so). See docs/python.md.
"""
import _npuscope_ascend

_real = _npuscope_ascend.real_package("msprobe", __file__)
if _real is not None:
    _npuscope_ascend.use_real(_real, "msprobe")
else:
    __version__ = "8.1+npuscope"
