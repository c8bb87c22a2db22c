#!/usr/bin/env python3
"""The history cap holds with a large live set and repeated OOMs (issue 31).

    capped_oom.py SHIM SIMCUDA_DIR CLI BENCH_WORKLOAD

`bench_workload steps --hold 30000 --ooms 12` (seeded: tens of thousands of
allocations live from the first step to the end, OOMs the program survives
spread over the run, planted leaks and growth, a ledger of them) runs under
the shim uncapped and under TORCHSEAL_HISTORY_LIMIT=4MiB, to its end and
killed (SIGKILL) at a fixed step. Checked, each way:
1. The capped history on disk (main file, segments, base checkpoints) is
   within the cap plus one segment, segments were dropped, and the report's
   `history` key says the checkpoint fit (`over_cap` false) and its size.
2. The first segment, a segment pinned by an OOM and one pinned by a mark
   are kept.
3. `torchseal report` of each history: the leak set, growth verdicts, peak
   and event count are the ledger's (to the end); the OOMs are the uncapped
   history's (requests, live bytes at each, their top sites); killed, the
   events and peak are the ledger's at the step it stopped at, and capped and
   uncapped give the same leaks and OOMs.
4. A window (`--steps`) of the capped history reads fewer segments than are
   kept and gives the window's own event count.
5. A live set whose one checkpoint cannot fit a 1 MiB cap: the shim says so
   in one `torchseal:` line, the report's `history.over_cap` is true, and the
   verdicts are still the ledger's.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Checker, Failed, clean_env, preload, run, sanitized, with_simcuda  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capped_exact import (by_function, check_against_ledger, cli_json,  # noqa: E402
                          growth_key, history_files, segment_index)

SEED, THREADS, SITES, STEPS, EVENTS = 31, 4, 400, 100, 1_000_000
if sanitized():  # the same checks on half the events (harness.sanitized)
    EVENTS //= 2
HOLD, OOMS = 30000, 12
LIMIT = 4 << 20
KILL_AFTER = 97  # step: after the mark of step 96
SIMCUDA_MEMORY = "256GiB"


def workload_cmd(workload, ledger, pause=None, events=EVENTS, hold=HOLD):
    cmd = [workload, "steps", str(events), "--seed", str(SEED), "--threads", str(THREADS),
           "--sites", str(SITES), "--steps", str(STEPS), "--hold", str(hold), "--ooms", str(OOMS),
           "--ledger", ledger]
    return cmd + (["--pause-after", str(pause)] if pause else [])


def run_killed(cmd, env, prefix):
    """Runs cmd until it prints 'paused', then SIGKILLs it once its history
    has stopped growing (the writer has caught up with the paused program)."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, text=True)
    deadline = time.time() + 300
    try:
        line = p.stdout.readline()
        if line.strip() != "paused":
            raise Failed("the workload did not pause: %r\n%s" % (line, p.stderr.read()[-2000:]))
        # Caught up: 2 s in which the files grew by less than a chunk of
        # events (a paused process's passes still write their markers).
        size, still = -1, 0
        while still < 8 and time.time() < deadline:
            time.sleep(0.25)
            now = sum(os.path.getsize(f) for f in history_files(prefix) if os.path.exists(f))
            still = still + 1 if 0 <= now - size < 512 else 0
            size = now
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=max(1, deadline - time.time()))
    return p.returncode


def ooms_key(rep):
    return [(o["requested_bytes"], o["live_bytes"],
             [(s["bytes"], s["allocations"], s["frames"][0]["function"] if s["frames"] else "?")
              for s in o["top_sites"]]) for o in rep.get("ooms", [])]


def check_disk(c, label, prefix, rep, held):
    h = rep.get("history") or {}
    files = history_files(prefix)
    bases = [f for f in files if f.endswith(".base")]
    disk = sum(os.path.getsize(f) for f in files)
    c.note("%s history" % label, "%d bytes in %d files (%d base), history %r"
           % (disk, len(files), len(bases), h))
    c.eq("%s: history.limit_bytes" % label, h.get("limit_bytes"), LIMIT)
    c.true("%s: disk used %d <= cap %d + one segment %s" % (label, disk, LIMIT,
                                                            h.get("segment_bytes")),
           disk <= LIMIT + h.get("segment_bytes", 0))
    c.true("%s: segments were dropped under the cap" % label,
           0 < h.get("segments_on_disk", 0) < h.get("segments", 0), detail=h)
    c.eq("%s: history.over_cap" % label, h.get("over_cap"), False)
    # The base checkpoint holds the live set once: with the held set live
    # (killed), tens of thousands of allocations in well under a third of
    # the cap (at a clean end the last base may come after the drain).
    if held:
        c.true("%s: history.checkpoint_bytes %s is the held set's size"
               % (label, h.get("checkpoint_bytes")),
               HOLD * 4 < h.get("checkpoint_bytes", 0) < LIMIT // 3, detail=h)
    c.true("%s: the first segment is kept" % label, os.path.exists(prefix + ".tseal.000001"))
    _, _, index = segment_index(prefix + ".tseal")
    # Killed, the segment being written has no index entry (nor its pins):
    # the mark of step 96 may be in it, on disk after the indexed ones.
    last = max([s["seq"] for s in index] or [0])
    open_seg = os.path.exists(prefix + ".tseal.%06d" % (last + 1))
    for bit, what in ((2, "an OOM"), (4, "a mark")):
        pinned = [s["seq"] for s in index if s["pins"] & bit]
        kept = [q for q in pinned if os.path.exists(prefix + ".tseal.%06d" % q)]
        c.note("%s: segments pinned by %s, kept" % (label, what),
               "%r of %r%s" % (kept, pinned, ", and the open segment %d" % (last + 1)
                               if open_seg else ""))
        marked = bit == 4 and held and open_seg and any(
            m["label"] == "4 steps to go" for m in rep.get("marks", []))
        c.true("%s: a segment pinned by %s is kept" % (label, what), kept or marked,
               detail=pinned)


def main():
    shim, simcuda, cli, workload = sys.argv[1:5]
    c = Checker("capped history: a large live set and repeated OOMs stay within the cap")
    with tempfile.TemporaryDirectory() as tmp:
        base = with_simcuda(clean_env(), simcuda)
        base["SIMCUDA_MEMORY_BYTES"] = SIMCUDA_MEMORY
        reports, ledgers, prefixes = {}, {}, {}
        for label, capped, killed in (("uncapped", False, False), ("capped", True, False),
                                      ("uncapped killed", False, True),
                                      ("capped killed", True, True)):
            prefix = prefixes[label] = os.path.join(tmp, label.replace(" ", "_"))
            env = dict(base, LD_PRELOAD=preload(shim), TORCHSEAL_OUTPUT=prefix,
                       TORCHSEAL_LOG="error")
            if capped:
                env["TORCHSEAL_HISTORY_LIMIT"] = "%dMiB" % (LIMIT >> 20)
            ledger = prefix + ".ledger.json"
            start = time.time()
            if killed:
                run_killed(workload_cmd(workload, ledger, KILL_AFTER), env, prefix)
            else:
                r = run(workload_cmd(workload, ledger), env, timeout=300, watchdog=True)
                if r.returncode != 0:
                    raise Failed("bench_workload steps failed (%s)\n%s" % (label, r.describe()))
            c.note("%s run" % label, "%.1f s" % (time.time() - start))
            with open(ledger) as f:
                ledgers[label] = json.load(f)
            reports[label] = cli_json(cli, ["report", prefix + ".tseal", "--format", "json"],
                                      "%s history report" % label)

        ledger = ledgers["uncapped"]
        c.eq("the ledger names the OOMs", ledger.get("ooms"), OOMS)
        c.eq("the same seed gives the same ledger (capped)", ledgers["capped"], ledger)
        for label in ("uncapped", "capped"):
            check_against_ledger(c, label, reports[label], ledger)
            # The exit verdict lists the OOMs the shim kept (at most 8 of a
            # thread's unrecovered ones), each with the live set at it.
            ooms = reports[label].get("ooms", [])
            c.true("%s: OOMs in the report (%d)" % (label, len(ooms)), 0 < len(ooms) <= OOMS)
            c.true("%s: each OOM's top site is the held set" % label,
                   all(k[2] and k[2][0][1:] == (HOLD, "planted_hold")
                       for k in ooms_key(reports[label])), detail=ooms_key(reports[label])[:1])
        c.eq("capped vs uncapped: growth entries", growth_key(reports["capped"]),
             growth_key(reports["uncapped"]))
        # Between two runs only what happens at a step boundary is the same
        # (an OOM comes while other threads run): the OOMs' number and order.
        c.eq("capped vs uncapped: OOMs (request)",
             [k[0] for k in ooms_key(reports["capped"])],
             [k[0] for k in ooms_key(reports["uncapped"])])
        check_disk(c, "capped", prefixes["capped"], reports["capped"], False)

        # Killed at the end of step KILL_AFTER: the ledger at that step.
        at_kill = ledgers["capped killed"]
        c.eq("killed: the same ledger capped and uncapped", at_kill, ledgers["uncapped killed"])
        for label in ("uncapped killed", "capped killed"):
            rep = reports[label]
            c.eq("%s: events" % label, rep["summary"]["events"], at_kill["events"])
            c.eq("%s: peak bytes" % label, rep["summary"]["peak_bytes"], at_kill["peak_bytes"])
        leaks = lambda rep: by_function(rep["leaks"], ("bytes", "allocations"))
        c.eq("killed: capped vs uncapped leak set", leaks(reports["capped killed"]),
             leaks(reports["uncapped killed"]))
        c.true("killed: the held set is in the leaks",
               leaks(reports["capped killed"]).get("planted_hold", (0, 0))[1] == HOLD)
        c.eq("killed: capped vs uncapped OOMs (request)",
             [k[0] for k in ooms_key(reports["capped killed"])],
             [k[0] for k in ooms_key(reports["uncapped killed"])])
        c.true("killed: OOMs in the report", ooms_key(reports["capped killed"]))
        check_disk(c, "capped killed", prefixes["capped killed"], reports["capped killed"], True)

        # A window near the end reads only its segments, from its checkpoint
        # and that checkpoint's base.
        first = STEPS - 1
        for label in ("capped", "capped killed"):
            last = STEPS if label == "capped" else KILL_AFTER
            first = last - 1
            lg = ledger if label == "capped" else at_kill
            rep = cli_json(cli, ["report", prefixes[label] + ".tseal", "--format", "json",
                                 "--steps", "%d..%d" % (first, last)], "%s window" % label)
            c.eq("%s --steps %d..%d: the window's events" % (label, first, last),
                 rep["summary"]["events"], sum(lg["events_per_step"][first - 1:last]))
            h = rep.get("history", {})
            c.true("%s window: reads fewer segments than are kept" % label,
                   0 < h.get("segments_read", 0) < h.get("segments_on_disk", 0), detail=h)

        # 80,000 allocations live under a 1 MiB cap: one checkpoint of them
        # alone passes the cap.
        prefix = os.path.join(tmp, "over")
        env = dict(base, LD_PRELOAD=preload(shim), TORCHSEAL_OUTPUT=prefix,
                   TORCHSEAL_HISTORY_LIMIT="1MiB")
        r = run(workload_cmd(workload, prefix + ".ledger.json", events=300000, hold=80000), env,
                timeout=300, watchdog=True)
        if r.returncode != 0:
            raise Failed("bench_workload steps failed (over the cap)\n%s" % r.describe())
        lines = [l for l in r.stderr.splitlines() if "cannot hold one checkpoint" in l]
        c.eq("over the cap: said once, in one line", len(lines), 1, detail=r.stderr[-2000:])
        c.true("over the cap: a torchseal: line", all(l.startswith("torchseal:") for l in lines),
               detail=lines)
        with open(prefix + ".ledger.json") as f:
            over_ledger = json.load(f)
        rep = cli_json(cli, ["report", prefix + ".tseal", "--format", "json"], "over-cap report")
        c.eq("over the cap: history.over_cap", (rep.get("history") or {}).get("over_cap"), True)
        # (checkpoint_bytes is the last base's, taken after the program freed
        # its held set: small again.)
        c.true("over the cap: history.checkpoint_bytes", (rep.get("history") or {}).get(
            "checkpoint_bytes", 0) > 0, detail=rep.get("history"))
        check_against_ledger(c, "over the cap", rep, over_ledger)
    return c.finish()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failed as e:
        print("FAIL:", e)
        sys.exit(1)
