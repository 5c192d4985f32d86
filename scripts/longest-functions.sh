#!/usr/bin/env bash
# Prints the N longest C++ function/method definitions of the project, longest first:
#
#   LINES  path:line  qualified-name
#
# LINES counts from the line where the definition starts (its return type / name, as ctags
# reports it) to the line of its closing brace, inclusive. qualified-name is the function's
# name with its enclosing classes (namespaces, named or anonymous, are left out), e.g.
# TraceModel::write; free functions show their bare name.
#
# Usage: scripts/longest-functions.sh [N] [DIR]
#   N    how many functions to print (default 10; 0 prints all)
#   DIR  the tree to scan (default: the repository root, the parent of this script's folder)
#
# Scanned: every top-level folder of DIR holding C++ files (*.cpp *.cc *.cxx *.h *.hh *.hpp
# *.hxx *.ipp *.inl), and C++ files at DIR's top level, except tests/, build*/, hidden
# folders (.git, .ci, .cache) and fuzz/corpus/.
#
# Needs Universal Ctags (Debian package `universal-ctags`; not yet in scripts/install-deps.sh,
# add it there) and /usr/bin/python3 with only its standard library. Ctags finds the
# definitions (kind f: definitions only, not prototypes), their scopes and their `end:` lines;
# lambdas, which ctags also reports as functions named __anon..., are dropped. Each end line is
# cross-checked by brace matching from the start line over the source with comments,
# string/character literals (raw strings included) and preprocessor lines blanked out; where the
# two disagree a note goes to stderr and ctags' end is kept if the braces between start and end
# balance, the brace-matched end otherwise. (When this script was written they agreed on all
# 1,895 definitions.)
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

N=10
DIR=""
for arg in "$@"; do
  case "$arg" in
    -h|--help) usage; exit 0 ;;
  esac
done
if [[ $# -ge 1 && "$1" =~ ^[0-9]+$ ]]; then
  N=$1
  shift
fi
if [[ $# -ge 1 ]]; then
  DIR=$1
  shift
fi
if [[ $# -ne 0 ]]; then
  echo "usage: $0 [N] [DIR]" >&2
  exit 2
fi
[[ -n "$DIR" ]] || DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ ! -d "$DIR" ]]; then
  echo "$0: $DIR is not a directory" >&2
  exit 2
fi

CTAGS=""
for c in ctags-universal ctags universal-ctags; do
  if command -v "$c" >/dev/null 2>&1 && "$c" --version 2>/dev/null | grep -q 'Universal Ctags'; then
    CTAGS=$(command -v "$c")
    break
  fi
done
if [[ -z "$CTAGS" ]]; then
  echo "$0: Universal Ctags not found; install it with: apt-get install -y universal-ctags" >&2
  exit 1
fi

exec /usr/bin/python3 - "$N" "$DIR" "$CTAGS" <<'PYEOF'
import json
import os
import signal
import subprocess
import sys

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`

n_wanted = int(sys.argv[1])
root = os.path.abspath(sys.argv[2])
ctags = sys.argv[3]

EXTS = ('.cpp', '.cc', '.cxx', '.c++', '.h', '.hh', '.hpp', '.hxx', '.ipp', '.inl')


def excluded_top(name):
    return name.startswith('.') or name == 'tests' or name.startswith('build')


def collect_files():
    files = []
    for entry in sorted(os.listdir(root)):
        full = os.path.join(root, entry)
        if os.path.isfile(full):
            if entry.endswith(EXTS):
                files.append(entry)
            continue
        if not os.path.isdir(full) or os.path.islink(full) or excluded_top(entry):
            continue
        for dirpath, dirnames, filenames in os.walk(full):
            rel_dir = os.path.relpath(dirpath, root)
            keep = []
            for d in sorted(dirnames):
                rel = os.path.join(rel_dir, d)
                if d.startswith('.') or rel == os.path.join('fuzz', 'corpus'):
                    continue
                keep.append(d)
            dirnames[:] = keep
            for f in sorted(filenames):
                if f.endswith(EXTS):
                    files.append(os.path.join(rel_dir, f))
    return files


def strip_code(text):
    """Returns the text with comments, string/char literals and preprocessor lines replaced by
    spaces (newlines kept), so that braces can be counted."""
    out = []
    i, n = 0, len(text)
    at_line_start = True  # only whitespace seen since the last newline
    while i < n:
        c = text[i]
        if c == '\n':
            out.append(c)
            at_line_start = True
            i += 1
            continue
        if at_line_start and c == '#':
            # preprocessor directive, with backslash continuations (comments inside are fine
            # to blank too)
            while i < n and text[i] != '\n':
                if text[i] == '\\' and i + 1 < n and text[i + 1] == '\n':
                    out.append(' \n')
                    i += 2
                    continue
                out.append(' ')
                i += 1
            continue
        if c in ' \t\r\f\v':
            out.append(c)
            i += 1
            continue
        at_line_start = False
        if c == '/' and i + 1 < n and text[i + 1] == '/':
            while i < n and text[i] != '\n':
                # a backslash-newline continues a // comment
                if text[i] == '\\' and i + 1 < n and text[i + 1] == '\n':
                    out.append(' \n')
                    i += 2
                    continue
                out.append(' ')
                i += 1
            continue
        if c == '/' and i + 1 < n and text[i + 1] == '*':
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(''.join(ch if ch == '\n' else ' ' for ch in text[i:j]))
            i = j
            continue
        if c == 'R' and i + 1 < n and text[i + 1] == '"' and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_') or text[i - 1] in 'uUL8'):
            # raw string R"delim( ... )delim"
            k = text.find('(', i + 2)
            if k >= 0:
                delim = text[i + 2:k]
                j = text.find(')' + delim + '"', k + 1)
                j = n if j < 0 else j + len(delim) + 2
                out.append(''.join(ch if ch == '\n' else ' ' for ch in text[i:j]))
                i = j
                continue
        if c == '"' or (c == "'" and not (i > 0 and (text[i - 1].isalnum()) and _digit_sep(text, i))):
            quote = c
            j = i + 1
            while j < n and text[j] != quote and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            j = min(j + 1, n)
            out.append(''.join(ch if ch == '\n' else ' ' for ch in text[i:j]))
            i = j
            continue
        out.append(c)
        i += 1
    return ''.join(out)


def _digit_sep(text, i):
    """True when the ' at i is a C++14 digit separator (1'000'000), not a char literal."""
    j = i - 1
    while j >= 0 and (text[j].isalnum() or text[j] in "'."):
        j -= 1
    token = text[j + 1:i]
    return bool(token) and token[0].isdigit()


def end_by_braces(lines, start):
    """Finds the closing line of the definition starting at 1-based line `start`: the first
    top-level `{` outside parentheses whose block is not a brace-initializer (followed by
    `,` `(` `{` `)` `;` or `.`) opens the body. Returns None if nothing is found."""
    text = '\n'.join(lines[start - 1:])
    depth_par = 0
    i, n = 0, len(text)
    line = start
    while i < n:
        c = text[i]
        if c == '\n':
            line += 1
        elif c in '([':
            depth_par += 1
        elif c in ')]':
            depth_par -= 1
        elif c == ';' and depth_par == 0:
            return None
        elif c == '{' and depth_par == 0:
            depth, j, jline = 0, i, line
            while j < n:
                d = text[j]
                if d == '\n':
                    jline += 1
                elif d == '{':
                    depth += 1
                elif d == '}':
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= n:
                return None
            k = j + 1
            while k < n and text[k] in ' \t\r\n':
                k += 1
            if k < n and text[k] in ',({);.':
                # member initializer like a_{x}, or a_{x} { ... : skip past it
                line = jline
                i = j + 1
                continue
            return jline
        i += 1
    return None


def balanced(lines, start, end):
    """The braces of lines start..end balance, the depth never goes negative and the end line
    holds the closing brace."""
    if end < start or end > len(lines):
        return False
    depth = 0
    opened = False
    for ln in range(start, end + 1):
        for ch in lines[ln - 1]:
            if ch == '{':
                depth += 1
                opened = True
            elif ch == '}':
                depth -= 1
                if depth < 0:
                    return False
    return opened and depth == 0 and '}' in lines[end - 1]


files = collect_files()
if not files:
    print(f'no C++ files under {root}', file=sys.stderr)
    sys.exit(1)

cmd = [ctags, '--output-format=json', '--languages=C++', '--map-C++=+.h', '--map-C++=+.ipp',
       '--kinds-C++=fncsu', '--fields=+neKZS', '--extras=-q', '-f', '-', '-L', '-']
proc = subprocess.run(cmd, cwd=root, input='\n'.join(files) + '\n', capture_output=True,
                      text=True, check=False)
if proc.returncode != 0:
    sys.stderr.write(proc.stderr)
    print(f'ctags failed with exit code {proc.returncode}', file=sys.stderr)
    sys.exit(1)

tags = []
for raw in proc.stdout.splitlines():
    try:
        t = json.loads(raw)
    except json.JSONDecodeError:
        continue
    if t.get('_type') == 'tag':
        tags.append(t)


def full_name(t):
    return t['scope'] + '::' + t['name'] if t.get('scope') else t['name']


namespaces = set()
for t in tags:
    if t.get('kind') == 'namespace':
        parts = full_name(t).split('::')
        for k in range(1, len(parts) + 1):
            namespaces.add('::'.join(parts[:k]))


def display_name(t):
    scope = t.get('scope') or ''
    if not scope or t.get('scopeKind') == 'namespace':
        return t['name']
    parts = scope.split('::')
    k = 0
    while k < len(parts) and ('::'.join(parts[:k + 1]) in namespaces or parts[k].startswith('__anon')):
        k += 1
    rest = [p for p in parts[k:] if not p.startswith('__anon')]
    return '::'.join(rest + [t['name']])


source_cache = {}


def code_lines(path):
    if path not in source_cache:
        with open(os.path.join(root, path), encoding='utf-8', errors='replace') as f:
            source_cache[path] = strip_code(f.read()).split('\n')
    return source_cache[path]


results = []
for t in tags:
    if t.get('kind') != 'function' or t['name'].startswith('__anon'):
        continue
    path, start = t['path'], int(t['line'])
    end = t.get('end')
    lines = code_lines(path)
    by_braces = end_by_braces(lines, start)
    if end is None or int(end) != by_braces:
        # Disagreement: keep ctags' end if its braces balance, else the brace-matched one.
        use = int(end) if end is not None and balanced(lines, start, int(end)) else by_braces
        print(f'note: {path}:{start} {t["name"]}: ctags says the definition ends on line {end}, '
              f'brace matching on line {by_braces}; using {use}', file=sys.stderr)
        if use is None:
            continue
        end = use
    end = int(end)
    results.append((end - start + 1, path, start, display_name(t)))

results.sort(key=lambda r: (-r[0], r[1], r[2]))
if n_wanted > 0:
    results = results[:n_wanted]
if not results:
    sys.exit(0)
wnum = max(len(str(r[0])) for r in results)
wloc = max(len(f'{r[1]}:{r[2]}') for r in results)
for count, path, start, name in results:
    loc = f'{path}:{start}'
    print(f'{count:>{wnum}}  {loc:<{wloc}}  {name}')
PYEOF
