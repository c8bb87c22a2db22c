#!/usr/bin/env python3
"""Validate a `torchseal export --perfetto` JSON trace (Python stdlib only).

Checks: valid JSON shaped {"traceEvents": [...], "displayTimeUnit": "ns"};
every event has the fields its phase needs; `ts` never decreases per track
(counters: per (pid, tid, name); async slices: per (cat, id)); every async
slice opened with "b" is closed by exactly one "e" no earlier; counter values
are non-negative numbers; instants are global-scoped.

  validate_perfetto.py FILE [--min-slice-bytes N] [--expect-counters] [--expect-slices]
                            [--expect-instants NAME-PREFIX ...] [--stats]
Exit 0 if valid; 1 with one line per problem.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--min-slice-bytes", type=int,
                    help="every slice's args.size must be at least this")
    ap.add_argument("--expect-counters", action="store_true")
    ap.add_argument("--expect-slices", action="store_true")
    ap.add_argument("--expect-instants", nargs="*", default=[],
                    help="instant name prefixes that must each occur")
    ap.add_argument("--stats", action="store_true")
    args = ap.parse_args()

    problems = []

    def bad(msg):
        if len(problems) < 30:
            problems.append(msg)

    try:
        with open(args.file, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print("validate_perfetto: not valid JSON: %s" % e, file=sys.stderr)
        return 1
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        print("validate_perfetto: top level must be {\"traceEvents\": [...]}", file=sys.stderr)
        return 1
    if doc.get("displayTimeUnit") != "ns":
        bad("displayTimeUnit must be \"ns\"")

    counter_ts, slice_ts = {}, {}
    open_slices = {}
    counts = {"C": 0, "i": 0, "b": 0, "e": 0, "M": 0}
    instant_names = []
    for n, ev in enumerate(doc["traceEvents"]):
        w = "event %d" % n
        if not isinstance(ev, dict):
            bad("%s: not an object" % w)
            continue
        ph = ev.get("ph")
        if ph not in counts:
            bad("%s: unexpected ph %r" % (w, ph))
            continue
        counts[ph] += 1
        for k, t in (("name", str), ("pid", int), ("tid", int)):
            if not isinstance(ev.get(k), t):
                bad("%s: %s missing or not %s" % (w, k, t.__name__))
        if ph == "M":
            continue
        ts = ev.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool) or ts < 0:
            bad("%s: ts missing or negative" % w)
            continue
        if ph == "C":
            a = ev.get("args")
            if not isinstance(a, dict) or not a or not all(
                    isinstance(v, (int, float)) and v >= 0 for v in a.values()):
                bad("%s: counter args must be non-negative numbers" % w)
            track = (ev["pid"], ev["tid"], ev["name"])
            if counter_ts.get(track, -1) > ts:
                bad("%s: ts goes backwards on counter track %r" % (w, track))
            counter_ts[track] = ts
        elif ph == "i":
            if ev.get("s") not in ("g", "p", "t"):
                bad("%s: instant scope s must be g, p or t" % w)
            instant_names.append(ev["name"])
        else:
            if not isinstance(ev.get("cat"), str) or not isinstance(ev.get("id"), (str, int)):
                bad("%s: async events need cat and id" % w)
                continue
            track = (ev["cat"], ev["id"])
            if slice_ts.get(track, -1) > ts:
                bad("%s: ts goes backwards on async track %r" % (w, track))
            slice_ts[track] = ts
            if ph == "b":
                if track in open_slices:
                    bad("%s: slice %r opened twice" % (w, track))
                open_slices[track] = ev["name"]
                size = ev.get("args", {}).get("size")
                if args.min_slice_bytes is not None and (
                        not isinstance(size, int) or size < args.min_slice_bytes):
                    bad("%s: slice of %r bytes, below --min-slice-bytes" % (w, size))
            else:
                if track not in open_slices:
                    bad("%s: slice %r closed but not open" % (w, track))
                elif open_slices.pop(track) != ev["name"]:
                    bad("%s: slice %r closed under another name" % (w, track))
    for track in list(open_slices)[:5]:
        bad("slice %r never closed" % (track,))
    if args.expect_counters and not counts["C"]:
        bad("no counter events")
    if args.expect_slices and not counts["b"]:
        bad("no async slices")
    for prefix in args.expect_instants:
        if not any(nm.startswith(prefix) for nm in instant_names):
            bad("no instant named %r..." % prefix)
    if args.stats:
        print(json.dumps({"events": len(doc["traceEvents"]), "by_phase": counts,
                          "counter_tracks": len(counter_ts)}))
    for m in problems:
        print("validate_perfetto: " + m, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
