#!/usr/bin/env python3
"""Segments mode (the default caching allocator) separates the tensors
Python still holds inside cached segments from free cache
(docs/report-format.md: summary.cached_in_tensors_bytes, cached_free_bytes).

    cached_held.py run | tracker | notebook

The issue-27 example, 8 tensors of 2 MiB kept in a module-level list with no
step, must show `global 'kept'` and its line as `reachable`, with
cached_in_tensors_bytes = 16 MiB, through `torchseal run` (the exit report,
and a dump),
`torchseal.Tracker` (the stop report) and a `%%torchseal` notebook cell (its
stop report, rendered as HTML). Exit 0 pass, 1 fail, 77 skip.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as tier  # noqa: E402
from holders import chains, run_cli, show  # noqa: E402
from run import BUILD, CHECK, done, load, prerequisites  # noqa: E402

PYDIR = os.path.join(BUILD, "python")
HELD = 8 * 512 * 1024 * 4  # the 8 tensors of the example
KEEP = 'kept = [torch.randn(512, 1024, device="cuda") * 2 for _ in range(8)]  # KEEP\n'

PROGRAM = "import torch\nimport torchseal\n" + KEEP + "torchseal.dump('held')\n"

TRACKED = ("import sys\nimport torch\nimport torchseal\n"
           "with torchseal.Tracker(sys.argv[1]):\n    " + KEEP +
           "print('tracked', flush=True)\n")


def keep_line(source):
    return next(i for i, l in enumerate(source.splitlines(), 1) if "# KEEP" in l)


def check_report(r, script, line, where):
    """The held tensors: reachable at the KEEP line, held by `kept`, and the
    cache split."""
    s = r["summary"]
    show("reachable", r.get("reachable") or [])
    print(f"  summary: cached {s.get('cached_bytes')}, in tensors "
          f"{s.get('cached_in_tensors_bytes')}, free {s.get('cached_free_bytes')}")
    CHECK.eq(f"{where}: cached_in_tensors_bytes (8 x 2 MiB)", s.get("cached_in_tensors_bytes"), HELD)
    CHECK.eq(f"{where}: cached_free_bytes is the rest of cached_bytes", s.get("cached_free_bytes"),
             s["cached_bytes"] - HELD)
    CHECK.eq(f"{where}: nothing leaked", s["leaked_bytes"], 0)
    at_line = [e for e in r.get("reachable") or []
               if any(f.get("file") == script and f.get("line") == line
                      for f in e.get("python_frames") or [])]
    CHECK.true(f"{where}: reachable at {os.path.basename(script)}:{line}", bool(at_line),
               json.dumps(r.get("reachable"))[:3000])
    roots = [c[0] for c in chains(at_line)]
    CHECK.true(f"{where}: held by global 'kept' (list): {roots}",
               any(c.startswith("global 'kept' (list) in ") for c in roots))
    CHECK.eq(f"{where}: its bytes", sum(e["bytes"] for e in at_line), HELD)


def scenario_run():
    py = prerequisites()
    with tempfile.TemporaryDirectory(prefix="tseal-cached-") as tmp:
        p, out = run_cli(py, PROGRAM, tmp, "kept", "segments", exit_code=23)
        CHECK.eq("exit status under --exit-code 23 (held, not leaked)", p.returncode, 0)
        if not CHECK.true("report written", os.path.exists(out + ".json")):
            done()
        script = os.path.join(tmp, "kept.py")
        check_report(load(out + ".json"), script, keep_line(PROGRAM), "torchseal run")
        dumps = tier.dumps_of(out)
        if CHECK.eq("one dump", len(dumps), 1):
            check_report(load(dumps[0]), script, keep_line(PROGRAM), "torchseal.dump()")
        txt = open(out + ".txt").read()
        CHECK.true("P.txt: Held by: global 'kept'", "Held by: global 'kept' (list) in kept.py" in txt,
                   txt[-2000:])
        CHECK.true("P.txt: the split of the cache", f"of which {HELD} byte(s) in tensors" in txt)
    done()


def scenario_tracker():
    py = prerequisites()
    with tempfile.TemporaryDirectory(prefix="tseal-cached-") as tmp:
        script = os.path.join(tmp, "tracked.py")
        open(script, "w").write(TRACKED)
        prefix = os.path.join(tmp, "interval")
        p = tier.run(py, [script, prefix], shim=True, output=os.path.join(tmp, "exit"),
                     extra={"PYTHONPATH": PYDIR + os.pathsep + tier.EXAMPLES})
        if not CHECK.true("the program ran and wrote the stop report",
                          p.returncode == 0 and os.path.exists(prefix + ".json"), p.stdout[-3000:]):
            done()
        r = load(prefix + ".json")
        CHECK.eq("trigger", r.get("trigger"), "stop")
        check_report(r, script, keep_line(TRACKED), "Tracker")
    done()


def scenario_notebook():
    py = prerequisites()
    need = ["ipykernel", "nbclient", "nbformat"]
    if subprocess.run([py, "-c", "import " + ", ".join(need)], capture_output=True).returncode:
        pip = subprocess.run([py, "-m", "pip", "install", "--quiet", "--prefer-binary"] + need,
                             capture_output=True, text=True, timeout=900)
        if pip.returncode != 0:
            tier.loud_skip("cannot install ipykernel/nbclient from PyPI: " + pip.stderr[-500:])
    with tempfile.TemporaryDirectory(prefix="tseal-cached-nb-") as tmp:
        out = os.path.join(tmp, "cells")
        cells = ["%load_ext torchseal",
                 "%%torchseal --output " + out + "\nimport torch\n" + KEEP]
        nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
              "cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [],
                         "execution_count": None, "id": f"c{i}"} for i, c in enumerate(cells)]}
        path = os.path.join(tmp, "kept.ipynb")
        json.dump(nb, open(path, "w"))
        runner = ("import sys, nbformat\nfrom nbclient import NotebookClient\n"
                  "nb = nbformat.read(sys.argv[1], as_version=4)\n"
                  "NotebookClient(nb, timeout=300, kernel_name='python3').execute()\n"
                  "nbformat.write(nb, sys.argv[1])\n")
        # The caching allocator stays on: segments mode, the default.
        p = tier.run(py, ["-c", runner, path], extra={"PYTHONPATH": PYDIR}, timeout=600)
        if not CHECK.true("the notebook ran", p.returncode == 0, p.stdout[-3000:]):
            done()
        ran = json.load(open(path))
        html = "".join("".join(o.get("data", {}).get("text/html", ""))
                       for o in ran["cells"][1]["outputs"])
        CHECK.true("the cell's HTML names the holder `kept`", "global &#x27;kept&#x27;" in html
                   or "global 'kept'" in html, html[:3000])
        CHECK.true("and the cell's line (cell-1.py:2)", "cell-1.py:2" in html, html[:3000])
        check_report(load(os.path.join(out, "cell-1.json")), os.path.join(out, "cell-1.py"), 2,
                     "%%torchseal")
    done()


def main():
    s = sys.argv[1] if len(sys.argv) > 1 else ""
    t0 = time.time()
    try:
        {"run": scenario_run, "tracker": scenario_tracker,
         "notebook": scenario_notebook}.get(s, lambda: None)()
    finally:
        print(f"({s}: {time.time() - t0:.1f}s)")
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
