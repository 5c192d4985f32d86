"""What a fused optimizer and the recorder ask of each other and of amp, without importing them.

``amp`` imports ``optimizers`` and ``profiler``; those two must not import ``amp`` back (nor
``optimizers`` the ``profiler``). Each module fills in the calls it answers when it is imported;
until then the defaults say what is true without it: no optimizer is amp's, nobody records.
"""


def amp_owns(optimizer):
    """Whether amp.initialize has set `optimizer` up (amp answers)."""
    return False


def amp_step(optimizer):
    """amp's step of an optimizer it owns (amp answers)."""
    raise RuntimeError("amp is not initialized")


def amp_optimizer():
    """The optimizer amp.initialize was given, or None (amp answers)."""
    return None


def optimizer_seen(optimizer):
    """A fused optimizer steps outside amp (the recorder answers while it records)."""
