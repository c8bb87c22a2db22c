#!/usr/bin/env python3
"""Recording started from Python (torchseal.start/stop, Tracker, %%torchseal)
with real torch on simcuda.

    tracker.py late-cupti | late-got | preloaded | notebook

late-*: the process starts WITHOUT the shim, imports torch and allocates;
then torchseal.start() loads libtorchseal.so. late-cupti: simcuda's CUPTI
takes the late subscription. late-got: CUPTI is busy (SIMCUDA_CUPTI_BUSY=1),
so the loaded libraries' GOT entries are patched. preloaded: the shim was
preloaded; start() opens an interval. In each: the interval's report names
the line that kept memory (held by a list: `reachable`, with the list as its
holder), the memory allocated before the start is not in it, and its free
is counted as pre-existing.

notebook: a real notebook run headless (nbclient + ipykernel) whose
%%torchseal cell keeps tensors in a list shows that line and the holder.
"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as tier  # noqa: E402
from run import BUILD, CHECK, done, load, prerequisites  # noqa: E402

PYDIR = os.path.join(BUILD, "python")

PROGRAM = '''\
import os, sys
import torch
import torchseal

before = torch.ones(1 << 18, device="cuda")     # pre-existing: 1 MiB
older = [torch.ones(1 << 19, device="cuda")]    # pre-existing, kept: 2 MiB
if os.environ.get("PRE_STEPS"):
    # Step scans before the start see 16 MiB more: not the interval's peak.
    big = torch.ones(1 << 22, device="cuda")
    for i in range(2):
        torchseal.step()
    del big
kept = []
torch.cuda.synchronize()
torchseal.start(sys.argv[1])
for i in range(6):
    kept.append(torch.ones(1 << 16, device="cuda") * i)   # KEEP
    scratch = torch.zeros(1 << 16, device="cuda")
    torchseal.step()
del before, scratch
torch.cuda.synchronize()
result = torchseal.stop()
print("stopped", result.leaks, result.json_path)
'''


def keep_line(source):
    return next(i for i, l in enumerate(source.splitlines(), 1) if "# KEEP" in l)


def entries_at(report, script, line):
    out = []
    for key in ("leaks", "reachable"):
        for e in report.get(key) or []:
            if any(f.get("file") == script and f.get("line") == line
                   for f in e.get("python_frames") or []):
                out.append((key, e))
    return out


def holder_names(entry, name):
    return any(name in " ".join(h.get("chain") or []) for h in entry.get("holders") or [])


def scenario_program(mode):
    py = prerequisites()
    with tempfile.TemporaryDirectory(prefix="tseal-tracker-") as tmp:
        script = os.path.join(tmp, "prog.py")
        open(script, "w").write(PROGRAM)
        prefix = os.path.join(tmp, "cell")
        extra = {
            "PYTHONPATH": PYDIR + os.pathsep + tier.EXAMPLES,
            # Per-tensor cudaMalloc/cudaFree: the pre-existing tensor's free
            # reaches the driver inside the interval.
            "PYTORCH_NO_CUDA_MEMORY_CACHING": "1",
            "TORCHSEAL_LOG": "info",
        }
        if mode == "late-got":
            extra["SIMCUDA_CUPTI_BUSY"] = "1"
        shim = mode == "preloaded"
        if shim:
            extra["PRE_STEPS"] = "1"
        p = tier.run(py, [script, prefix], shim=shim, output=os.path.join(tmp, "exit"),
                     extra=extra)
        if not CHECK.true("the program ran to stop() and wrote the interval report",
                          p.returncode == 0 and "stopped" in p.stdout
                          and os.path.exists(prefix + ".json"), p.stdout[-3000:]):
            done()
        report = load(prefix + ".json")
        CHECK.eq("trigger", report.get("trigger"), "stop")
        if mode == "late-got":
            CHECK.true("one line says the GOT entries were patched",
                       "entries of the loaded libraries now reach the hooks" in p.stdout,
                       p.stdout[-2000:])
        if mode == "late-cupti":
            CHECK.eq("backend", report["process"].get("backend"), "cupti")
        line = keep_line(PROGRAM)
        found = entries_at(report, script, line)
        CHECK.true(f"the kept tensors are reported at prog.py:{line}", bool(found),
                   json.dumps(report, indent=1)[:4000])
        total = sum(e["bytes"] for _, e in found)
        CHECK.eq("their bytes (6 x 256 KiB)", total, 6 * (1 << 18))
        CHECK.true("held by the list `kept`", all(holder_names(e, "kept") for _, e in found),
                   [e.get("holders") for _, e in found])
        CHECK.true("held memory is reachable, not leaked", all(k == "reachable" for k, _ in found))
        listed = [e for k in ("leaks", "reachable") for e in report.get(k) or []]
        CHECK.true("the tensor allocated before start() is not listed",
                   not any(e["bytes"] == 1 << 20 for e in listed), [e["bytes"] for e in listed])
        CHECK.true("its free is counted as pre-existing",
                   report["summary"].get("preexisting_frees", 0) >= 1, report["summary"])
        CHECK.eq("no leaks in the interval", report["summary"]["leaked_bytes"], 0)
        txt = open(prefix + ".txt").read()
        CHECK.true("the text report says 'at stop'", "at stop" in txt, txt[-1500:])
        # Memory by role is the interval's: its scan counts the older list
        # `older` (2 MiB, user_held) and says it counts older memory; no
        # split from before the start (16 MiB more live) is its peak.
        scan = report.get("roles_scan") or {}
        CHECK.eq("the stop report's split counts memory from before tracking",
                 scan.get("before_tracking"), True, scan)
        user = ((report.get("roles") or {}).get("user_held") or {}).get("bytes", 0)
        CHECK.true("it counts the list `older`, allocated before the start",
                   user >= 6 * (1 << 18) + (2 << 20), (user, report.get("roles")))
        peak = (report.get("summary") or {}).get("peak_roles_scan") or {}
        CHECK.true("the interval's peak is its own scan's, not one from before the start",
                   not peak or (peak.get("before_tracking") is True
                                and peak.get("live_bytes", 1 << 40) < 16 << 20), peak)
        if shim:
            CHECK.true("the preloaded shim still writes its exit report",
                       os.path.exists(os.path.join(tmp, "exit.json")))
    done()


NOTEBOOK_CELLS = [
    "%load_ext torchseal",
    "import torch\nmodel_out = []\nx = torch.ones(1 << 16, device='cuda')",
    "%%torchseal --output {out}\nfor i in range(5):\n"
    "    model_out.append(x * i)   # KEEP\n",
]


def scenario_notebook():
    py = prerequisites()
    need = ["ipykernel", "nbclient", "nbformat"]
    probe = subprocess.run([py, "-c", "import " + ", ".join(need)], capture_output=True)
    if probe.returncode != 0:
        pip = subprocess.run([py, "-m", "pip", "install", "--quiet", "--prefer-binary"] + need,
                             capture_output=True, text=True, timeout=900)
        if pip.returncode != 0:
            tier.loud_skip("cannot install ipykernel/nbclient from PyPI: " + pip.stderr[-500:])
    with tempfile.TemporaryDirectory(prefix="tseal-nb-") as tmp:
        out = os.path.join(tmp, "cells")
        nb = {
            "nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"cell_type": "code", "metadata": {}, "source": c.format(out=out),
                       "outputs": [], "execution_count": None, "id": f"c{i}"}
                      for i, c in enumerate(NOTEBOOK_CELLS)],
        }
        path = os.path.join(tmp, "leak.ipynb")
        json.dump(nb, open(path, "w"))
        runner = (
            "import sys, nbformat\n"
            "from nbclient import NotebookClient\n"
            "nb = nbformat.read(sys.argv[1], as_version=4)\n"
            "NotebookClient(nb, timeout=300, kernel_name='python3').execute()\n"
            "nbformat.write(nb, sys.argv[1])\n")
        extra = {"PYTHONPATH": PYDIR, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
        # The kernel is a child of this python: it inherits simgpu's
        # environment (simcuda on LD_LIBRARY_PATH), never LD_PRELOAD.
        p = tier.run(py, ["-c", runner, path], extra=extra, timeout=600)
        if not CHECK.true("the notebook ran", p.returncode == 0, p.stdout[-3000:]):
            done()
        ran = json.load(open(path))
        html = "".join(o.get("data", {}).get("text/html", "") if isinstance(
            o.get("data", {}).get("text/html", ""), str) else "".join(o["data"]["text/html"])
            for o in ran["cells"][2]["outputs"])
        CHECK.true("the cell's report is shown as HTML", "torchseal" in html,
                   json.dumps(ran["cells"][2]["outputs"])[:3000])
        CHECK.true("it names the cell's line (cell-1.py:2)", "cell-1.py:2" in html, html[:3000])
        CHECK.true("and the holder, model_out", "model_out" in html, html[:3000])
        report = load(os.path.join(out, "cell-1.json"))
        CHECK.true("P.json of the cell lists 5 x 256 KiB held at that line",
                   sum(e["bytes"] for _, e in entries_at(report, os.path.join(out, "cell-1.py"), 2))
                   == 5 * (1 << 18), json.dumps(report)[:3000])
    done()


def main():
    s = sys.argv[1] if len(sys.argv) > 1 else ""
    if s in ("late-cupti", "late-got", "preloaded"):
        scenario_program(s)
    if s == "notebook":
        scenario_notebook()
    print(f"unknown scenario {s!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
