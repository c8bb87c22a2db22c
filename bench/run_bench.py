#!/usr/bin/env python3
"""torchseal benchmark driver (bench/RESULTS.md explains every figure).

Runs every measurement of the suite in one go, so all figures come from the
same run on the same machine, and writes results.json plus the generated
section of RESULTS.md.

  run_bench.py --build-dir build-bench [--quick | --smoke | --longrun] [--out-dir DIR]
               [--results-json F] [--results-md F]

--smoke is CI's quick mode (meson test --suite bench): tiny sizes, every
benchmark still runs, nothing about timing is asserted, and nothing is written
outside --out-dir.

--longrun runs only (h), the long run under a history cap (10^9 events under
1 GiB by default; --longrun-events N and --longrun-limit SIZE for a smaller
check), then the same workload with a large live set and repeated OOMs
(--hold, --ooms) under its own cap: bytes on disk against the cap, the base
checkpoint against the live set. It writes its own generated section of RESULTS.md and F-longrun.json
for --results-json F, so the two runs never overwrite each other's figures.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from harness import bare_root  # noqa: E402
from harness.tseal import CHUNK_HEADER, chunks, varint  # noqa: E402

MODES = {
    # rounds: interleaved bare/shim repetitions (medians taken over them)
    "full": dict(rounds=5, min_time=0.3, py_pairs=100000, py_rounds=5, mixed=1000000,
                 big=10000000, live=1000000, startup_runs=100),
    "quick": dict(rounds=3, min_time=0.1, py_pairs=30000, py_rounds=3, mixed=1000000,
                  big=2000000, live=1000000, startup_runs=30),
    "smoke": dict(rounds=1, min_time=0.001, py_pairs=200, py_rounds=1, mixed=2000,
                  big=5000, live=2000, startup_runs=2,
                  longrun=dict(events=200000, steps=168, threads=2, sites=200, limit="1MiB"),
                  longrun_live=dict(events=300000, steps=100, threads=2, sites=200, hold=20000,
                                    ooms=6, limit="4MiB")),
    # (h): a "week" of 1680 steps, so one "hour" (1/168 of the run) is 10 steps.
    "longrun": dict(longrun=dict(events=10**9, steps=1680, threads=4, sites=1000, limit="1GiB"),
                    # (h) too: a large live set and OOMs the program survives,
                    # under a cap that holds a few times its checkpoint.
                    longrun_live=dict(events=10**8, steps=1680, threads=4, sites=1000,
                                      hold=1000000, ooms=24, limit="256MiB")),
}

TARGETS = {
    "a": "default configuration's added cost at depth 30 <= 0.5x heaptrack's, wall time",
    "b": "Python frames add <= 1 us per event",
    "c": "8 threads >= 1.5x single-thread event rate",
    "d": "<= 16 bytes per event before compression",
    "e": "report >= 5M events/s, RSS bounded by live state",
    "f": "<= 96 bytes per live allocation",
    "g": "< 5 ms added startup for a process that never calls CUDA",
    "p": "plain program (bench/pair_plain, no harness; and bench/pair_plain_static, the "
         "runtime linked in statically): default's added cost at depth 30 <= 0.25x "
         "heaptrack's, wall and CPU time",
    "i": "in a bare root (no libunwind, no libdw), added cost at depth 30 within 1.2x of "
         "the normal machine's and <= 0.5x heaptrack's, wall and CPU time",
}
# Sections each mode runs by default (--only picks a subset for development).
SECTIONS = {"full": "abcdefgp", "quick": "abcdefgp", "smoke": "abcdefghp", "longrun": "h"}


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Ctx:
    def __init__(self, args):
        self.args = args
        self.mode = ("smoke" if args.smoke else "quick" if args.quick
                     else "longrun" if args.longrun else "full")
        self.p = MODES[self.mode]
        b = os.path.abspath(args.build_dir)
        self.build = b
        self.shim = os.path.join(b, "shim", "libtorchseal.so")
        self.simcuda = os.path.join(b, "simcuda")
        self.cli = os.path.join(b, "report", "torchseal")
        self.bench_cuda = os.path.join(b, "bench", "bench_cuda")
        self.bench_malloc = os.path.join(b, "bench", "bench_malloc")
        self.pair_plain = os.path.join(b, "bench", "pair_plain")
        # The same program with the runtime linked in statically (optional:
        # an older build has none).
        self.pair_plain_static = os.path.join(b, "bench", "pair_plain_static")
        self.workload = os.path.join(b, "bench", "bench_workload")
        self.here = os.path.dirname(os.path.abspath(__file__))
        self.out = os.path.abspath(args.out_dir)
        self.tmp = os.path.join(self.out, "tmp")
        shutil.rmtree(self.tmp, ignore_errors=True)
        os.makedirs(self.tmp, exist_ok=True)
        self.heaptrack = shutil.which("heaptrack")
        self.time_v = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None
        for f in (self.shim, self.cli, self.bench_cuda, self.bench_malloc, self.workload,
                  self.pair_plain):
            if not os.path.exists(f):
                sys.exit(f"run_bench: missing {f} (build first)")
        self.seq = 0

    def env(self, shim=False, backend="hooks", python="auto", output=None, extra=None):
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("TORCHSEAL_", "SIMCUDA_")) and k != "LD_PRELOAD"}
        e["LD_LIBRARY_PATH"] = self.simcuda
        e["SIMCUDA_DEVICES"] = "1"
        if shim:
            e["LD_PRELOAD"] = self.shim
            if backend != "default":  # what users get: TORCHSEAL_BACKEND unset
                e["TORCHSEAL_BACKEND"] = backend
            e["TORCHSEAL_PYTHON"] = python
            e["TORCHSEAL_LOG"] = "error"
            self.seq += 1
            e["TORCHSEAL_OUTPUT"] = output or os.path.join(self.tmp, f"run{self.seq}-%p")
        if extra:
            e.update(extra)
        return e

    def clean_tmp(self):
        for f in glob.glob(os.path.join(self.tmp, "run*")):
            os.unlink(f)


def run(cmd, env, **kw):
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"run_bench: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r


def gbench(ctx, binary, bfilter, env, wrapper=()):
    out = os.path.join(ctx.tmp, "gb.json")
    cmd = list(wrapper) + [binary, f"--benchmark_filter={bfilter}",
                           f"--benchmark_min_time={ctx.p['min_time']}",
                           f"--benchmark_out={out}", "--benchmark_out_format=json"]
    run(cmd, env, cwd=ctx.tmp)
    with open(out) as f:
        data = json.load(f)
    res = {}
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            sys.exit(f"run_bench: {b['name']}: {b.get('error_message')}")
        res[b["name"]] = b
    return res


def ns_per_iter(b):
    # CPU time of the benchmarking thread: robust against other load on the
    # machine, but blind to work moved to other threads or processes (the
    # shim's history writer, heaptrack's interpreter).
    assert b["time_unit"] == "ns"
    return b["cpu_time"]


def wall_ns_per_iter(b):
    # Wall time of the user's loop: what a user waits for.
    assert b["time_unit"] == "ns"
    return b["real_time"]


def median(xs):
    return statistics.median(xs) if xs else float("nan")


# ---------------------------------------------------------------- (a), (c)
def bench_pairs(ctx):
    depths = [5, 30, 80]
    # "default" is the shim with TORCHSEAL_BACKEND unset: what users get;
    # "bare_root" the same on a machine without libunwind and libdw (the
    # bundled copies in use; tests/harness/bare_root.py), when one can be made.
    cfgs = ["bare", "default", "hooks", "cupti"]
    no_bare_root = bare_root.unavailable()
    if no_bare_root:
        log(f"(i) skipped: {no_bare_root}")
    else:
        cfgs.append("bare_root")
    clocks = ("cpu", "wall")
    per = {k: {c: {d: [] for d in depths} for c in cfgs} for k in clocks}
    mal = {k: {c: {d: [] for d in depths} for c in ("bare", "heaptrack")} for k in clocks}
    thr = {c: {t: [] for t in (1, 2, 4, 8)} for c in ("bare", "hooks")}

    def take(into, res, name):
        for d in depths:
            b = res[f"{name}/depth:{d}"]
            into["cpu"][d].append(ns_per_iter(b))
            into["wall"][d].append(wall_ns_per_iter(b))

    for rnd in range(ctx.p["rounds"]):
        log(f"(a)/(c) round {rnd + 1}/{ctx.p['rounds']}")
        # Each round runs every configuration once, heaptrack's between them,
        # so the machine's load changes hit them alike.
        order = cfgs[rnd % len(cfgs):] + cfgs[:rnd % len(cfgs)]
        for i, c in enumerate(order):
            env = ctx.env(shim=c != "bare", backend="default" if c == "bare_root" else c)
            wrapper = bare_root.wrap([]) if c == "bare_root" else ()
            res = gbench(ctx, ctx.bench_cuda, "BM_CudaPair/", env, wrapper)
            take({k: per[k][c] for k in clocks}, res, "BM_CudaPair")
            ctx.clean_tmp()
            if i == 1:
                res = gbench(ctx, ctx.bench_malloc, "BM_MallocPair/", ctx.env())
                take({k: mal[k]["bare"] for k in clocks}, res, "BM_MallocPair")
            if i == 2 and ctx.heaptrack:
                wrapper = [ctx.heaptrack, "-o", os.path.join(ctx.tmp, "ht")]
                res = gbench(ctx, ctx.bench_malloc, "BM_MallocPair/", ctx.env(), wrapper)
                take({k: mal[k]["heaptrack"] for k in clocks}, res, "BM_MallocPair")
                for f in glob.glob(os.path.join(ctx.tmp, "ht*")):
                    os.unlink(f)
        for c in ("bare", "hooks"):
            res = gbench(ctx, ctx.bench_cuda, "BM_CudaPairThreads", ctx.env(shim=c != "bare"))
            for t in (1, 2, 4, 8):
                b = res[f"BM_CudaPairThreads/real_time/threads:{t}"]
                thr[c][t].append(b["items_per_second"])
            ctx.clean_tmp()
    a = {"depths": {}, "raw": {"cuda": per, "malloc": mal}, "bare_root": no_bare_root or "measured"}
    for d in depths:
        row = {}
        for k, sfx in (("cpu", ""), ("wall", "_wall")):
            bare = median(per[k]["bare"][d])
            row[f"cuda_bare_ns{sfx}"] = bare
            for c in cfgs[1:]:
                row[f"{c}_ns{sfx}"] = median(per[k][c][d])
                row[f"{c}_added_ns{sfx}"] = median(per[k][c][d]) - bare
            row[f"malloc_bare_ns{sfx}"] = median(mal[k]["bare"][d])
            if mal[k]["heaptrack"][d]:
                row[f"heaptrack_ns{sfx}"] = median(mal[k]["heaptrack"][d])
                row[f"heaptrack_added_ns{sfx}"] = row[f"heaptrack_ns{sfx}"] - row[f"malloc_bare_ns{sfx}"]
                for c in cfgs[1:]:
                    row[f"{c}_ratio{sfx}"] = row[f"{c}_added_ns{sfx}"] / row[f"heaptrack_added_ns{sfx}"]
        a["depths"][str(d)] = row
    c = {"threads": {}}
    for t in (1, 2, 4, 8):
        c["threads"][str(t)] = {"bare_events_per_s": median(thr["bare"][t]),
                                "shim_events_per_s": median(thr["hooks"][t])}
    # Scaling is taken per round (1 and 8 threads run back to back in one
    # process) and the median of those ratios reported: this machine's load
    # changes between rounds more than within one.
    def scaling(cfg):
        return median([eight / one for one, eight in zip(thr[cfg][1], thr[cfg][8])])
    c["scaling_8_over_1"] = scaling("hooks")
    # The simulator's own scaling bounds what any hot path above it can show.
    c["bare_scaling_8_over_1"] = scaling("bare")
    c["cores"] = os.cpu_count()
    return a, c


# ---------------------------------------------------------------- (p)
PLAIN_PAIRS = {"full": 200000, "quick": 100000, "smoke": 2000}


def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def plain_run(ctx, argv, env, wrapper=()):
    """pair_plain's own figures, and the CPU seconds of every process the
    run waited for (heaptrack's interpreter too, not only the program)."""
    c0 = children_cpu_s()
    r = run(list(wrapper) + argv, env, cwd=ctx.tmp)
    all_cpu = children_cpu_s() - c0
    m = re.search(r"wall_ns_per_pair=([\d.]+) cpu_ns_per_pair=([\d.]+)", r.stdout)
    if not m:
        sys.exit(f"run_bench: pair_plain printed no figures: {r.stdout[-500:]}")
    return float(m.group(1)), float(m.group(2)), all_cpu


def pairs_run(n):
    return n + n // 10 + 1  # pair_plain's warm-up tenth, then the timed pairs


def bench_plain(ctx):
    """The pair as a plain program sees it: bench/pair_plain, D distinct
    functions deep, cudaMalloc(256)/cudaFree bare and under the shim (the
    default configuration), malloc/free bare and under heaptrack, all in the
    same interleaved rounds."""
    depths = (5, 30, 80)
    pairs = PLAIN_PAIRS.get(ctx.mode, 100000)
    cfgs = ["cuda_bare", "cuda_shim", "malloc_bare"] + (["malloc_heaptrack"] if ctx.heaptrack else [])
    # nvcc links the runtime statically by default: the shim then records the
    # driver calls the runtime makes, under the runtime's optimised frames.
    static = os.path.exists(ctx.pair_plain_static)
    if static:
        cfgs += ["static_bare", "static_shim"]
    programs = {"static_bare": ctx.pair_plain_static, "static_shim": ctx.pair_plain_static}
    raw = {c: {d: {"wall": [], "cpu": []} for d in depths} for c in cfgs}
    # The CPU time of every process of the tool, per pair, at the acceptance
    # depth: heaptrack hands its records to heaptrack_interpret, a process
    # of its own that pair_plain's CPU clock never sees, while the shim's
    # writer is a thread of the program and is counted. A second run with
    # three times the pairs, less the first, leaves the pairs alone (start,
    # warm-up and exit cancel).
    all_depth = 30
    all_cfgs = [c for c in cfgs if not c.startswith("static")]
    all_cpu = {c: [] for c in all_cfgs}
    for rnd in range(ctx.p["rounds"]):
        log(f"(p) round {rnd + 1}/{ctx.p['rounds']}")
        order = cfgs[rnd % len(cfgs):] + cfgs[:rnd % len(cfgs)]
        for c in order:
            for d in depths:
                mode = "malloc" if c.startswith("malloc") else "cuda"
                shim = c.endswith("_shim")
                prog = programs.get(c, ctx.pair_plain)
                env = ctx.env(shim=shim, backend="default")
                wrapper = [ctx.heaptrack, "-o", os.path.join(ctx.tmp, "ht")] if c == "malloc_heaptrack" else ()
                w, cpu, all1 = plain_run(ctx, [prog, mode, str(d), str(pairs)], env, wrapper)
                raw[c][d]["wall"].append(w)
                raw[c][d]["cpu"].append(cpu)
                for f in glob.glob(os.path.join(ctx.tmp, "ht*")):
                    os.unlink(f)
                ctx.clean_tmp()
                if d == all_depth and c in all_cpu:
                    env = ctx.env(shim=shim, backend="default")
                    _, _, all3 = plain_run(ctx, [ctx.pair_plain, mode, str(d), str(3 * pairs)], env,
                                           wrapper)
                    all_cpu[c].append((all3 - all1) * 1e9 / (pairs_run(3 * pairs) - pairs_run(pairs)))
                    for f in glob.glob(os.path.join(ctx.tmp, "ht*")):
                        os.unlink(f)
                    ctx.clean_tmp()
    out = {"pairs": pairs, "depths": {}, "raw": raw}
    for d in depths:
        row = {}
        for k in ("wall", "cpu"):
            for c in cfgs:
                row[f"{c}_ns_{k}"] = median(raw[c][d][k])
            row[f"shim_added_ns_{k}"] = row[f"cuda_shim_ns_{k}"] - row[f"cuda_bare_ns_{k}"]
            if static:
                row[f"static_added_ns_{k}"] = row[f"static_shim_ns_{k}"] - row[f"static_bare_ns_{k}"]
                if ctx.heaptrack:
                    ht = row[f"malloc_heaptrack_ns_{k}"] - row[f"malloc_bare_ns_{k}"]
                    row[f"static_ratio_{k}"] = row[f"static_added_ns_{k}"] / ht
            if ctx.heaptrack:
                row[f"heaptrack_added_ns_{k}"] = row[f"malloc_heaptrack_ns_{k}"] - row[f"malloc_bare_ns_{k}"]
                row[f"ratio_{k}"] = row[f"shim_added_ns_{k}"] / row[f"heaptrack_added_ns_{k}"]
                # Each round's own ratio, then their median: a stretch where
                # the machine runs slow (a busy neighbour on a VM) slows every
                # configuration of that round, and cancels out of its ratio.
                r = raw
                per_round = []
                for i in range(len(r["cuda_shim"][d][k])):
                    ht = r["malloc_heaptrack"][d][k][i] - r["malloc_bare"][d][k][i]
                    if ht > 0:
                        per_round.append((r["cuda_shim"][d][k][i] - r["cuda_bare"][d][k][i]) / ht)
                if per_round:
                    row[f"round_ratio_{k}"] = median(per_round)
        if d == all_depth and all(all_cpu[c] for c in all_cfgs):
            for c in all_cfgs:
                row[f"{c}_ns_cpu_all"] = median(all_cpu[c])
            row["shim_added_ns_cpu_all"] = row["cuda_shim_ns_cpu_all"] - row["cuda_bare_ns_cpu_all"]
            if ctx.heaptrack:
                row["heaptrack_added_ns_cpu_all"] = (row["malloc_heaptrack_ns_cpu_all"] -
                                                     row["malloc_bare_ns_cpu_all"])
                if row["heaptrack_added_ns_cpu_all"] > 0:
                    row["ratio_cpu_all"] = row["shim_added_ns_cpu_all"] / row["heaptrack_added_ns_cpu_all"]
        out["depths"][str(d)] = row
    out["all_cpu_raw"] = all_cpu
    return out


# ---------------------------------------------------------------- (b)
def bench_python(ctx):
    script = os.path.join(ctx.here, "py_pairs.py")
    cfgs = {"bare": dict(shim=False), "off": dict(shim=True, python="off"),
            "auto": dict(shim=True, python="auto")}
    vals = {k: [] for k in cfgs}
    for rnd in range(ctx.p["py_rounds"]):
        log(f"(b) round {rnd + 1}/{ctx.p['py_rounds']}")
        for k, kw in cfgs.items():
            r = run([sys.executable, script, "30", str(ctx.p["py_pairs"]), "3"], ctx.env(**kw))
            vals[k].append(json.loads(r.stdout.strip().splitlines()[-1])["ns_per_pair"])
            ctx.clean_tmp()
    m = {k: median(v) for k, v in vals.items()}
    return {"python_depth": 30, "bare_ns_per_pair": m["bare"], "shim_python_off_ns_per_pair": m["off"],
            "shim_python_auto_ns_per_pair": m["auto"],
            "python_frames_ns_per_event": (m["auto"] - m["off"]) / 2,
            "python_frames_ns_per_alloc": m["auto"] - m["off"],
            "shim_total_added_ns_per_pair": m["auto"] - m["bare"], "raw": vals}


# ---------------------------------------------------------------- (d), (e)
def tseal_breakdown(path):
    names = {1: "process", 2: "modules", 3: "stacks", 4: "pystacks", 5: "events", 6: "pass",
             7: "symbols", 8: "end"}
    out = {n: 0 for n in names.values()}
    events = 0
    with open(path, "rb") as f:
        data = f.read()
    for typ, payload in chunks(data):
        name = names.get(typ, f"type{typ}")
        out[name] = out.get(name, 0) + CHUNK_HEADER + len(payload)
        if typ == 5:
            events += varint(payload, 12)[0]  # after u32 tid, u64 base time
    return {"file_bytes": len(data), "chunk_bytes": out, "events_in_file": events}


def make_history(ctx, n, name):
    prefix = os.path.join(ctx.out, name)
    for f in glob.glob(prefix + ".*"):
        os.unlink(f)
    env = ctx.env(shim=True, output=prefix, extra={"SIMCUDA_MEMORY_BYTES": "256GiB"})
    t0 = time.perf_counter()
    r = run([ctx.workload, "mixed", str(n)], env)
    wall = time.perf_counter() - t0
    info = json.loads(r.stdout.strip().splitlines()[-1])
    info["wall_s"] = wall
    info["path"] = prefix + ".tseal"
    return info


def bench_history_size(ctx):
    log(f"(d) mixed workload, {ctx.p['mixed']} events")
    info = make_history(ctx, ctx.p["mixed"], "mixed")
    bd = tseal_breakdown(info["path"])
    ev = bd["events_in_file"]
    return {"workload": info, **bd,
            "bytes_per_event": bd["file_bytes"] / ev,
            "event_chunk_bytes_per_event": bd["chunk_bytes"]["events"] / ev}, info


def timed(ctx, cmd, env, stdout_path=None):
    """Wall seconds and peak RSS (KiB) of a child (its stdout to stdout_path)."""
    if stdout_path:
        with open(stdout_path, "w") as out:
            return timed_to(ctx, cmd, env, out)
    return timed_to(ctx, cmd, env, subprocess.DEVNULL)


def timed_to(ctx, cmd, env, out):
    if ctx.time_v:
        tf = os.path.join(ctx.tmp, "time.txt")
        t0 = time.perf_counter()
        r = subprocess.run([ctx.time_v, "-v", "-o", tf] + cmd, env=env, stdout=out,
                           stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        if r.returncode not in (0, 1):  # report exits 1 when leaks are found
            sys.exit(f"run_bench: {' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
        txt = open(tf).read()
        rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", txt).group(1))
        return wall, rss
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    return wall, max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


# ---------------------------------------------------------------- (h)
def history_files(prefix):
    """A (capped) history's files: main file, segments and base checkpoints."""
    return sorted(glob.glob(prefix + ".tseal") + glob.glob(prefix + ".tseal.[0-9]*"))


def leaks_by_function(entries):
    out = {}
    for e in entries:
        fn = e["frames"][0]["function"] if e["frames"] else "?"
        b, a = out.get(fn, (0, 0))
        out[fn] = (b + e["bytes"], a + e["allocations"])
    return out


def bench_longrun(ctx):
    p = ctx.p["longrun"]
    log(f"(h) long run: {p['events']} events, {p['steps']} steps, {p['threads']} threads, "
        f"cap {p['limit']}")
    prefix = os.path.join(ctx.out, "longrun")
    for f in glob.glob(prefix + ".*"):
        os.unlink(f)
    ledger_path = prefix + ".ledger.json"
    env = ctx.env(shim=True, output=prefix,
                  extra={"SIMCUDA_MEMORY_BYTES": "256GiB", "TORCHSEAL_HISTORY_LIMIT": p["limit"]})
    t0 = time.perf_counter()
    r = run([ctx.workload, "steps", str(p["events"]), "--seed", "1", "--threads", str(p["threads"]),
             "--sites", str(p["sites"]), "--steps", str(p["steps"]), "--ledger", ledger_path], env)
    exited = time.time()
    wall = time.perf_counter() - t0
    info = json.loads(r.stdout.strip().splitlines()[-1])
    with open(ledger_path) as f:
        ledger = json.load(f)
    files = history_files(prefix)
    res = {"params": p, "workload_wall_s": wall, "events": ledger["events"],
           "events_per_s": ledger["events"] / wall,
           # From the last torchseal_step() to the process's end: draining
           # the live pools, then the exit report and the history's close.
           "exit_s": exited - info["last_step_unix_s"],
           "exit_after_drain_s": exited - info["drained_unix_s"],
           "disk_bytes": sum(os.path.getsize(f) for f in files), "files": len(files)}
    # One "hour" of the "week": 1/168 of the steps. At the end and before
    # the warm-up mark (kept in full detail under a cap: the most recent
    # segments, and those around a mark), in the middle (whose detail a cap
    # drops first); then the whole run.
    hour = max(1, p["steps"] // 168)
    mid = p["steps"] // 2
    marked = next(m["after_step"] for m in ledger["marks"] if m["label"] == "warm-up done")
    queries = {"last_hour": ["--steps", f"{p['steps'] - hour + 1}..{p['steps']}"],
               "hour_before_a_mark": ["--steps", f"{max(1, marked - hour + 1)}..{marked}"],
               "middle_hour": ["--steps", f"{mid + 1}..{mid + hour}"],
               "whole_run": []}
    cli_env = ctx.env()
    helptext = subprocess.run([ctx.cli, "report", "--help"], env=cli_env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True).stdout
    if "--steps" not in helptext:  # a reader without windows: the whole run only
        log("(h) this torchseal report reads no windows (--steps)")
        queries = {"whole_run": []}
    res["reports"] = {}
    for name, extra in queries.items():
        log(f"(h) torchseal report {' '.join(extra) or '(whole run)'}")
        out = os.path.join(ctx.tmp, f"longrun-{name}.json")
        w, rss = timed(ctx, [ctx.cli, "report", prefix + ".tseal", "--format", "json"] + extra,
                       cli_env, stdout_path=out)
        with open(out) as f:
            rep = json.load(f)
        res["reports"][name] = {"args": extra, "wall_s": w, "peak_rss_kib": rss,
                                "events": rep["summary"]["events"],
                                "history": rep.get("history"), "window": rep.get("window")}
        if name == "whole_run":
            want = {fn: (v["bytes"], v["allocations"]) for fn, v in ledger["leaks"].items()}
            growth = sorted({e["frames"][0]["function"] for e in rep["growth"] if e["frames"]})
            res["leaks_match_ledger"] = leaks_by_function(rep["leaks"]) == want
            res["growth_matches_ledger"] = growth == sorted(ledger["growth"])
            res["peak_matches_ledger"] = rep["summary"]["peak_bytes"] == ledger["peak_bytes"]
            res["events_match_ledger"] = rep["summary"]["events"] == ledger["events"]
            res["history"] = rep.get("history")
    for f in files + glob.glob(prefix + ".*"):
        if os.path.exists(f):
            os.unlink(f)
    if "longrun_live" in ctx.p:
        res["live_set"] = bench_longrun_live(ctx)
    return res


def bench_longrun_live(ctx):
    """(h) with a large live set (--hold) and repeated OOMs (--ooms): the bytes
    on disk against the cap, and the base checkpoint against the live set."""
    p = ctx.p["longrun_live"]
    log(f"(h) live set: {p['events']} events, {p['hold']} held, {p['ooms']} OOMs, cap {p['limit']}")
    prefix = os.path.join(ctx.out, "longrun-live")
    for f in glob.glob(prefix + ".*"):
        os.unlink(f)
    ledger_path = prefix + ".ledger.json"
    env = ctx.env(shim=True, output=prefix,
                  extra={"SIMCUDA_MEMORY_BYTES": "256GiB", "TORCHSEAL_HISTORY_LIMIT": p["limit"]})
    t0 = time.perf_counter()
    run([ctx.workload, "steps", str(p["events"]), "--seed", "1", "--threads", str(p["threads"]),
         "--sites", str(p["sites"]), "--steps", str(p["steps"]), "--hold", str(p["hold"]),
         "--ooms", str(p["ooms"]), "--ledger", ledger_path], env)
    wall = time.perf_counter() - t0
    with open(ledger_path) as f:
        ledger = json.load(f)
    files = history_files(prefix)
    bases = glob.glob(prefix + ".tseal.*.base")
    out = os.path.join(ctx.tmp, "longrun-live.json")
    w, rss = timed(ctx, [ctx.cli, "report", prefix + ".tseal", "--format", "json"], ctx.env(),
                   stdout_path=out)
    with open(out) as f:
        rep = json.load(f)
    hist = rep.get("history") or {}
    disk = sum(os.path.getsize(f) for f in files)  # the bases among them
    want = {fn: (v["bytes"], v["allocations"]) for fn, v in ledger["leaks"].items()}
    res = {"params": p, "workload_wall_s": wall, "events": ledger["events"],
           "disk_bytes": disk, "files": len(files), "base_files": len(bases),
           "history": hist,
           "within_cap": disk <= (hist.get("limit_bytes") or 0) + (hist.get("segment_bytes") or 0),
           # The base checkpoint holds the live set once: bytes per allocation live.
           "checkpoint_bytes_per_live": (hist.get("checkpoint_bytes") or 0) / max(1, p["hold"]),
           "report_wall_s": w, "report_peak_rss_kib": rss,
           "ooms_reported": len(rep.get("ooms", [])),
           "leaks_match_ledger": leaks_by_function(rep["leaks"]) == want,
           "peak_matches_ledger": rep["summary"]["peak_bytes"] == ledger["peak_bytes"],
           "events_match_ledger": rep["summary"]["events"] == ledger["events"]}
    for f in files + glob.glob(prefix + ".*"):
        if os.path.exists(f):
            os.unlink(f)
    return res


def markdown_longrun(r, machine):
    h = r["h"]
    p = h["params"]
    yes = lambda ok: "yes" if ok else "**no**"
    L = [f"Run: {machine['date']} on `{machine['host']}`, {machine['cpu']}, {machine['cores']} cores; "
         f"commit `{machine['commit']}`; mode `{machine['mode']}`; took {r['elapsed_s']:.0f} s.", ""]
    L.append(f"`bench_workload steps {p['events']} --threads {p['threads']} --sites {p['sites']} "
             f"--steps {p['steps']}` under `TORCHSEAL_HISTORY_LIMIT={p['limit']}`: "
             f"{h['events']} events in {h['workload_wall_s']:.0f} s "
             f"({h['events_per_s'] / 1e6:.2f}M events/s).")
    L.append("")
    hist = h.get("history") or {}
    seg = hist.get("segment_bytes")
    L.append("| disk used | files | segments written / kept | segment size | exit (last step to exit) |")
    L.append("|---|---|---|---|---|")
    L.append(f"| {h['disk_bytes'] / 2**20:.1f} MiB | {h['files']} | {hist.get('segments', 'n/a')} / "
             f"{hist.get('segments_on_disk', 'n/a')} | "
             f"{f'{seg / 2**20:.1f} MiB' if seg else 'n/a'} | {h['exit_s']:.2f} s "
             f"({h['exit_after_drain_s']:.2f} s after the drain) |")
    L.append("")
    L.append("| `torchseal report` | window | events | segments read | bytes read | wall | peak RSS |")
    L.append("|---|---|---|---|---|---|---|")
    for name, x in h["reports"].items():
        xh = x.get("history") or {}
        br = xh.get("bytes_read")
        L.append(f"| {name.replace('_', ' ')} | `{' '.join(x['args']) or 'all'}` | {x['events']} | "
                 f"{xh.get('segments_read', 'n/a')} | {f'{br / 2**20:.1f} MiB' if br is not None else 'n/a'} | "
                 f"{x['wall_s']:.2f} s | {x['peak_rss_kib'] / 1024:.0f} MiB |")
    L.append("")
    L.append(f"Whole-run report against the workload's ledger: leak set {yes(h['leaks_match_ledger'])}, "
             f"growth sites {yes(h['growth_matches_ledger'])}, peak {yes(h['peak_matches_ledger'])}, "
             f"event count {yes(h['events_match_ledger'])}. A window whose detail the cap "
             f"dropped reads no segment and reports no events (only what was live there is known).")
    lv = h.get("live_set")
    if lv:
        q, lh = lv["params"], lv["history"]
        L.append("")
        L.append(f"A large live set with OOMs: `bench_workload steps {q['events']} --threads "
                 f"{q['threads']} --sites {q['sites']} --steps {q['steps']} --hold {q['hold']} "
                 f"--ooms {q['ooms']}` under `TORCHSEAL_HISTORY_LIMIT={q['limit']}`.")
        L.append("")
        L.append("| disk used | cap + one segment | files (bases) | segments written / kept | "
                 "base checkpoint | per live allocation | over the cap |")
        L.append("|---|---|---|---|---|---|---|")
        cap = (lh.get("limit_bytes") or 0) + (lh.get("segment_bytes") or 0)
        L.append(f"| {lv['disk_bytes'] / 2**20:.2f} MiB | {cap / 2**20:.2f} MiB "
                 f"({yes(lv['within_cap'])} within) | {lv['files']} ({lv['base_files']}) | "
                 f"{lh.get('segments', 'n/a')} / {lh.get('segments_on_disk', 'n/a')} | "
                 f"{(lh.get('checkpoint_bytes') or 0) / 2**20:.2f} MiB | "
                 f"{lv['checkpoint_bytes_per_live']:.1f} B | {lh.get('over_cap')} |")
        L.append("")
        L.append(f"Whole-run report: leak set {yes(lv['leaks_match_ledger'])}, peak "
                 f"{yes(lv['peak_matches_ledger'])}, event count {yes(lv['events_match_ledger'])}, "
                 f"{lv['ooms_reported']} of {q['ooms']} OOMs; read in {lv['report_wall_s']:.2f} s, "
                 f"{lv['report_peak_rss_kib'] / 1024:.0f} MiB peak RSS.")
    return "\n".join(L)


def bench_report(ctx, small):
    log(f"(e) history of {ctx.p['big']} events")
    big = make_history(ctx, ctx.p["big"], "big")
    big_bd = tseal_breakdown(big["path"])
    env = ctx.env()
    res = {"histories": {}}
    for label, info, bd in (("small", small, tseal_breakdown(small["path"])), ("big", big, big_bd)):
        ev = bd["events_in_file"]
        row = {"events": ev, "file_bytes": bd["file_bytes"]}
        for what, cmd in (("report", [ctx.cli, "report", info["path"]]),
                          ("export_memory_viz", [ctx.cli, "export", info["path"], "--memory-viz",
                                                 os.path.join(ctx.tmp, "out.pickle")])):
            walls, rsss = [], []
            for _ in range(1 if ctx.mode == "smoke" else 2):
                w, rss = timed(ctx, cmd, env)
                walls.append(w)
                rsss.append(rss)
            row[what] = {"wall_s": min(walls), "events_per_s": ev / min(walls),
                         "peak_rss_kib": max(rsss)}
        res["histories"][label] = row
    for f in glob.glob(os.path.join(ctx.tmp, "out.pickle*")):
        os.unlink(f)
    os.unlink(big["path"])
    res["generation"] = big
    return res


# ---------------------------------------------------------------- (f)
def bench_live(ctx):
    n = ctx.p["live"]
    log(f"(f) {n} live allocations")
    out = {}
    for label, shim in (("bare", False), ("shim", True)):
        r = run([ctx.workload, "live", str(n)], ctx.env(shim=shim))
        j = json.loads(r.stdout.strip().splitlines()[-1])
        out[label] = j
        ctx.clean_tmp()
    delta = lambda j: (j["rss_after_kib"] - j["rss_before_kib"]) * 1024
    out["bytes_per_live_alloc"] = (delta(out["shim"]) - delta(out["bare"])) / n
    return out


# ---------------------------------------------------------------- (g)
def bench_startup(ctx):
    log(f"(g) startup, {ctx.p['startup_runs']} runs each")
    r = run([sys.executable, os.path.join(ctx.here, "startup.py"), ctx.shim,
             str(ctx.p["startup_runs"])], ctx.env())
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- output
def machine_info(ctx):
    cpu = platform.processor()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    repo = os.path.dirname(ctx.here)
    def git(*a):
        r = subprocess.run(["git", "-C", repo] + list(a), stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        return r.stdout.strip()
    commit = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    ht = subprocess.run([ctx.heaptrack, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        text=True).stdout.strip() if ctx.heaptrack else None
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "host": platform.node(), "cpu": cpu, "cores": os.cpu_count(),
            "kernel": platform.release(), "commit": commit + ("+dirty" if dirty else ""),
            "mode": ctx.mode, "heaptrack": ht, "python": platform.python_version(),
            "compiler_build": "meson release (-O3)"}


def verdicts(r):
    a30 = r["a"]["depths"]["30"]
    v = {}
    p30 = r.get("p", {}).get("depths", {}).get("30", {})
    if "ratio_wall" in p30:
        worst = max(p30["ratio_wall"], p30["ratio_cpu"], p30.get("static_ratio_wall", 0),
                    p30.get("static_ratio_cpu", 0))
        static = (f"; static cudart {p30['static_ratio_wall']:.2f}x (CPU time: "
                  f"{p30['static_ratio_cpu']:.2f}x)" if "static_ratio_wall" in p30 else "")
        v["p"] = (worst <= 0.25,
                  f"{p30['ratio_wall']:.2f}x (CPU time: {p30['ratio_cpu']:.2f}x); "
                  f"{p30['shim_added_ns_wall']:.0f} ns vs heaptrack's {p30['heaptrack_added_ns_wall']:.0f}"
                  + static)
    if "bare_root_added_ns_wall" in a30:
        within = [a30[f"bare_root_added_ns{s}"] / a30[f"default_added_ns{s}"] for s in ("_wall", "")]
        vs_ht = [a30.get(f"bare_root_ratio{s}", float("nan")) for s in ("_wall", "")]
        v["i"] = (max(within) <= 1.2 and max(vs_ht) <= 0.5,
                  f"{within[0]:.2f}x the normal machine's added cost, {vs_ht[0]:.2f}x heaptrack's "
                  f"(CPU time: {within[1]:.2f}x, {vs_ht[1]:.2f}x)")
    wall = a30.get("default_ratio_wall", float("nan"))
    v["a"] = (wall <= 0.5, f"{wall:.2f}x (CPU time: {a30.get('default_ratio', float('nan')):.2f}x)")
    b = r["b"]["python_frames_ns_per_event"]
    v["b"] = (b <= 1000, f"{b:.0f} ns/event")
    c = r["c"]["scaling_8_over_1"]
    cb = r["c"].get("bare_scaling_8_over_1", float("nan"))
    v["c"] = (c >= 1.5, f"{c:.2f}x (simcuda bare: {cb:.2f}x)")
    d = r["d"]["bytes_per_event"]
    v["d"] = (d <= 16, f"{d:.2f} B/event")
    big = r["e"]["histories"]["big"]["report"]
    small = r["e"]["histories"]["small"]["report"]
    bounded = big["peak_rss_kib"] <= 1.5 * small["peak_rss_kib"] + 8192
    v["e"] = (big["events_per_s"] >= 5e6 and bounded,
              f"{big['events_per_s'] / 1e6:.2f}M ev/s, RSS {big['peak_rss_kib'] / 1024:.0f} MiB "
              f"({'bounded' if bounded else 'grows'} with history length)")
    f = r["f"]["bytes_per_live_alloc"]
    v["f"] = (f <= 96, f"{f:.1f} B/alloc")
    g = r["g"]["added_ms"]
    v["g"] = (g < 5, f"{g:.2f} ms")
    return v


def markdown(r):
    m = r["machine"]
    L = []
    L.append(f"Run: {m['date']} on `{m['host']}`, {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}; "
             f"commit `{m['commit']}`; mode `{m['mode']}`; {m['heaptrack'] or 'heaptrack missing'}; "
             f"Python {m['python']}; `scripts/bench` took {r['elapsed_s']:.0f} s.")
    L.append("")
    L.append("### Targets")
    L.append("")
    L.append("| | target | measured | verdict |")
    L.append("|---|---|---|---|")
    for k, (ok, txt) in sorted(r["verdicts"].items()):
        L.append(f"| ({k}) | {TARGETS[k]} | {txt} | {'met' if ok else '**missed**'} |")
    L.append("")
    L.append("### (a) Added cost per alloc+free pair (ns), medians of interleaved rounds")
    L.append("")
    L.append("`default` is the shim with `TORCHSEAL_BACKEND` unset (what users get; preloaded, "
             "that is the hooks); ratios are added cost over heaptrack's added cost.")
    for title, sfx in (("Wall time of the loop", "_wall"), ("CPU time of the benchmark thread", "")):
        L.append("")
        L.append(f"{title}:")
        L.append("")
        L.append("| depth | cuda bare | default added | hooks added | cupti added | malloc bare | "
                 "heaptrack added | default/heaptrack | hooks/heaptrack | cupti/heaptrack |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        for d, x in r["a"]["depths"].items():
            g = lambda k, fmt="{:.0f}": fmt.format(x[k + sfx]) if k + sfx in x else "n/a"
            L.append(f"| {d} | {g('cuda_bare_ns')} | {g('default_added_ns')} | {g('hooks_added_ns')} | "
                     f"{g('cupti_added_ns')} | {g('malloc_bare_ns')} | {g('heaptrack_added_ns')} | "
                     f"{g('default_ratio', '{:.2f}x')} | {g('hooks_ratio', '{:.2f}x')} | "
                     f"{g('cupti_ratio', '{:.2f}x')} |")
    L.append("")
    if "p" in r:
        L.append("### (p) The plain program: bench/pair_plain, no harness in the loop "
                 f"({r['p']['pairs']} pairs a run)")
        L.append("")
        L.append("| depth | cuda bare | shim added (wall / CPU) | malloc bare | heaptrack added (wall / CPU) | "
                 "shim/heaptrack (wall / CPU) | median of the rounds' ratios (wall / CPU) |")
        L.append("|---|---|---|---|---|---|---|")
        for d, x in r["p"]["depths"].items():
            ht = (f"{x['heaptrack_added_ns_wall']:.0f} / {x['heaptrack_added_ns_cpu']:.0f}"
                  if "heaptrack_added_ns_wall" in x else "n/a")
            ratio = (f"{x['ratio_wall']:.2f}x / {x['ratio_cpu']:.2f}x" if "ratio_wall" in x else "n/a")
            rounds = (f"{x['round_ratio_wall']:.2f}x / {x['round_ratio_cpu']:.2f}x"
                      if "round_ratio_wall" in x else "n/a")
            L.append(f"| {d} | {x['cuda_bare_ns_wall']:.0f} | {x['shim_added_ns_wall']:.0f} / "
                     f"{x['shim_added_ns_cpu']:.0f} | {x['malloc_bare_ns_wall']:.0f} | {ht} | {ratio} | "
                     f"{rounds} |")
        L.append("")
        if any("static_added_ns_wall" in x for x in r["p"]["depths"].values()):
            L.append("The same program with the runtime linked in statically (bench/pair_plain_static, "
                     "nvcc's default):")
            L.append("")
            L.append("| depth | static bare | shim added (wall / CPU) | shim/heaptrack (wall / CPU) |")
            L.append("|---|---|---|---|")
            for d, x in r["p"]["depths"].items():
                if "static_added_ns_wall" not in x:
                    continue
                ratio = (f"{x['static_ratio_wall']:.2f}x / {x['static_ratio_cpu']:.2f}x"
                         if "static_ratio_wall" in x else "n/a")
                L.append(f"| {d} | {x['static_bare_ns_wall']:.0f} | {x['static_added_ns_wall']:.0f} / "
                         f"{x['static_added_ns_cpu']:.0f} | {ratio} |")
            L.append("")
        for d, x in r["p"]["depths"].items():
            if "ratio_cpu_all" in x:
                L.append(f"CPU time of every process of the tool at depth {d} (heaptrack's "
                         f"interpreter as well as the program; the shim's writer thread is in "
                         f"both columns): shim added {x['shim_added_ns_cpu_all']:.0f} ns a pair, "
                         f"heaptrack {x['heaptrack_added_ns_cpu_all']:.0f} ns, ratio "
                         f"{x['ratio_cpu_all']:.2f}x.")
                L.append("")
    L.append("### (i) The same pair in a bare root (no libunwind, no libdw: the bundled copies)")
    L.append("")
    if r["a"].get("bare_root") != "measured":
        L.append(f"Not measured: {r['a'].get('bare_root', 'no bare root in this run')}.")
    else:
        L.append("| depth | default added (wall / CPU) | bare root added (wall / CPU) | "
                 "bare root / default | bare root / heaptrack |")
        L.append("|---|---|---|---|---|")
        for d, x in r["a"]["depths"].items():
            if "bare_root_added_ns_wall" not in x:
                continue
            L.append(f"| {d} | {x['default_added_ns_wall']:.0f} / {x['default_added_ns']:.0f} | "
                     f"{x['bare_root_added_ns_wall']:.0f} / {x['bare_root_added_ns']:.0f} | "
                     f"{x['bare_root_added_ns_wall'] / x['default_added_ns_wall']:.2f}x / "
                     f"{x['bare_root_added_ns'] / x['default_added_ns']:.2f}x | "
                     f"{x.get('bare_root_ratio_wall', float('nan')):.2f}x / "
                     f"{x.get('bare_root_ratio', float('nan')):.2f}x |")
    L.append("")
    b = r["b"]
    L.append("### (b) 30 Python frames (CPython ctypes -> cudaMalloc/cudaFree), ns per pair")
    L.append("")
    L.append("| bare | shim, TORCHSEAL_PYTHON=off | shim, auto | Python frames per event | per alloc |")
    L.append("|---|---|---|---|---|")
    L.append(f"| {b['bare_ns_per_pair']:.0f} | {b['shim_python_off_ns_per_pair']:.0f} | "
             f"{b['shim_python_auto_ns_per_pair']:.0f} | {b['python_frames_ns_per_event']:.0f} | "
             f"{b['python_frames_ns_per_alloc']:.0f} |")
    L.append("")
    L.append(f"### (c) Threads allocating at once (depth 30), events/s, {r['c']['cores']} cores")
    L.append("")
    L.append("| threads | bare | shim (hooks) | shim vs 1 thread |")
    L.append("|---|---|---|---|")
    one = r["c"]["threads"]["1"]["shim_events_per_s"]
    for t, x in r["c"]["threads"].items():
        L.append(f"| {t} | {x['bare_events_per_s'] / 1e6:.2f}M | {x['shim_events_per_s'] / 1e6:.2f}M | "
                 f"{x['shim_events_per_s'] / one:.2f}x |")
    L.append("")
    L.append(f"Rates are medians over rounds; the target uses the median of each round's own "
             f"8-thread/1-thread ratio (both measured back to back in one process): shim "
             f"**{r['c']['scaling_8_over_1']:.2f}x**, bare {r['c']['bare_scaling_8_over_1']:.2f}x.")
    L.append("")
    d = r["d"]
    L.append(f"### (d) History size, mixed workload ({d['events_in_file']} events, "
             f"{d['workload']['distinct_sites']} call sites)")
    L.append("")
    L.append(f"P.tseal: {d['file_bytes']} bytes = **{d['bytes_per_event']:.2f} B/event** "
             f"(event chunks alone: {d['event_chunk_bytes_per_event']:.2f} B/event). By chunk type:")
    L.append("")
    L.append("| " + " | ".join(d["chunk_bytes"]) + " |")
    L.append("|" + "---|" * len(d["chunk_bytes"]))
    L.append("| " + " | ".join(str(v) for v in d["chunk_bytes"].values()) + " |")
    L.append("")
    L.append("### (e) `torchseal report` / `torchseal export --memory-viz` on mixed histories")
    L.append("")
    L.append("| history | events | file MiB | report ev/s | report peak RSS | export ev/s | export peak RSS |")
    L.append("|---|---|---|---|---|---|---|")
    for label, x in r["e"]["histories"].items():
        L.append(f"| {label} | {x['events']} | {x['file_bytes'] / 2**20:.1f} | "
                 f"{x['report']['events_per_s'] / 1e6:.2f}M | {x['report']['peak_rss_kib'] / 1024:.0f} MiB | "
                 f"{x['export_memory_viz']['events_per_s'] / 1e6:.2f}M | "
                 f"{x['export_memory_viz']['peak_rss_kib'] / 1024:.0f} MiB |")
    L.append("")
    f = r["f"]
    L.append(f"### (f) Memory per live allocation ({f['shim']['live']} live, one call site)")
    L.append("")
    db = (f["bare"]["rss_after_kib"] - f["bare"]["rss_before_kib"]) / 1024
    ds = (f["shim"]["rss_after_kib"] - f["shim"]["rss_before_kib"]) / 1024
    L.append(f"RSS growth: bare {db:.1f} MiB, shim {ds:.1f} MiB -> **{f['bytes_per_live_alloc']:.1f} B "
             f"per live allocation** attributable to torchseal.")
    L.append("")
    g = r["g"]
    L.append(f"### (g) `python3 -c pass` startup ({g['runs']} interleaved runs each)")
    L.append("")
    L.append(f"bare {g['bare_ms']:.2f} ms, LD_PRELOAD shim {g['shim_ms']:.2f} ms -> "
             f"**{g['added_ms']:.2f} ms added** (median of paired differences {g['added_ms_paired_median']:.2f} ms).")
    return "\n".join(L)


BEGIN, END = "<!-- BEGIN GENERATED (scripts/bench) -->", "<!-- END GENERATED -->"
LONGRUN_BEGIN = "<!-- BEGIN GENERATED (scripts/bench --longrun) -->"
LONGRUN_END = "<!-- END GENERATED (scripts/bench --longrun) -->"


def write_md(path, body, BEGIN=BEGIN, END=END):
    text = open(path).read() if os.path.exists(path) else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text:
        text += f"\n{BEGIN}\n{END}\n"
    pre, rest = text.split(BEGIN, 1)
    post = rest.split(END, 1)[1] if END in rest else ""
    with open(path, "w") as f:
        f.write(f"{pre}{BEGIN}\n{body}\n{END}{post}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--out-dir", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--longrun", action="store_true", help="only (h), the long run under a cap")
    ap.add_argument("--longrun-events", type=int, help="(h): this many events instead of 10^9")
    ap.add_argument("--longrun-limit", help="(h): this history cap instead of 1GiB (e.g. 64MiB)")
    ap.add_argument("--results-json")
    ap.add_argument("--results-md")
    ap.add_argument("--only", help="subset of sections (for development)")
    args = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    if args.out_dir is None:
        args.out_dir = os.path.join(here, "out")
    t0 = time.perf_counter()
    ctx = Ctx(args)
    for key in ("events", "limit"):
        if getattr(args, "longrun_" + key):
            ctx.p = dict(ctx.p, longrun=dict(ctx.p["longrun"], **{key: getattr(args, "longrun_" + key)}))
    only = args.only or SECTIONS[ctx.mode]
    r = {"machine": machine_info(ctx), "params": ctx.p}
    if "a" in only or "c" in only:
        r["a"], r["c"] = bench_pairs(ctx)
    if "p" in only:
        r["p"] = bench_plain(ctx)
    if "b" in only:
        r["b"] = bench_python(ctx)
    small = None
    if "d" in only or "e" in only:
        r["d"], small = bench_history_size(ctx)
    if "e" in only:
        r["e"] = bench_report(ctx, small)
    if small and os.path.exists(small["path"]):
        os.unlink(small["path"])
    if "f" in only:
        r["f"] = bench_live(ctx)
    if "g" in only:
        r["g"] = bench_startup(ctx)
    if "h" in only:
        r["h"] = bench_longrun(ctx)
    r["elapsed_s"] = time.perf_counter() - t0
    shutil.rmtree(ctx.tmp, ignore_errors=True)
    if only != SECTIONS[ctx.mode]:
        print(json.dumps(r, indent=1))
        return
    if ctx.mode == "longrun":
        md = markdown_longrun(r, r["machine"])
        results_json = os.path.splitext(args.results_json)[0] + "-longrun.json" if args.results_json else None
        begin, end = LONGRUN_BEGIN, LONGRUN_END
    else:
        r["verdicts"] = verdicts(r)
        md = markdown(r)
        if "h" in r:
            md += "\n\n### (h) Long run under a history cap\n\n" + markdown_longrun(r, r["machine"])
        results_json, begin, end = args.results_json, BEGIN, END
    print(md)
    if results_json:
        with open(results_json, "w") as f:
            json.dump(r, f, indent=1)
            f.write("\n")
    if args.results_md:
        write_md(args.results_md, md, begin, end)


if __name__ == "__main__":
    main()
