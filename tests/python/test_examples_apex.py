"""Example 1: NVIDIA apex's README usage at O1 and O2."""
import os
import re

import pytest

from conftest import query, run_python


@pytest.mark.parametrize("level,weights,optimizer", [("O1", "torch.float32", "SGD"),
                                                     ("O2", "torch.float16", "NpuFusedSGD")])
def test_apex_readme_usage(examples, tmp_path, level, weights, optimizer):
    r = run_python([os.path.join(examples, "apex_amp.py"), "--opt-level", level, "--steps", "60", "--db", "a.db"],
                   tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"weights {weights}, optimizer {optimizer}" in r.stdout
    first, last = map(float, re.search(r"loss ([\d.]+) -> ([\d.]+)", r.stdout).groups())
    assert last < 0.9 * first
    steps = query(str(tmp_path / "a.db"), "SELECT count(*), max(loss_scale) FROM steps")
    assert steps == [(60, 65536.0)]
