"""(g): wall time of `python3 -c pass`, bare and with the shim preloaded,
interleaved RUNS times each. Prints medians in ms.

usage: startup.py SHIM RUNS
"""
import json
import os
import statistics
import subprocess
import sys
import time

shim, runs = sys.argv[1], int(sys.argv[2])
py = sys.executable
bare_env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
shim_env = dict(bare_env, LD_PRELOAD=shim)
bare, pre = [], []


def once(env):
    t0 = time.perf_counter()
    subprocess.run([py, "-c", "pass"], env=env, check=True)
    return (time.perf_counter() - t0) * 1e3


for _ in range(3):
    once(bare_env), once(shim_env)  # warm the page cache
for _ in range(runs):
    bare.append(once(bare_env))
    pre.append(once(shim_env))
print(json.dumps({"runs": runs, "bare_ms": statistics.median(bare),
                  "shim_ms": statistics.median(pre),
                  "added_ms": statistics.median(pre) - statistics.median(bare),
                  "added_ms_paired_median": statistics.median(p - b for p, b in zip(pre, bare))}))
