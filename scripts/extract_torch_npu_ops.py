#!/usr/bin/python3
"""Build analysis/data/torch_npu_ops_<version>.txt: which ATen operators torch_npu registers for the
NPU, and how, for one torch_npu release.

Inputs (three YAML files of BSD-3-Clause projects; analysis/data/PROVENANCE.md names the exact
repositories, paths and commits):
  --torch-npu     torch_npu/csrc/aten/npu_native_functions.yaml   (Ascend/pytorch)
  --op-plugin     op_plugin/config/v2r0/op_plugin_functions.yaml  (Ascend/op-plugin)
  --aten          ATen/native/native_functions.yaml of the PyTorch whose traces are judged
                  (npuscope: Debian 12's python3-torch 1.13.1, torchgen/packaged/...); used only
                  for operators the two torch_npu files do not list
Only operator names and the section they are listed in are read; nothing else is copied.

Categories, in the order a name is decided:
  custom       torch_npu's own operators ("custom"/"custom_autograd" sections of either file, and
               op-plugin's "symint" entries that are npu_* ops). torch_npu 2.0.1 registers them in
               the aten namespace, so they are written as aten::npu_...
  unsupported  op-plugin's "unsupported" section: registered so that the call raises
               "<op> is unsupported!" on the NPU.
  fallback     op-plugin's "tocpu" section: registered for the NPU with a wrapper that copies the
               inputs to the host, runs PyTorch's CPU kernel and copies the results back.
  native       op-plugin's "official" section and torch_npu's "supported"/"autograd" sections: an
               NPU kernel (acl_op or op_api, i.e. CANN) exists.
  composite    not listed, and PyTorch itself provides a backend-independent kernel
               (CompositeImplicitAutograd, or no dispatch section and no structured delegate, or
               CompositeExplicitAutograd): the op runs on the NPU as the ops it decomposes into.
               CompositeExplicitAutogradNonFunctional does not count: torch_npu 2.0.1 dispatches
               on the XLA key, which that alias excludes.
  no_kernel    every other operator of the catalogue: only CPU/CUDA/... kernels, none for the NPU.
               torch_npu 2.0.1 has no generic CPU fallback, so calling one fails there (2.1 added
               one that runs such ops on the host).
  aicpu        not produced: the YAML files do not say which CANN kernels run on the AI CPU.

Usage:
  git -C <Ascend/pytorch mirror> show <commit>:torch_npu/csrc/aten/npu_native_functions.yaml > a.yaml
  git -C <Ascend/op-plugin mirror> show <commit>:op_plugin/config/v2r0/op_plugin_functions.yaml > o.yaml
  scripts/extract_torch_npu_ops.py --torch-npu a.yaml --op-plugin o.yaml \
      --aten /usr/lib/python3/dist-packages/torchgen/packaged/ATen/native/native_functions.yaml \
      --version "..." --out analysis/data/torch_npu_ops_v2.0.1-5.0.0.txt
Prints a count per category on stderr, and the listed names the catalogue does not know.
Needs PyYAML (python3-yaml).
"""
import argparse
import collections
import sys

import yaml


# Operators PyTorch 2.0 turned into a composite over a renamed kernel, which torch_npu 2.0.1 lists
# under the new name; under the catalogue's older name they take the new name's category. Evidence
# that the NPU kernel is the same: op-plugin's v1r11 (PyTorch 1.11) config lists the old names.
RENAMED_IN_PYTORCH_2_0 = {
    "prelu": "_prelu_kernel",
    "prelu_backward": "_prelu_kernel_backward",
}


def op_name(entry):
    """'add.Tensor(Tensor self, ...) -> Tensor' or {'func': ...} -> 'add.Tensor'."""
    text = entry["func"] if isinstance(entry, dict) else entry
    return str(text).split("(")[0].strip()


def section(doc, key):
    return [op_name(e) for e in (doc.get(key) or [])]


def composite_kind(entry):
    """How PyTorch provides the op: 'composite' when a backend-independent kernel exists."""
    dispatch = entry.get("dispatch")
    if not dispatch:
        return "no_kernel" if "structured_delegate" in entry else "composite"
    keys = set()
    for k in dispatch:
        keys.update(x.strip() for x in k.split(","))
    if keys & {"CompositeImplicitAutograd", "CompositeExplicitAutograd"}:
        return "composite"
    return "no_kernel"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--torch-npu", required=True)
    ap.add_argument("--op-plugin", required=True)
    ap.add_argument("--aten", required=True)
    ap.add_argument("--version", required=True, help="the version string written as '#@version'")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    with open(args.torch_npu) as f:
        pta = yaml.safe_load(f)
    with open(args.op_plugin) as f:
        opp = yaml.safe_load(f)
    with open(args.aten) as f:
        aten = yaml.safe_load(f)

    catalogue = {op_name(e): composite_kind(e) for e in aten}

    custom = set(section(pta, "custom") + section(pta, "custom_autograd") +
                 section(opp, "custom") + section(opp, "custom_autograd"))
    custom.update(n for n in section(opp, "symint") if n.startswith("npu_"))
    unsupported = set(section(opp, "unsupported"))
    tocpu = set(section(opp, "tocpu"))
    native = set(section(opp, "official") + section(opp, "symint") +
                 section(pta, "supported") + section(pta, "autograd"))

    category = {}
    for group, cat in ((native, "native"), (tocpu, "fallback"), (unsupported, "unsupported"),
                       (custom, "custom")):  # later groups win
        for n in group:
            category[n] = cat
    for old, new in RENAMED_IN_PYTORCH_2_0.items():
        if old in catalogue and old not in category and new in category:
            category[old] = category[new]
    for n, kind in catalogue.items():
        category.setdefault(n, kind)

    foreign = sorted(n for n in category if n not in catalogue and n not in custom)
    print(f"{len(foreign)} listed non-custom names are not in the catalogue: {foreign}",
          file=sys.stderr)

    counts = collections.Counter(category.values())
    with open(args.out, "w") as out:
        out.write("# torch_npu operator support list: operator names and how torch_npu registers\n"
                  "# them for the NPU. Generated by scripts/extract_torch_npu_ops.py; sources,\n"
                  "# licence and the meaning of each category in PROVENANCE.md beside this file.\n"
                  "# One operator a line: aten::<name>[.<overload>] <TAB> <category>\n")
        out.write(f"#@version {args.version}\n")
        out.write("# counts: " + ", ".join(f"{c} {counts[c]}" for c in sorted(counts)) + "\n")
        for n in sorted(category):
            out.write(f"aten::{n}\t{category[n]}\n")
    print(", ".join(f"{c}: {counts[c]}" for c in sorted(counts)), f"total: {len(category)}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
