"""What npuscope's Ascend-named packages (``torch_npu``, ``apex``) share, free of torch so that it
can run at interpreter start:

* ``install()`` makes ``import torch.npu`` work in a fresh interpreter, as it did on Ascend's own
  torch builds: the module is torch_npu's ``npu`` (``import torch_npu`` first). The build tree's
  ``sitecustomize.py`` and an install's ``npuscope-ascend.pth`` call it; it costs one entry in
  ``sys.meta_path`` and imports nothing until ``torch.npu`` is asked for.
* ``real_package(name, our_init)`` finds a real torch_npu / apex later on ``sys.path``; our
  packages then load it instead (``use_real``) and say so in one line: npuscope never shadows them.
"""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

MARKER = "npuscope-emulation"  # in the first lines of each of our packages' __init__.py


def _is_ours(origin):
    try:
        with open(origin, encoding="utf-8", errors="replace") as f:
            return MARKER in f.read(400)
    except OSError:
        return False


def real_package(name, our_init):
    """The import spec of a package `name` on sys.path that is not one of npuscope's, or None."""
    for entry in sys.path:
        where = os.path.abspath(entry or os.getcwd())
        if not os.path.isdir(os.path.join(where, name)) and not os.path.isfile(os.path.join(where, name + ".py")):
            continue
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, [where])
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.origin or spec.origin in ("namespace", "built-in"):
            continue
        if os.path.abspath(spec.origin) == os.path.abspath(our_init) or _is_ours(spec.origin):
            continue
        return spec
    return None


def use_real(spec, name):
    """Loads the real package of `spec` as `name` in place of ours (one line on stderr says so)."""
    print(f"npuscope: a real {name} is installed ({os.path.dirname(spec.origin)}): using it, "
          f"not npuscope's emulation", file=sys.stderr)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class _TorchNpuLoader(importlib.abc.Loader):
    def create_module(self, spec):
        import torch_npu  # noqa: F401  (installs torch.npu)
        module = sys.modules.get("torch.npu") or getattr(torch_npu, "npu", None)
        if module is None:
            raise ImportError("torch_npu did not provide torch.npu")
        return module

    def exec_module(self, module):
        pass


class _TorchNpuFinder(importlib.abc.MetaPathFinder):
    """Answers ``import torch.npu`` when torch itself has no such module."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch.npu":
            return None
        if path is not None and importlib.machinery.PathFinder.find_spec(fullname, path) is not None:
            return None  # a torch build with its own torch.npu
        return importlib.util.spec_from_loader(fullname, _TorchNpuLoader())


def install():
    if not any(isinstance(f, _TorchNpuFinder) for f in sys.meta_path):
        sys.meta_path.append(_TorchNpuFinder())


def chain_sitecustomize(ours):
    """Runs the next ``sitecustomize`` on sys.path after `ours` (Debian's), which ours shadows."""
    here = os.path.dirname(os.path.abspath(ours))
    for entry in sys.path:
        where = os.path.abspath(entry or os.getcwd())
        if where == here:
            continue
        candidate = os.path.join(where, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_npuscope_next_sitecustomize", candidate)
            try:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            except Exception as e:  # noqa: BLE001  (as site.py does: a broken sitecustomize is reported, not fatal)
                print(f"Error in sitecustomize ({candidate}); set PYTHONVERBOSE for traceback:\n{type(e).__name__}: {e}",
                      file=sys.stderr)
            return
