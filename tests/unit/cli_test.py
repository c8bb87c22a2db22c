#!/usr/bin/env python3
"""Behaviour of the `torchseal` CLI: exit codes, one-line errors, and the
environment `run` hands to the command. Usage: cli_test.py TORCHSEAL FAKE_SHIM"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import harness  # noqa: E402
from harness import Checker, preload  # noqa: E402

TS, SHIM = sys.argv[1], sys.argv[2]
CHECK = Checker("cli_test")


def run(args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return harness.run([TS] + args, e, timeout=None)


def one_error_line(p, needle, what):
    lines = p.stderr.strip().splitlines()
    CHECK.true(f"{what}: exit 2, got {p.returncode}", p.returncode == 2)
    CHECK.true(f"{what}: one-line error containing {needle!r}, got {p.stderr!r}",
               len(lines) == 1 and lines[0].startswith("torchseal: error: ") and needle in lines[0])


REPORT = {
    "format": "torchseal-report", "version": 1, "trigger": "exit",
    "process": {"pid": 321, "argv": ["./a.out"], "rank": None, "hostname": "h",
                "start_time": 1.0, "end_time": 2.0, "backend": "hooks", "python": None,
                "degraded": ["no line numbers: libdw unavailable"],
                "unwinder": "learned rules + libunwind"},
    "summary": {"leaked_bytes": 512, "leaked_allocations": 2, "leak_sites": 1, "peak_bytes": 512,
                "events": 2, "suppressed_bytes": 0, "cached_bytes": 0,
                "overhead": {"events": 2, "seconds_in_torchseal": 0.0}},
    "leaks": [{"kind": "device", "api": "cudaMalloc", "device": 0, "bytes": 512, "allocations": 2,
               "detected_at": "exit",
               "frames": [{"function": "main", "file": "/s/a.cpp", "line": 4, "module": "/a.out",
                           "address": "0x401136"}],
               "python_frames": []}],
    "growth": [], "ooms": [], "invalid_frees": [],
}

with tempfile.TemporaryDirectory() as d:
    good = os.path.join(d, "r.json")
    with open(good, "w") as f:
        json.dump(REPORT, f)

    p = run(["report", good])
    out = p.stdout.splitlines()
    CHECK.true("report: exit 0", p.returncode == 0)
    CHECK.true(f"report: first line {out[:1]}",
               out and out[0] == "==321==torchseal: detected memory leaks")
    CHECK.true(f"report: last line {out[-1:]}",
               out and out[-1] == "SUMMARY: torchseal: 512 byte(s) leaked in 2 allocation(s).")
    CHECK.true("report: frame line", "    #0 0x401136 in main /s/a.cpp:4 (/a.out)" in out)
    CHECK.true("report: the header says what the process ran without",
               out[1:2] == ["==321==torchseal: degraded: no line numbers: libdw unavailable"], out[:3])

    p = run(["report", "--format", "json", good])
    CHECK.true("report --format json re-emits the report",
               p.returncode == 0 and json.loads(p.stdout) == REPORT)

    bad = os.path.join(d, "bad.json")
    with open(bad, "w") as f:
        f.write('{"format": "something-else"}')
    one_error_line(run(["report", bad]), "not a torchseal report", "non-report JSON")
    v2 = dict(REPORT, version=2)
    with open(bad, "w") as f:
        json.dump(v2, f)
    one_error_line(run(["report", bad]), "unsupported report version 2", "unknown version")
    with open(bad, "w") as f:
        f.write(json.dumps(REPORT)[:200])
    one_error_line(run(["report", bad]), "malformed JSON", "truncated JSON")
    one_error_line(run(["report", os.path.join(d, "missing.json")]), "No such file", "missing file")
    not_history = os.path.join(d, "x.tseal")
    with open(not_history, "w") as f:
        f.write("this is not a history file\n")
    one_error_line(run(["report", not_history]), "is not a torchseal history file",
                   "foreign .tseal")
    one_error_line(run(["report", os.path.join(d, "missing.tseal")]), "No such file",
                   "missing .tseal")
    one_error_line(run(["report", good, "--format", "xml"]), "--format", "bad --format")
    one_error_line(run(["frobnicate"]), "unknown command", "unknown subcommand")
    one_error_line(run([]), "subcommand", "no subcommand")

    for sub in ([], ["run"], ["report"]):
        p = run(sub + ["--help"])
        CHECK.true(f"{sub} --help", p.returncode == 0 and "Usage:" in p.stdout)

    # run: environment handed to the command, LD_PRELOAD order kept, exit status passed through.
    p = run(["run", "--output", d + "/out-%p", "--exit-code", "23", "--backend", "hooks",
             "--stack-depth", "16", "--log", "debug", "--",
             sys.executable, "-c",
             "import os,sys; print(os.environ['LD_PRELOAD']); "
             "print(','.join(os.environ.get(k,'') for k in ['TORCHSEAL_OUTPUT','TORCHSEAL_EXIT_CODE',"
             "'TORCHSEAL_BACKEND','TORCHSEAL_STACK_DEPTH','TORCHSEAL_LOG'])); sys.exit(7)"],
            env={"TORCHSEAL_SHIM": SHIM, "LD_PRELOAD": ""})
    lines = p.stdout.splitlines()
    CHECK.true(f"run: command's exit status, got {p.returncode} {p.stderr!r}", p.returncode == 7)
    CHECK.true(f"run: LD_PRELOAD {lines[:1]}",
               lines[:1] == [os.path.realpath(SHIM)] or lines[:1] == [SHIM])
    CHECK.true(f"run: env {lines[1:2]}", lines[1:2] == [f"{d}/out-%p,23,hooks,16,debug"])

    # In a sanitizer run the CLI itself is instrumented: its runtime must come
    # before any preload (tests/harness/env.py), and is kept like any other entry.
    existing = preload("libm.so.6")
    p = run(["run", "--", "sh", "-c", 'echo "$LD_PRELOAD"'],
            env={"TORCHSEAL_SHIM": SHIM, "LD_PRELOAD": existing})
    CHECK.true(f"run: existing LD_PRELOAD kept, got {p.stdout!r}",
               p.stdout.strip() == SHIM + ":" + existing)

    one_error_line(run(["run", "--", "true"], env={"TORCHSEAL_SHIM": d + "/nope.so"}),
                   "TORCHSEAL_SHIM", "missing shim override")
    one_error_line(run(["run", "--backend", "gpu", "--", "true"], env={"TORCHSEAL_SHIM": SHIM}),
                   "--backend", "bad backend")
    p = run(["run", "--", d + "/no-such-command"], env={"TORCHSEAL_SHIM": SHIM})
    CHECK.true(f"run: missing command, got {p.returncode} {p.stderr!r}",
               p.returncode == 127 and p.stderr.startswith("torchseal: error: cannot run"))

sys.exit(CHECK.finish())
