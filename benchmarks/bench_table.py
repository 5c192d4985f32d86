"""bench_table: every benchmark's figures in one table, against their targets and the last recorded run.

    /usr/bin/python3 benchmarks/bench_table.py RAW_DIR [--no-save] [--results DIR]

RAW_DIR holds one output per benchmark: `<name>.json`, Google Benchmark's --benchmark_format=json
(its user counters are the figures) or bench_python's JSON object. The targets come from
benchmarks/targets.tsv (metric, benchmark, lower|higher is better, target, source; a target of
"-" marks a reference figure, shown and compared but held to no target). The last
recorded run is the newest file of benchmarks/results/ (what this tool saves: date, commit,
machine, figures). A figure is marked WORSE when it moved the wrong way by more than the noise:
the largest relative spread of that figure over the recorded runs on this machine (at least
5 %, 10 % while fewer than two runs are recorded). Standard library only.
"""
import glob
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Google Benchmark's own keys of an entry: not figures.
STANDARD = {"family_index", "per_family_instance_index", "repetitions", "repetition_index", "threads", "iterations",
            "real_time", "cpu_time", "time_unit", "run_name", "run_type", "name", "aggregate_name", "aggregate_unit",
            "label", "error_occurred", "error_message"}


def figures_of(path):
    """{metric: value} of one raw output; the benchmark's errors as a list."""
    with open(path) as f:
        text = f.read()
    doc = json.loads(text[text.find("{"):]) if "{" in text else {}
    out, errors = {}, []
    if isinstance(doc.get("benchmarks"), list):
        for b in doc["benchmarks"]:
            if b.get("error_occurred"):
                errors.append(f"{b.get('name')}: {b.get('error_message')}")
            for k, v in b.items():
                if k not in STANDARD and isinstance(v, (int, float)) and k not in out:
                    out[k] = float(v)
    else:
        for k, v in doc.items():
            if isinstance(v, (int, float)):
                out[k] = float(v)
    return out, errors


def targets():
    rows = []
    with open(os.path.join(HERE, "targets.tsv")) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            if line.strip():
                rows.append(dict(zip(header, line.rstrip("\n").split("\t"))))
    return rows


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = 0
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem, 1)}


def git(*args):
    try:
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def recorded(results_dir, this_machine):
    """The recorded runs of this machine (same CPU and core count), oldest first."""
    runs = []
    for p in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        try:
            with open(p) as f:
                r = json.load(f)
        except (OSError, ValueError):
            continue
        m = r.get("machine", {})
        if m.get("cpu") == this_machine["cpu"] and m.get("cores") == this_machine["cores"]:
            runs.append((p, r))
    runs.sort(key=lambda pr: (pr[1].get("time", 0), pr[1].get("date", "")))
    return runs


def noise(metric, runs):
    values = [r["figures"][metric] for _, r in runs if metric in r.get("figures", {}) and r["figures"][metric] > 0]
    if len(values) < 2:
        return 0.10
    return max(0.05, max(values) / min(values) - 1)


def fmt(v):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.2f}M"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.3f}"


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    if not args:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    raw = args[0]
    results_dir = os.path.join(HERE, "results")
    if "--results" in argv:
        results_dir = argv[argv.index("--results") + 1]
        args = [a for a in args if a != results_dir]
    figures, errors, ran = {}, [], []
    for p in sorted(glob.glob(os.path.join(raw, "*.json"))):
        name = os.path.basename(p)[:-5]
        try:
            f, e = figures_of(p)
        except ValueError as ex:
            errors.append(f"{name}: unreadable output ({ex})")
            continue
        ran.append(name)
        errors += [f"{name}: {x}" for x in e]
        for k, v in f.items():
            figures.setdefault(k, v)
    me = machine()
    runs = recorded(results_dir, me)
    last_path, last = runs[-1] if runs else (None, None)
    commit = git("rev-parse", "--short", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))

    print(f"benchmarks of {commit}{'+changes' if dirty else ''} on {me['cpu']}, {me['cores']} cores")
    if last:
        print(f"last recorded: {os.path.basename(last_path)} ({last.get('commit')}, {last.get('date')}); "
              f"{len(runs)} recorded run(s) on this machine give the noise")
    else:
        print("no recorded run on this machine yet: nothing to compare with")
    print()
    head = f"{'figure':40s} {'benchmark':15s} {'target':>12s} {'now':>12s} {'last':>12s} {'change':>8s} {'noise':>6s}  verdict"
    print(head)
    print("-" * len(head))
    worse, missed = [], []
    for t in targets():
        m, better = t["metric"], t["better"]
        target = None if t["target"] == "-" else float(t["target"])  # "-": a reference figure
        now = figures.get(m)
        prev = last["figures"].get(m) if last else None
        change = (now / prev - 1) if now is not None and prev else None
        n = noise(m, runs)
        verdict = []
        if now is None:
            verdict.append("not measured" if t["benchmark"] not in ran else "no such figure")
        else:
            if target is None:
                verdict.append("reference")
            else:
                meets = now <= target if better == "lower" else now >= target
                verdict.append("meets" if meets else "MISSES")
                if not meets:
                    missed.append(m)
            if change is not None and ((better == "lower" and change > n) or (better == "higher" and change < -n)):
                verdict.append("WORSE")
                worse.append(m)
        sign = "<=" if better == "lower" else ">="
        shown = "-" if target is None else sign + " " + fmt(target)
        print(f"{m:40s} {t['benchmark']:15s} {shown:>12s} {fmt(now):>12s} {fmt(prev):>12s} "
              f"{'-' if change is None else f'{change * 100:+.1f}%':>8s} {n * 100:5.0f}%  {' '.join(verdict)}")
    print()
    print(f"{len(missed)} figure(s) miss their target" + (": " + ", ".join(missed) if missed else ""))
    print(f"{len(worse)} figure(s) worse than the last recorded run by more than its noise" +
          (": " + ", ".join(worse) if worse else ""))
    for e in errors:
        print("error: " + e)

    if "--no-save" not in argv and figures:
        os.makedirs(results_dir, exist_ok=True)
        now = time.time()
        date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        stem = f"{date.replace(':', '').replace('-', '')}-{commit or 'unknown'}"
        name, n = stem + ".json", 1
        while os.path.exists(os.path.join(results_dir, name)):  # two runs in one second
            n += 1
            name = f"{stem}-{n}.json"
        record = {"date": date, "time": round(now, 3), "commit": commit, "dirty": dirty, "machine": me,
                  "benchmarks": ran, "figures": dict(sorted(figures.items()))}
        with open(os.path.join(results_dir, name), "w") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
        print(f"recorded: {os.path.relpath(os.path.join(results_dir, name))}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
