#!/usr/bin/env python3
"""Marks end to end: torchseal_mark() from C (two threads) and
torchseal.mark() from Python reach the history, and from it the text and
JSON reports, the Perfetto trace, the memory_viz snapshot and the HTML page.
Marks made before the first CUDA call are no-ops and appear nowhere.

    marks_e2e.py SHIM SIMCUDA_DIR CLI C_PROGRAM PY_PROGRAM HELPER_DIR EXAMPLES_PY_DIR
"""
import json
import os
import pickle
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.env import preload  # noqa: E402


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=300, **kw)
    if r.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    return r


def check(name, history, cli, tmp, want, unwanted, threads):
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append("%s: %s" % (name, what))

    text = run([cli, "report", history]).stdout
    expect("\nMarks:\n" in text, "no Marks: section in the text report")
    for label in want:
        expect(label in text, "text report lacks %r" % label)
    for label in unwanted:
        expect(label not in text, "text report has %r (marked before any CUDA call)" % label)

    report = json.loads(run([cli, "report", history, "--format", "json"]).stdout)
    marks = report.get("marks", [])
    labels = [m["label"] for m in marks]
    for label in want:
        expect(label in labels, "JSON marks lack %r: %r" % (label, labels))
    for label in unwanted:
        expect(label not in labels, "JSON marks have %r" % label)
    expect(all(set(m) == {"t", "label", "thread"} for m in marks), "mark keys: %r" % marks)
    start, end = report["process"]["start_time"], report["process"]["end_time"]
    expect(all(start <= m["t"] <= end for m in marks), "mark times outside the run: %r" % marks)
    expect(len({m["thread"] for m in marks}) == threads, "marks from %d thread(s) expected: %r"
           % (threads, marks))
    expect([m["t"] for m in marks] == sorted(m["t"] for m in marks), "marks out of time order")

    pf, mv, html = (os.path.join(tmp, name + ext) for ext in (".json", ".pickle", ".html"))
    run([cli, "export", history, "--perfetto", pf, "--memory-viz", mv])
    trace = json.load(open(pf))["traceEvents"]
    instants = [e["args"].get("label") for e in trace if e.get("ph") == "i"]
    for label in want:
        expect(label in instants, "Perfetto has no instant labelled %r" % label)
    snap = pickle.load(open(mv, "rb"))
    shown = [f["name"] for tr in snap["device_traces"] for e in tr if e["action"] == "snapshot"
             for f in e["frames"]]
    for label in want:
        expect(label in shown, "memory_viz has no snapshot entry for %r: %r" % (label, shown))

    run([cli, "report", history, "--html", html])
    page = open(html, encoding="utf-8").read()
    for label in want:
        expect("mark " + label in page, "HTML timeline lacks %r" % label)
    return failures


def main():
    shim, simcuda, cli, c_program, py_program, helper_dir, examples_py = sys.argv[1:8]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        c_prefix = os.path.join(tmp, "c")
        env = dict(os.environ, LD_PRELOAD=preload(shim), LD_LIBRARY_PATH=simcuda,
                   TORCHSEAL_OUTPUT=c_prefix)
        run([c_program], env=env)
        failures += check("C", c_prefix + ".tseal", cli, tmp,
                          ["c: epoch 1", "c: from a worker thread"],
                          ["c: before any CUDA call"], threads=2)
        c_json = json.loads(run([cli, "report", c_prefix + ".tseal", "--format", "json"]).stdout)
        if [m["label"] for m in c_json.get("marks", [])].count("c: epoch 1") != 2:
            failures.append("C: the label marked twice is not listed twice")

        py_prefix = os.path.join(tmp, "py")
        env = dict(os.environ, LD_PRELOAD=preload(shim), LD_LIBRARY_PATH=simcuda,
                   TORCHSEAL_OUTPUT=py_prefix,
                   PYTHONPATH=os.pathsep.join([helper_dir, examples_py]),
                   PYTHONDONTWRITEBYTECODE="1")
        run([sys.executable, py_program], env=env)
        failures += check("Python", py_prefix + ".tseal", cli, tmp,
                          ["py: epoch 1", "py: validation \u00e9"],
                          ["py: before any CUDA call"], threads=1)

        # A run without marks keeps its report exactly as before: no key.
        plain = os.path.join(tmp, "plain")
        env = dict(os.environ, LD_PRELOAD=preload(shim), LD_LIBRARY_PATH=simcuda,
                   TORCHSEAL_OUTPUT=plain, PYTHONPATH=examples_py, PYTHONDONTWRITEBYTECODE="1")
        run([sys.executable, "-c", "import toytorch as tt; k = tt.zeros(64)"], env=env)
        r = run([cli, "report", plain + ".tseal", "--format", "json"])
        if "marks" in json.loads(r.stdout):
            failures.append("a history without marks has a marks key")
        if "Marks:" in run([cli, "report", plain + ".tseal"]).stdout:
            failures.append("a history without marks has a Marks: section")

    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("PASS: marks from C and Python reach the reports, Perfetto, memory_viz and HTML")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
