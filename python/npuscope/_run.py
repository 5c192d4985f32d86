"""The Python side of ``npuscope run``: runs an unmodified script under a recording.

    /usr/bin/python3 -m npuscope._run --db run.db [--dump-config acl.json] [--transfer-to-npu]
        [--schedule S] [--run-id-file F] -- script.py args...

The script runs as ``__main__`` with its own argv; its exit status is kept. A script that
raises (or is interrupted) leaves the file consistent with its run marked failed and the
exception's last line in results_json.
"""
import argparse
import os
import runpy
import signal
import sys
import traceback


def _error(what):
    """One line as the CLI's other commands say it: ``npuscope: error: <what>`` (a recording's
    own prefix, ``npuscope.profile: ``, is for scripts that use the API)."""
    line = str(what)
    prefix = "npuscope.profile: "
    print("npuscope: error: " + (line[len(prefix):] if line.startswith(prefix) else line), file=sys.stderr)


class _Prefixed:
    """A text stream whose lines start with `prefix` (``npuscope run --nproc``: "[rank1] ")."""

    def __init__(self, stream, prefix):
        self._stream, self._prefix, self._pending = stream, prefix, ""

    def write(self, text):
        # Whole lines only, each flushed in one write: the ranks share a terminal, and a line
        # printed in two writes (print's text, then its "\n") would interleave with another's.
        self._pending += text
        if "\n" in self._pending:
            lines, _, self._pending = self._pending.rpartition("\n")
            self._stream.write("".join(self._prefix + line + "\n" for line in lines.split("\n")))
            self._stream.flush()
        return len(text)

    def flush(self):
        if self._pending:
            self._stream.write(self._prefix + self._pending)
            self._pending = ""
        self._stream.flush()

    def __getattr__(self, name):
        return getattr(self._stream, name)


def main(argv):
    if "--" not in argv:
        _error("run: expected '-- script.py [args...]'")
        return 2
    cut = argv.index("--")
    parser = argparse.ArgumentParser(prog="npuscope run")
    parser.add_argument("--db", default="npuscope.db")
    parser.add_argument("--dump-config", default="")
    parser.add_argument("--transfer-to-npu", action="store_true")
    parser.add_argument("--schedule", default="")
    parser.add_argument("--run-id-file", default="")
    opts = parser.parse_args(argv[:cut])
    script_argv = argv[cut + 1:]
    if not script_argv:
        _error("run: no script given after '--'")
        return 2
    script = script_argv[0]
    if os.environ.get("NPUSCOPE_OUTPUT_PREFIX"):
        sys.stdout = _Prefixed(sys.stdout, os.environ["NPUSCOPE_OUTPUT_PREFIX"])
        sys.stderr = _Prefixed(sys.stderr, os.environ["NPUSCOPE_OUTPUT_PREFIX"])
    if not os.path.isfile(script):
        _error(f"run: {script}: no such script")
        return 2

    import npuscope
    if opts.transfer_to_npu:
        import npuscope.transfer_to_npu  # noqa: F401
    try:
        prof = npuscope.Profile(opts.db, schedule=opts.schedule or None, dump_config=opts.dump_config or None,
                                command="run " + " ".join(script_argv))
        prof.start()
    except (RuntimeError, ValueError, OSError) as e:
        _error(e)
        return 1
    if opts.run_id_file:
        with open(opts.run_id_file, "w") as f:
            f.write(f"{prof.run_id}\n{prof.db}\n")  # the file: a rank of a job may record into a sibling

    # SIGTERM (kill, a job scheduler, `npuscope run` passing its own on) ends the script like
    # Ctrl-C does: its run is marked failed and everything recorded is kept.
    class Terminated(BaseException):
        pass

    def on_term(signum, frame):
        raise Terminated()
    signal.signal(signal.SIGTERM, on_term)

    sys.argv = list(script_argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    status, results, code = "completed", {}, 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr)  # as the interpreter does for sys.exit("message")
        if code != 0:
            status, results = "failed", {"error": f"SystemExit: {e.code}"}
    except KeyboardInterrupt:
        status, results, code = "failed", {"error": "interrupted"}, 130
    except Terminated:
        status, results, code = "failed", {"error": "terminated (SIGTERM)"}, 143
    except BaseException as e:  # noqa: B902  (the script's own failure, reported and kept)
        traceback.print_exc()
        line = (f"{type(e).__name__}: {e}".splitlines() or [type(e).__name__])[0]
        status, results, code = "failed", {"error": line}, 1
    results["exit_status"] = code
    recording_failed = False
    try:
        prof.stop(status, results)
    except RuntimeError as e:
        _error(e)
        recording_failed = True
    if opts.run_id_file:  # for `npuscope run`: whether the recording failed, the script's own status
        with open(opts.run_id_file, "a") as f:
            f.write(f"{int(recording_failed)} {code & 0xff}\n")
    return (code or 1) if recording_failed else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
