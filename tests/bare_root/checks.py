"""What a bare root must show for one torchseal install (a Meson install
tree, or the wheel in a fresh venv): the fast unwinder named at start,
nothing degraded, file:line at the planted lines of a C++ program, and the
Python line with the native line below it in a Python program. Shared by
tests/bare_root/run.py and tests/wheel/run.py."""

import os
import re

import harness
from harness import bare_root


def marked_lines(path, marker):
    return [i for i, l in enumerate(open(path), 1) if marker in l]


def run_in_bare_root(argv, env, cwd):
    return harness.run(bare_root.wrap(argv), env, cwd=cwd)


def check_planted(check, torchseal, env, out, planted_bin, planted_src, label):
    """planted_leaks under `torchseal run` at TORCHSEAL_LOG=info."""
    os.makedirs(out, exist_ok=True)
    e = dict(env, TORCHSEAL_LOG="info")
    p = run_in_bare_root([torchseal, "run", "--output", os.path.join(out, "P"), "--",
                          planted_bin], e, out)
    check.note(label + " run", p.describe())
    check.eq(label + ": planted_leaks exits 0", p.returncode, 0)
    check.true(label + ": the startup line names the fast unwinder",
               re.search(r"torchseal: .*unwinder learned rules \+ libunwind", p.stderr), p.stderr[-2000:])
    check.true(label + ": nothing is said degraded", "degraded" not in p.stderr, p.stderr[-2000:])
    report = check.read_json(os.path.join(out, "P.json"))
    if report is None:
        return
    check.eq(label + ": process.degraded is empty", report["process"].get("degraded"), [])
    want = marked_lines(planted_src, "LEAK-SITE")
    got = sorted(l["frames"][0].get("line") or 0 for l in report["leaks"] if l.get("frames"))
    files = {os.path.basename(l["frames"][0].get("file") or "") for l in report["leaks"]}
    check.eq(label + ": each leak's first frame is its planted line", got, sorted(want))
    check.eq(label + ": in planted_leaks.cpp", files, {"planted_leaks.cpp"})


def check_python(check, torchseal, env, out, python, native_lib, label):
    """prog.py (ctypes into native_alloc.c) under `torchseal run`."""
    here = os.path.dirname(os.path.abspath(__file__))
    prog = os.path.join(here, "prog.py")
    os.makedirs(out, exist_ok=True)
    p = run_in_bare_root([torchseal, "run", "--output", os.path.join(out, "P"), "--",
                          python, prog, native_lib], env, out)
    check.note(label + " python run", p.describe())
    check.eq(label + ": prog.py exits 0", p.returncode, 0)
    report = check.read_json(os.path.join(out, "P.json"))
    if report is None:
        return
    leaks = report["leaks"]
    check.eq(label + ": one 2 MiB leak", [(l["bytes"], l["allocations"]) for l in leaks],
             [(2 << 20, 1)])
    if not leaks:
        return
    py = leaks[0].get("python_frames") or [{}]
    check.eq(label + ": the Python line",
             (os.path.basename(py[0].get("file") or ""), py[0].get("line")),
             ("prog.py", marked_lines(prog, "PY-LEAK")[0]))
    native = [(os.path.basename(f.get("file") or ""), f.get("line")) for f in leaks[0]["frames"]]
    want = ("native_alloc.c", marked_lines(os.path.join(here, "native_alloc.c"), "NATIVE-LEAK")[0])
    check.true(label + ": the native line below it", want in native, native[:8])
