#!/usr/bin/env python3
"""Capped histories against uncapped ones, end to end, on capped_program
(steps, VMM, a context teardown, invalid frees, recovered OOMs, a mark and
dumps every few steps):

1. Under a 1 MiB cap, where marks pin every segment, the cap drops the
   mark-pinned segments first: the first segment and the early OOM's stay,
   and so do the most recent segments, at least half the cap of them.
2. `torchseal report --format json` of the capped history has the same
   leaks, growth, OOMs, invalid frees, marks and peak as the uncapped one,
   and so has a step window, which reads only its segments (memory_viz too).
3. Damage: a whole-run read resumes after an unreadable middle segment, a
   missing last segment leaves the run before it, a truncated last segment
   warns, a segment or a missing file given as the history is one line, and
   so is a negative, infinite or NaN --from/--to.
4. `--steps` on time windows (TORCHSEAL_STEP_SECONDS) finds its segments.

    capped_e2e.py SHIM SIMCUDA_DIR CLI PROGRAM
"""
import json
import os
import pickle
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Checker, Failed, preload, run as run_process  # noqa: E402

CHECK = Checker("history capped")
LIMIT = "1MiB"


def run(cmd, env=None):
    r = run_process(cmd, env if env is not None else dict(os.environ))
    if r.returncode != 0:
        raise Failed(r.describe())
    return r


def record(shim, simcuda, program, prefix, args, limit=None, extra=None):
    env = dict(os.environ, LD_PRELOAD=preload(shim), LD_LIBRARY_PATH=simcuda,
               TORCHSEAL_OUTPUT=prefix, **(extra or {}))
    env.pop("TORCHSEAL_HISTORY_LIMIT", None)
    if limit:
        env["TORCHSEAL_HISTORY_LIMIT"] = limit
    run([program] + args, env)
    return prefix + ".tseal"


def report(cli, history, *args):
    return json.loads(run([cli, "report", history, "--format", "json"] + list(args)).stdout)


def verdicts(r):
    """What a cap must keep exact (no addresses, pids or times)."""
    def frame(x):
        f = x.get("frames") or [{}]
        return (f[0].get("function"), f[0].get("line"))
    leaks = sorted((l["bytes"], l["allocations"], l["kind"], l["api"], l["detected_at"], frame(l))
                   for l in r["leaks"])
    growth = sorted((g["api"], g["kind"], g["steps"], g["growth_bytes"], frame(g))
                    for g in r.get("growth", []))
    s = r["summary"]
    summary = {k: s.get(k) for k in ("leaked_bytes", "leaked_allocations", "leak_sites", "events",
                                     "peak_bytes", "reachable_bytes", "preexisting_frees")}
    return {"leaks": leaks, "growth": growth, "summary": summary,
            "ooms": [(o.get("requested"), o.get("recovered")) for o in r["ooms"]],
            "invalid_frees": len(r["invalid_frees"]),
            "marks": [m["label"] for m in r.get("marks", [])]}


def same(name, capped, uncapped):
    a, b = verdicts(capped), verdicts(uncapped)
    for k in b:
        CHECK.true("%s: %s differs:\n  capped   %.600r\n  uncapped %.600r"
                   % (name, k, a[k], b[k]), a[k] == b[k])


def history_of(r):
    return r.get("history", {})


def one_line_error(cli, path, what, *args):
    r = run_process([cli, "report", path] + list(args), dict(os.environ))
    lines = r.stderr.strip().splitlines()
    CHECK.true("%s: exit %d, stderr %r" % (what, r.returncode, r.stderr),
               r.returncode != 0 and len(lines) == 1)


def trace_actions(path):
    snap = pickle.load(open(path, "rb"))
    return sorted((e["action"], e["size"]) for tr in snap["device_traces"] for e in tr)


def main():
    shim, simcuda, cli, program = sys.argv[1:5]
    with tempfile.TemporaryDirectory() as tmp:
        args = ["240", "marks"]
        full = record(shim, simcuda, program, os.path.join(tmp, "full"), args)
        capped = record(shim, simcuda, program, os.path.join(tmp, "capped"), args, LIMIT)
        parts = sorted(f for f in os.listdir(tmp) if f.startswith("capped.tseal."))
        segs = [f for f in parts if not f.endswith(".base")]  # the rest: base checkpoints
        CHECK.true("a 1 MiB cap drops segments: %r" % segs,
                   len(segs) < int(segs[-1].rsplit(".", 1)[1]))
        CHECK.true("the first segment (the first steps and the OOM of step 2) outlives segments "
                   "pinned only by marks: %r" % segs, "capped.tseal.000001" in segs)
        numbers = [int(f.rsplit(".", 1)[1]) for f in segs]
        tail = [f for f, n in zip(segs, numbers) if n > max(
            [a for a, b in zip(numbers, numbers[1:]) if b != a + 1] or [0])]
        recent = sum(os.path.getsize(os.path.join(tmp, f)) for f in tail)
        CHECK.true("the most recent segments keep at least half the cap (%d bytes in %r)"
                   % (recent, tail), recent >= (1 << 20) // 2)
        full_report = report(cli, full)
        capped_report = report(cli, capped)
        disk = sum(os.path.getsize(os.path.join(tmp, f)) for f in parts + ["capped.tseal"])
        CHECK.true("on disk %d bytes: within the cap plus one segment (%r)"
                   % (disk, history_of(capped_report)),
                   disk <= (1 << 20) + history_of(capped_report).get("segment_bytes", 0))
        same("whole run", capped_report, full_report)

        # A step window in the kept part: the same verdicts from fewer segments.
        for steps in ("225..232", "236..", "..2"):
            wc, wf = report(cli, capped, "--steps", steps), report(cli, full, "--steps", steps)
            same("--steps " + steps, wc, wf)
            h = history_of(wc)
            CHECK.true("--steps %s reads only its segments: %r" % (steps, h),
                       0 < h.get("segments_read", 0) < h.get("segments_on_disk", 0))
        mc, mf = os.path.join(tmp, "c.pickle"), os.path.join(tmp, "f.pickle")
        run([cli, "export", capped, "--steps", "225..232", "--memory-viz", mc])
        run([cli, "export", full, "--steps", "225..232", "--memory-viz", mf])
        CHECK.true("memory_viz of a window: the same trace entries capped and uncapped",
                   trace_actions(mc) == trace_actions(mf))

        # Damage. A whole-run read resumes at the checkpoint after an
        # unreadable segment; a missing last segment leaves the run before it.
        kept = [os.path.join(tmp, f) for f in parts]  # the segments and their bases
        damaged = os.path.join(tmp, "damaged")
        os.mkdir(damaged)
        for f in [capped] + kept:
            shutil.copy(f, damaged)
        dcapped = os.path.join(damaged, "capped.tseal")
        middle = os.path.join(damaged, segs[-3])
        with open(middle, "r+b") as f:
            f.truncate(10)
        r = run([cli, "report", dcapped, "--format", "json"])
        CHECK.true("an unreadable middle segment is named: %r" % r.stderr, segs[-3] in r.stderr)
        same("whole run, a middle segment unreadable", json.loads(r.stdout), full_report)
        os.unlink(os.path.join(damaged, segs[-1]))
        r = run([cli, "report", dcapped, "--format", "json"])
        gone = json.loads(r.stdout)
        CHECK.true("a missing last segment is named: %r" % r.stderr, segs[-1] in r.stderr)
        CHECK.true("without its last segment the run before it still reads: %r"
                   % gone["summary"], gone["summary"]["events"] > 0 and gone["leaks"])
        with open(os.path.join(damaged, segs[-2]), "r+b") as f:
            f.truncate(os.path.getsize(f.name) // 2)
        r = run([cli, "report", dcapped])
        CHECK.true("a truncated last segment warns: %r" % r.stderr, "truncated" in r.stderr)
        one_line_error(cli, os.path.join(damaged, segs[0]), "a segment given as the history")
        one_line_error(cli, os.path.join(damaged, "absent.tseal"), "a missing main file")
        # -1 stands for an unset end: from the user it must not open the window.
        for bad in (["--to", "-1"], ["--from", "nan"], ["--from", "inf"]):
            one_line_error(cli, capped, " ".join(bad), *bad)

        # Time windows (TORCHSEAL_STEP_SECONDS, no explicit steps) are steps
        # to --steps: the segment index must place them as the replay does.
        # A cap that drops nothing: which segments a drop keeps would follow
        # the timing of the windows.
        timed = record(shim, simcuda, program, os.path.join(tmp, "timed"), ["400", "nosteps"],
                       "4MiB", {"TORCHSEAL_STEP_SECONDS": "0.02"})
        wt = report(cli, timed, "--steps", "2..")
        CHECK.true("--steps over time windows of a capped history reads segments: %r %r"
                   % (history_of(wt), wt["summary"]["events"]),
                   history_of(wt).get("segments_read", 0) > 0 and wt["summary"]["events"] > 0)
    return CHECK.finish()


if __name__ == "__main__":
    sys.exit(main())
