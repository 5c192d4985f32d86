"""Shared fixtures of the Python tests. CTest runs them with /usr/bin/python3, PYTHONPATH set to
the build tree's python/ folder and NPUSCOPE_CLI to the npuscope executable."""
import os
import sqlite3
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@pytest.fixture
def cli():
    path = os.environ.get("NPUSCOPE_CLI", os.path.join(ROOT, "build", "profiler", "npuscope"))
    assert os.path.exists(path), f"the npuscope CLI is not built at {path} (set NPUSCOPE_CLI)"
    return path


@pytest.fixture
def examples():
    return os.path.join(ROOT, "examples")


def run_python(args, cwd, env=None, timeout=600):
    """Runs /usr/bin/python3 (this interpreter) with the test's PYTHONPATH."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable] + list(args), cwd=cwd, env=e, capture_output=True, text=True,
                          timeout=timeout)


def query(db, sql, *params):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()
