# Shared by test_install.sh and test_deb.sh (sourced): failing with one line, and importing the
# installed Python package the way Debian's python3 finds a dist-packages folder.
fail() { echo "$(basename "$0" .sh): $*" >&2; exit 1; }

# check_import PY_DIR WORK_DIR: /usr/bin/python3, nothing of the build tree in reach (no
# PYTHONPATH, run from WORK_DIR), with PY_DIR added as a site directory, imports npuscope from
# PY_DIR and computes on npu:0.
check_import() {
  local py_dir=$1 work=$2 got
  got=$(cd "$work" && env -i PATH=/usr/bin:/bin HOME="$work" /usr/bin/python3 -c "
import site; site.addsitedir('$py_dir')
import npuscope, torch
print(npuscope.__file__, (torch.ones(2).to('npu:0') + 1).cpu().tolist())") || fail "import npuscope from $py_dir"
  [ "$got" = "$py_dir/npuscope/__init__.py [2.0, 2.0]" ] || fail "npuscope from $py_dir: $got"
  # The Ascend-named adapters: `import torch.npu` in a fresh interpreter (npuscope-ascend.pth),
  # torch_npu and apex from the same folder.
  got=$(cd "$work" && env -i PATH=/usr/bin:/bin HOME="$work" /usr/bin/python3 -c "
import site; site.addsitedir('$py_dir')
import torch, torch.npu, torch_npu, apex
from apex import amp
print(torch_npu.__file__, apex.__file__, torch.npu is torch_npu.npu, torch_npu.npu_swiglu(torch.ones(2, 4).npu()).shape)") ||
    fail "import torch.npu / torch_npu / apex from $py_dir"
  [ "$got" = "$py_dir/torch_npu/__init__.py $py_dir/apex/__init__.py True torch.Size([2, 2])" ] ||
    fail "torch_npu / apex from $py_dir: $got"
}
