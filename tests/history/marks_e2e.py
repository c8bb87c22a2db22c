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
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Checker, Failed, interpreter_env, preload, run as run_process  # noqa: E402

CHECK = Checker("history marks")


def run(cmd, env=None):
    r = run_process(cmd, env if env is not None else dict(os.environ))
    if r.returncode != 0:
        raise Failed(r.describe())
    return r


def check(name, history, cli, tmp, want, unwanted, threads):
    def expect(cond, what):
        CHECK.true("%s: %s" % (name, what), cond)

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


def main():
    shim, simcuda, cli, c_program, py_program, helper_dir, examples_py = sys.argv[1:8]
    with tempfile.TemporaryDirectory() as tmp:
        c_prefix = os.path.join(tmp, "c")
        env = dict(os.environ, LD_PRELOAD=preload(shim), LD_LIBRARY_PATH=simcuda,
                   TORCHSEAL_OUTPUT=c_prefix)
        run([c_program], env=env)
        check("C", c_prefix + ".tseal", cli, tmp,
                          ["c: epoch 1", "c: from a worker thread"],
                          ["c: before any CUDA call"], threads=2)
        c_json = json.loads(run([cli, "report", c_prefix + ".tseal", "--format", "json"]).stdout)
        CHECK.true("C: the label marked twice is listed twice",
                   [m["label"] for m in c_json.get("marks", [])].count("c: epoch 1") == 2)

        py_prefix = os.path.join(tmp, "py")
        env = dict(os.environ, LD_PRELOAD=preload(shim), LD_LIBRARY_PATH=simcuda,
                   TORCHSEAL_OUTPUT=py_prefix,
                   PYTHONPATH=os.pathsep.join([helper_dir, examples_py]),
                   PYTHONDONTWRITEBYTECODE="1")
        run([sys.executable, py_program], env=interpreter_env(env))
        check("Python", py_prefix + ".tseal", cli, tmp,
                          ["py: epoch 1", "py: validation \u00e9"],
                          ["py: before any CUDA call"], threads=1)

        # A run without marks keeps its report exactly as before: no key.
        plain = os.path.join(tmp, "plain")
        env = dict(os.environ, LD_PRELOAD=preload(shim), LD_LIBRARY_PATH=simcuda,
                   TORCHSEAL_OUTPUT=plain, PYTHONPATH=examples_py, PYTHONDONTWRITEBYTECODE="1")
        run([sys.executable, "-c", "import toytorch as tt; k = tt.zeros(64)"], env=interpreter_env(env))
        r = run([cli, "report", plain + ".tseal", "--format", "json"])
        CHECK.true("a history without marks has no marks key", "marks" not in json.loads(r.stdout))
        CHECK.true("a history without marks has no Marks: section",
                   "Marks:" not in run([cli, "report", plain + ".tseal"]).stdout)
    return CHECK.finish()


if __name__ == "__main__":
    sys.exit(main())
