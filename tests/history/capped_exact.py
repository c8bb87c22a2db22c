#!/usr/bin/env python3
"""A capped history keeps the verdicts exact (issue 20's acceptance).

    capped_exact.py SHIM SIMCUDA_DIR CLI BENCH_WORKLOAD

`bench_workload steps` (seeded: threads, hundreds of sites, planted leaks,
growth and a plateau, a ledger of them) runs bare, under the shim uncapped,
and under the shim with TORCHSEAL_HISTORY_LIMIT far below the history's
size. Checked:
1. The same seed gives the same ledger, bare and under the shim.
2. `torchseal report` of each history, and each in-process P.json: the
   leak set (site, bytes, allocations), growth verdicts, peak and event
   count are the ledger's, so capped and uncapped agree with each other.
3. The capped history on disk (main file and segments) is within the cap
   plus one segment, and segments were dropped.
4. Window reports (`--steps A..B`, and `--from/--to` between two marks) give
   the window's own event count, from the ledger; on the capped history
   they read fewer segments than are kept: exactly those on disk that the
   main file's segment index (read here, not by torchseal) says overlap it.
5. `check`, `diff` and `merge` give the same verdicts on both histories.
"""
import glob
import json
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Checker, Failed, clean_env, preload, run, sanitized, with_simcuda  # noqa: E402
from harness.tseal import chunks, varint  # noqa: E402

SEED, THREADS, SITES, STEPS, EVENTS = 20, 4, 400, 100, 2_000_000
LIMIT = 4 << 20  # bytes: about a fifth of the uncapped history
if sanitized():  # the same checks at half the scale (harness.sanitized)
    EVENTS, LIMIT = EVENTS // 2, LIMIT // 2
SIMCUDA_MEMORY = "256GiB"  # the spike that fixes the peak is large


def workload_cmd(workload, ledger):
    return [workload, "steps", str(EVENTS), "--seed", str(SEED), "--threads", str(THREADS),
            "--sites", str(SITES), "--steps", str(STEPS), "--ledger", ledger]


def history_files(prefix):
    """The files one history consists of: main file and segments."""
    return sorted(glob.glob(prefix + ".tseal") + glob.glob(prefix + ".tseal.[0-9]*"))


def segment_index(tseal):
    """The main file's clock (process start, clock base: unix seconds) and
    segment index, read independently of torchseal's reader
    (docs/tseal-format.md; common/format/checkpoint.h, SegmentRecord)."""
    with open(tseal, "rb") as f:
        data = f.read()
    start, base, segs = None, None, []
    for typ, p in chunks(data):
        if typ == 1:  # Process (common/format/records.cpp)
            _, pos = varint(p, 8)  # u64 pid, svarint rank
            n, pos = varint(p, pos)  # str hostname
            start = struct.unpack_from("<d", p, pos + n)[0]
            pos += n + 8
            for _ in range(2):  # str backend, str python
                n, pos = varint(p, pos)
                pos += n
            argc, pos = varint(p, pos)
            for _ in range(argc):
                n, pos = varint(p, pos)
                pos += n
            base = struct.unpack_from("<d", p, pos)[0]
        elif typ == 11:  # Segment
            vals, pos = [], 0
            for _ in range(7):
                v, pos = varint(p, pos)
                vals.append(v)
            segs.append(dict(zip(("seq", "first_ns", "last_ns", "step_at_start", "step_at_end",
                                  "events", "bytes"), vals), pins=p[pos]))
    return start, base, segs


def overlapping_on_disk(tseal, steps=None, seconds=None):
    """Segments on disk holding part of steps A..B (which begin after step
    A-1 ended and end when step B does) or of seconds (from, to) since the
    process started; and whether one that does is dropped."""
    start, base, segs = segment_index(tseal)
    count, dropped = 0, False
    for sg in segs:
        if steps:
            hit = sg["step_at_end"] + 1 >= steps[0] and sg["step_at_start"] < steps[1]
        else:
            lo, hi = ((start - base + t) * 1e9 for t in seconds)
            hit = sg["last_ns"] >= lo and sg["first_ns"] <= hi
        if hit and os.path.exists("%s.%06d" % (tseal, sg["seq"])):
            count += 1
        elif hit:
            dropped = True
    return count, dropped


def cli_json(cli, args, what):
    r = run([cli] + args, None, timeout=300)
    if r.returncode not in (0, 1):
        raise Failed("%s failed\n%s" % (what, r.describe()))
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        raise Failed("%s printed no JSON (%s)\n%s" % (what, e, r.describe()))


def by_function(entries, fields):
    """{frames[0].function: (summed fields)} over report entries."""
    out = {}
    for e in entries:
        fn = e["frames"][0]["function"] if e["frames"] else "?"
        prev = out.get(fn, (0,) * len(fields))
        out[fn] = tuple(p + e[f] for p, f in zip(prev, fields))
    return out


def growth_key(report):
    return sorted((e["frames"][0]["function"], round(e["bytes_per_step"], 3), e["steps"],
                   round(e["r"], 6)) for e in report["growth"])


def check_against_ledger(c, label, rep, ledger, peak_slack=0):
    want_leaks = {fn: (v["bytes"], v["allocations"]) for fn, v in ledger["leaks"].items()}
    c.eq("%s: leak set (function: bytes, allocations)" % label,
         by_function(rep["leaks"], ("bytes", "allocations")), want_leaks)
    flagged = sorted(by_function(rep["growth"], ()))
    c.eq("%s: growth sites" % label, flagged, sorted(ledger["growth"]))
    peak = rep["summary"]["peak_bytes"]
    if peak_slack:
        c.true("%s: peak bytes %d within %d below %d" % (label, peak, peak_slack, ledger["peak_bytes"]),
               ledger["peak_bytes"] - peak_slack <= peak <= ledger["peak_bytes"])
    else:
        c.eq("%s: peak bytes" % label, peak, ledger["peak_bytes"])
    c.eq("%s: events" % label, rep["summary"]["events"], ledger["events"])


def mark_seconds(rep, label):
    """Seconds since the process started at the mark `label`."""
    marks = [m for m in rep.get("marks", []) if m["label"] == label]
    if len(marks) != 1:
        raise Failed("expected one mark %r, report has %r" % (label, rep.get("marks")))
    return marks[0]["t"] - rep["process"]["start_time"]


def window_checks(c, cli, label, tseal, whole, ledger, capped):
    per_step = ledger["events_per_step"]
    marks = {m["label"]: m["after_step"] for m in ledger["marks"]}
    a, b = marks["4 steps to go"], marks["2 steps to go"]
    # Window by steps: the last two steps, events of the steps themselves.
    first = STEPS - 1
    windows = [("--steps %d..%d" % (first, STEPS), ["--steps", "%d..%d" % (first, STEPS)],
                sum(per_step[first - 1:STEPS]), dict(steps=(first, STEPS)))]
    # Window by time: between two marks, which pause around themselves, so
    # the window holds exactly the steps after the first mark up to the second.
    t0, t1 = mark_seconds(whole, "4 steps to go"), mark_seconds(whole, "2 steps to go")
    windows.append(("--from/--to marks", ["--from", "%.6f" % t0, "--to", "%.6f" % t1],
                    sum(per_step[a:b]), dict(seconds=(t0, t1))))
    for what, args, events, span in windows:
        rep = cli_json(cli, ["report", tseal, "--format", "json"] + args,
                       "%s window report %s" % (label, what))
        c.eq("%s %s: the window's events" % (label, what), rep["summary"]["events"], events)
        c.true("%s %s: the report names its window" % (label, what), "window" in rep,
               detail=sorted(rep))
        if not capped:
            continue
        h = rep.get("history", {})
        c.true("%s %s: reads fewer segments than are kept" % (label, what),
               0 < h.get("segments_read", 0) < h.get("segments_on_disk", 0), detail=h)
        want, dropped = overlapping_on_disk(tseal, **span)
        c.true("%s %s: the cap kept the window's segments" % (label, what), not dropped)
        c.eq("%s %s: segments read = segments on disk the index says overlap it" % (label, what),
             h.get("segments_read"), want, detail=h)


def main():
    shim, simcuda, cli, workload = sys.argv[1:5]
    c = Checker("capped history keeps leak, growth and peak verdicts exact")
    with tempfile.TemporaryDirectory() as tmp:
        base = with_simcuda(clean_env(), simcuda)
        base["SIMCUDA_MEMORY_BYTES"] = SIMCUDA_MEMORY
        ledgers, prefixes = {}, {}
        runs = [("bare", None), ("uncapped", {}),
                ("capped", {"TORCHSEAL_HISTORY_LIMIT": "%dMiB" % (LIMIT >> 20)})]
        for label, extra in runs:
            env = dict(base)
            if extra is not None:
                prefixes[label] = os.path.join(tmp, label)
                env.update(extra, LD_PRELOAD=preload(shim), TORCHSEAL_OUTPUT=prefixes[label],
                           TORCHSEAL_LOG="error")
            ledger = os.path.join(tmp, label + ".ledger.json")
            r = run(workload_cmd(workload, ledger), env, timeout=300, watchdog=True)
            if r.returncode != 0:
                raise Failed("bench_workload steps failed (%s)\n%s" % (label, r.describe()))
            with open(ledger) as f:
                ledgers[label] = json.load(f)
            c.note("%s run" % label, "%.1f s" % r.seconds)
        ledger = ledgers["bare"]
        for label in prefixes:
            c.eq("the same seed gives the same ledger (%s)" % label, ledgers[label], ledger)
        c.note("ledger", {k: v for k, v in ledger.items() if k != "events_per_step"})

        reports = {}
        for label, prefix in prefixes.items():
            tseal = prefix + ".tseal"
            reports[label] = cli_json(cli, ["report", tseal, "--format", "json"],
                                      "%s history report" % label)
            check_against_ledger(c, label + " P.tseal", reports[label], ledger)
            # The in-process peak leaves out what the other threads have not
            # yet folded into the global count, up to 1 MiB each
            # (shim/core/counters.h); a history's replay is exact.
            with open(prefix + ".json") as f:
                check_against_ledger(c, label + " P.json", json.load(f), ledger,
                                     peak_slack=(THREADS - 1) << 20)
        uncapped_bytes = sum(os.path.getsize(f) for f in history_files(prefixes["uncapped"]))
        c.note("uncapped history", "%d bytes" % uncapped_bytes)

        capped = reports["capped"]
        h = capped.get("history")
        c.true("the capped report has the history key", isinstance(h, dict), detail=sorted(capped))
        h = h or {}
        c.eq("history.limit_bytes", h.get("limit_bytes"), LIMIT)
        c.true("segments were dropped under the cap",
               0 < h.get("segments_on_disk", 0) < h.get("segments", 0), detail=h)
        # A whole-run read starts at the checkpoint after the last drop.
        c.true("the whole run reads at most the kept segments",
               0 < h.get("segments_read", 0) <= h.get("segments_on_disk", 0), detail=h)
        files = history_files(prefixes["capped"])
        disk = sum(os.path.getsize(f) for f in files)
        c.note("capped history", "%d bytes in %d files, history %r" % (disk, len(files), h))
        c.true("disk used %d <= cap %d + one segment %s" % (disk, LIMIT, h.get("segment_bytes")),
               disk <= LIMIT + h.get("segment_bytes", 0))
        # Full detail is kept around what matters: the run's first segment
        # (its first steps) and the segment of each mark with the one before.
        c.true("the first segment is kept", os.path.exists(prefixes["capped"] + ".tseal.000001"))
        _, _, index = segment_index(prefixes["capped"] + ".tseal")
        pinned = [s["seq"] for s in index if s["pins"] & 4]
        c.true("a segment pinned by a mark is kept", any(
            os.path.exists(prefixes["capped"] + ".tseal.%06d" % q) for q in pinned), detail=pinned)
        c.eq("capped vs uncapped: growth entries", growth_key(capped),
             growth_key(reports["uncapped"]))

        for label, prefix in prefixes.items():
            window_checks(c, cli, label, prefix + ".tseal", reports[label], ledger,
                          label == "capped")

        # check, diff and merge: the capped history gives the uncapped verdicts.
        total_leaked = sum(v["bytes"] for v in ledger["leaks"].values())
        histories = [prefixes[l] + ".tseal" for l in prefixes]
        no_limit = str(1 << 50)
        for leak_limit, growth_limit, want in ((total_leaked, no_limit, 0),
                                               (total_leaked - 1, no_limit, 1),
                                               (no_limit, "0", 1)):
            args = ["--max-leaked-bytes", str(leak_limit), "--max-growth-bytes-per-step", growth_limit]
            for tseal in histories:
                r = run([cli, "check"] + args + [tseal], None, timeout=300)
                c.eq("check %s %s: exit status" % (" ".join(args), os.path.basename(tseal)),
                     r.returncode, want, detail=r.stdout[-300:] + r.stderr[-300:])
        d = cli_json(cli, ["diff", "--format", "json"] + histories, "diff")
        changed = lambda entries: [(e["status"], e["frames"][0]["function"]) for e in entries]
        c.eq("diff uncapped capped: changed leak sites", changed(d["leaks"]), [])
        c.eq("diff uncapped capped: changed growth sites", changed(d["growth"]), [])
        merged = os.path.join(tmp, "merged.json")
        r = run([cli, "merge", "-o", merged] + histories, None, timeout=300)
        c.eq("merge: exit status", r.returncode, 0, detail=r.stderr[-500:])
        if r.returncode == 0:
            with open(merged) as f:
                m = json.load(f)
            n = len(histories)
            c.eq("merge: leak set is the ledger's, once per history",
                 by_function(m["leaks"], ("bytes", "allocations")),
                 {fn: (n * v["bytes"], n * v["allocations"]) for fn, v in ledger["leaks"].items()})
            c.eq("merge: growth sites", sorted(by_function(m["growth"], ())), sorted(ledger["growth"]))
    return c.finish()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failed as e:
        print("FAIL:", e)
        sys.exit(1)
