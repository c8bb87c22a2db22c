#!/usr/bin/env python3
"""End to end: a real program under the shim writes P.json and P.tseal.

    history_e2e.py SHIM SIMCUDA_DIR CLI PROGRAM

1. `torchseal report P.tseal --format json` gives the same leak set as P.json
   (same sites, bytes, allocations, kinds, APIs, frames[0]) and the same
   summary counts: one event model, one analysis.
2. The file cut at random points reports without crashing and warns
   "truncated".
3. The first OOM wrote an automatic dump P.1.json with trigger "oom".
4. A foreign file is rejected with a one-line error and exit status 2.
"""
import json
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Failed, load_json, preload, run  # noqa: E402


def leak_key(report):
    return sorted(
        (l["bytes"], l["allocations"], l["kind"], l["api"], l["detected_at"],
         l["frames"][0]["function"], l["frames"][0]["file"], l["frames"][0]["line"])
        for l in report["leaks"])


def main():
    shim, simcuda, cli, program = sys.argv[1:5]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "p")
        env = dict(os.environ, LD_PRELOAD=preload(shim), LD_LIBRARY_PATH=simcuda,
                   TORCHSEAL_OUTPUT=prefix)
        ran = run([program], env, timeout=300)
        if ran.returncode != 0:
            raise Failed("the program failed under the shim\n" + ran.describe())
        direct = load_json(prefix + ".json")
        out = run([cli, "report", prefix + ".tseal", "--format", "json"], None, timeout=300)
        if out.returncode != 0:
            print(out.stderr)
            return 1
        replayed = json.loads(out.stdout)
        if leak_key(direct) != leak_key(replayed):
            failures.append(f"leak sets differ:\n  P.json  {leak_key(direct)}\n  P.tseal {leak_key(replayed)}")
        for k in ("leaked_bytes", "leaked_allocations", "leak_sites", "events", "peak_bytes"):
            if direct["summary"][k] != replayed["summary"][k]:
                failures.append(f"summary.{k}: P.json {direct['summary'][k]} != P.tseal {replayed['summary'][k]}")
        if len(direct["ooms"]) != len(replayed["ooms"]):
            failures.append("OOM count differs")
        if len(direct["invalid_frees"]) != len(replayed["invalid_frees"]):
            failures.append("invalid-free count differs")

        # The program's OOM wrote an automatic dump, with the OOM forensics.
        try:
            oom_dump = load_json(prefix + ".1.json", "automatic OOM dump")
            if oom_dump["trigger"] != "oom" or not oom_dump["ooms"] or not oom_dump["ooms"][0]["top_sites"]:
                failures.append(f"OOM dump: trigger {oom_dump['trigger']!r}, ooms {oom_dump['ooms']!r}")
        except Failed as e:
            failures.append(str(e))

        data = open(prefix + ".tseal", "rb").read()
        rng = random.Random(1234)
        for trial in range(25):
            cut = rng.randrange(16, len(data))
            path = os.path.join(tmp, f"cut{trial}.tseal")
            with open(path, "wb") as f:
                f.write(data[:cut])
            r = run([cli, "report", path], None, timeout=120)
            if r.returncode != 0 or "truncated" not in r.stderr or "SUMMARY: torchseal:" not in r.stdout:
                failures.append(f"cut at {cut}/{len(data)}: exit {r.returncode}, stderr {r.stderr.strip()!r}")

        foreign = os.path.join(tmp, "foreign.tseal")
        with open(foreign, "wb") as f:
            f.write(b"#!/bin/sh\necho not a history file\n")
        r = run([cli, "report", foreign], None, timeout=60)
        lines = r.stderr.strip().splitlines()
        if r.returncode != 2 or len(lines) != 1 or "torchseal: error:" not in lines[0]:
            failures.append(f"foreign file: exit {r.returncode}, stderr {r.stderr!r}")

    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("PASS: history replay matches the in-process report; 25 truncations read; foreign file rejected")
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failed as e:
        print("FAIL:", e)
        sys.exit(1)
