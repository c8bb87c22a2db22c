#!/usr/bin/env python3
"""A growing autograd graph is a finding (docs/holders.md, "Growing autograd
graphs"): `total_loss += loss` with `loss.backward()` every step grows the
GPU by one scalar at most, but the graph `total_loss` holds gains the
step's nodes every step.

    graph_growth.py segments | tensors

The leaky twin has a `growth` entry of kind "autograd-graph" held by
`global 'total_loss'`, with `graph_nodes`, `graph_nodes_per_step`, a
loss-accumulation hint at the `+=` line, a P.txt section, and
`torchseal check` fails on it; the fixed twin (`loss.item()`) has none and
passes. Exit 0 pass, 1 fail, 77 skip.
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from holders import run_cli  # noqa: E402
from run import CHECK, CLI, done, load, prerequisites  # noqa: E402

SEED = r'''
import torch
import torchseal
from _common import batch, setup
model, opt = setup()
total_loss = 0
for i in range(20):
    x, t = batch()
    loss = ((model(x) - t) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    total_loss += ADDED  # LEAK
    torchseal.step()
print("mean loss", float(total_loss) / 20)
'''


def scenario(mode):
    py = prerequisites()
    with tempfile.TemporaryDirectory(prefix="tseal-graph-") as tmp:
        reports = {}
        for variant, added in (("leaky", "loss"), ("fixed", "loss.item()")):
            source = SEED.replace("ADDED", added)
            p, out = run_cli(py, source, tmp, variant, mode, exit_code=23)
            CHECK.eq(f"{variant} exits 0 under --exit-code 23 (nothing leaked)", p.returncode, 0)
            if not CHECK.true(f"{variant} report written", os.path.exists(out + ".json")):
                continue
            reports[variant] = (load(out + ".json"), out, source)
        if "leaky" in reports:
            r, out, source = reports["leaky"]
            line = next(i for i, l in enumerate(source.splitlines(), 1) if "# LEAK" in l)
            graphs = [g for g in r.get("growth") or [] if g.get("kind") == "autograd-graph"]
            for g in graphs:
                print(f"  graph: {g.get('graph_nodes')} nodes, {g.get('graph_nodes_per_step')}/step, "
                      f"{g.get('steps')} scans, hint {g.get('hint')}")
                for h in g.get("holders") or []:
                    print(f"    held by: {' -> '.join(h['chain'])}")
            if CHECK.eq("leaky: one growing autograd graph", len(graphs), 1):
                g = graphs[0]
                chain = (g.get("holders") or [{}])[0].get("chain") or []
                CHECK.eq("held by the global", chain[:1], ["global 'total_loss' (Tensor) in leaky.py"])
                CHECK.true(f"graph_nodes grows at least one node a step ({g.get('graph_nodes_per_step')})",
                           (g.get("graph_nodes_per_step") or 0) >= 1)
                CHECK.true(f"graph_nodes ({g.get('graph_nodes')}) is the whole graph, more than 20",
                           (g.get("graph_nodes") or 0) > 20)
                hint = g.get("hint") or {}
                CHECK.eq("hint kind", hint.get("kind"), "loss-accumulation")
                CHECK.eq("hint at the += line", (os.path.basename(hint.get("file") or ""),
                                                 hint.get("line")), ("leaky.py", line))
            txt = open(out + ".txt").read()
            CHECK.true("P.txt has the graph's section", "Growing autograd graph:" in txt, txt[-2000:])
            c = subprocess.run([CLI, "check", out + ".json"], capture_output=True, text=True)
            CHECK.true(f"torchseal check fails on it (exit {c.returncode})",
                       c.returncode != 0 and "autograd graph(s) growing" in c.stdout + c.stderr,
                       c.stdout + c.stderr)
        if "fixed" in reports:
            r, out, _ = reports["fixed"]
            graphs = [g for g in r.get("growth") or [] if g.get("kind") == "autograd-graph"]
            CHECK.eq("fixed: no growing graph", graphs, [])
            c = subprocess.run([CLI, "check", out + ".json"], capture_output=True, text=True)
            CHECK.eq("fixed: torchseal check passes", c.returncode, 0, c.stdout + c.stderr)
    done()


def main():
    s = sys.argv[1] if len(sys.argv) > 1 else ""
    t0 = time.time()
    try:
        if s in ("segments", "tensors"):
            scenario(s)
    finally:
        print(f"({s}: {time.time() - t0:.1f}s)")
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
