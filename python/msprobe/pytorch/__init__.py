"""msprobe.pytorch on npuscope (npuscope-emulation): PrecisionDebugger and seed_all of
npuscope.msprobe (see the msprobe package)."""
from npuscope.msprobe import PrecisionDebugger, seed_all  # noqa: F401

__all__ = ["PrecisionDebugger", "seed_all"]
