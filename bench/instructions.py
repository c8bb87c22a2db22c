#!/usr/bin/env python3
"""The hot path's instruction count, deterministic where time is not: one
alloc+free pair of bench/pair_plain (cudaMalloc/cudaFree through simcuda, 30
distinct frames deep) counted by callgrind inside pair_plain's loop (its
`pairs` function, inclusive: the hooks, the recorder and simcuda, not the
service thread), bare and under the shim, as the difference between two run
lengths (so start-up cancels out). At depth 30 also bench/pair_plain_static
(the runtime linked in statically, nvcc's default: the shim records the
driver calls the runtime makes through cuGetProcAddress), as "static-30".

    instructions.py --build-dir B [--reference bench/instructions.json]
                    [--update] [--tolerance 0.10]

Prints `added instructions per pair at depth D: N (reference R, +x%)` per
depth; with --reference, exits 1 when one grew more than the tolerance over
it (the regression guard, `meson test --suite bench`), 77 without valgrind.
--update rewrites the reference from this run.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

DEPTHS = (5, 30)
STATIC_DEPTHS = (30,)
SHORT, LONG = 2000, 6000


def count(build, shim, depth, pairs, tmp, program="pair_plain"):
    out = os.path.join(tmp, "cg.out")
    # meson test sets MALLOC_PERTURB_ (a random byte every malloc fills and
    # every free scrubs), which adds the size of each block the shim or
    # simcuda allocates to the count: a different count per run.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCHSEAL_", "SIMCUDA_", "MALLOC_")) and k != "LD_PRELOAD"}
    env["LD_LIBRARY_PATH"] = os.path.join(build, "simcuda")
    env["SIMCUDA_DEVICES"] = "1"
    if shim:
        env["LD_PRELOAD"] = os.path.join(build, "shim", "libtorchseal.so")
        env["TORCHSEAL_OUTPUT"] = os.path.join(tmp, "run-%p")
        env["TORCHSEAL_LOG"] = "error"
    # Only the loop that makes the pairs, on the thread that makes them: the
    # service thread's work per pair grows with the run's wall time (it wakes
    # every 50 ms), which made a whole-program count move 10% with the load.
    p = subprocess.run(["valgrind", "--tool=callgrind", "--toggle-collect=*::pairs(*",
                        "--callgrind-out-file=" + out,
                        os.path.join(build, "bench", program), "cuda", str(depth), str(pairs)],
                       env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("instructions.py: pair_plain under callgrind failed:\n" + p.stderr[-2000:])
    with open(out) as f:
        m = re.search(r"^summary:\s+(\d+)", f.read(), re.M)
    if not m or int(m.group(1)) == 0:
        sys.exit("instructions.py: callgrind counted nothing inside pair_plain's pairs() "
                 "(was the function renamed?)")
    return int(m.group(1))


def per_pair(build, shim, depth, tmp, program="pair_plain"):
    # pair_plain runs PAIRS plus a tenth (+1) of warm-up.
    n = lambda pairs: pairs + pairs // 10 + 1
    # Under the shim a run's count is the pairs' own plus what the thread's
    # event buffer cost it: the buffer grows by doubling until its first hand
    # over, and the writer's passes, which seal it, come by wall time, so a
    # growth's copy (some 200,000 instructions) lands in one run and not in
    # another (the static program's count moved 9% from run to run). That
    # cost only ever adds: the least of three runs is the pairs' own.
    runs = 3 if shim else 1
    count_of = lambda pairs: min(count(build, shim, depth, pairs, tmp, program)
                                 for _ in range(runs))
    return (count_of(LONG) - count_of(SHORT)) / (n(LONG) - n(SHORT))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--reference")
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--buildtype", default="", help="the build's buildtype (meson)")
    a = ap.parse_args()
    if not shutil.which("valgrind"):
        print("SKIP: valgrind is not installed (scripts/deps installs it)")
        sys.exit(77)
    got = {}
    with tempfile.TemporaryDirectory(prefix="tseal-instr-") as tmp:
        for d in DEPTHS:
            bare = per_pair(a.build_dir, False, d, tmp)
            shim = per_pair(a.build_dir, True, d, tmp)
            got[str(d)] = round(shim - bare)
        for d in STATIC_DEPTHS:
            bare = per_pair(a.build_dir, False, d, tmp, "pair_plain_static")
            shim = per_pair(a.build_dir, True, d, tmp, "pair_plain_static")
            got["static-%d" % d] = round(shim - bare)
    ref = {}
    if a.reference and os.path.exists(a.reference) and not a.update:
        saved = json.load(open(a.reference))
        if a.buildtype and saved.get("buildtype") not in (None, a.buildtype):
            print("SKIP: the reference is for a %s build, this one is %s"
                  % (saved.get("buildtype"), a.buildtype))
            sys.exit(77)
        ref = saved["added_instructions_per_pair"]
    worse = []
    for d, v in got.items():
        line = "added instructions per pair at depth %s: %d" % (d.replace("static-", "") +
                                                               (" (static cudart)" if "static" in d else ""), v)
        if d in ref:
            change = v / ref[d] - 1
            line += " (reference %d, %+.1f%%)" % (ref[d], 100 * change)
            if change > a.tolerance:
                worse.append(d)
        print(line)
    if a.update and a.reference:
        with open(a.reference, "w") as f:
            json.dump({"what": "callgrind instructions the shim adds to one cudaMalloc+cudaFree "
                               "pair of bench/pair_plain (static-D: bench/pair_plain_static), "
                               "counted inside its pairs() loop on the allocating thread "
                               "(bench/instructions.py)",
                       "buildtype": a.buildtype or None,
                       "added_instructions_per_pair": got}, f, indent=2)
            f.write("\n")
        print("wrote " + a.reference)
    if worse:
        print("FAIL: the hot path grew more than %d%% at depth %s; if that is meant, rerun with "
              "--update and commit bench/instructions.json" % (100 * a.tolerance, ", ".join(worse)))
        sys.exit(1)


if __name__ == "__main__":
    main()
