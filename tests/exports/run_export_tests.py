#!/usr/bin/env python3
"""Tests of `torchseal export` (suite 'exports'). Python 3 stdlib only.

  run_export_tests.py TEST

Paths come from the environment (set by tests/exports/meson.build):
  TSEAL_EX_CLI       the torchseal CLI
  TSEAL_EX_FIXTURE   tseal_fixture (synthetic .tseal writer)
  TSEAL_EX_PROBE     pickle_probe
  TSEAL_EX_SHIM, TSEAL_EX_SIMCUDA_DIR, TSEAL_EX_EXAMPLE
                     for the end-to-end test; empty = SKIP (exit 77)
"""
import json
import os
import pickle
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, ".."))
import harness  # noqa: E402
import validate_memory_viz  # noqa: E402
from harness import SKIP, Failed, clean_env, preload, with_simcuda  # noqa: E402

PY = sys.executable
VALIDATE_MV = os.path.join(HERE, "validate_memory_viz.py")
VALIDATE_PF = os.path.join(HERE, "validate_perfetto.py")

# Bytes per history event the 1M-event snapshot may cost. Per event the
# fixture makes ~0.45 allocations (2 entries) + ~0.4 frees (3 entries), i.e.
# ~2.2 trace entries. An entry is a dict whose 6 keys and action value are
# 2-byte memo GETs (16 B), addr as LONG1 (8 B), size (3-5 B), stream (2 B),
# time_us as LONG1 (9 B), a 2-5 byte GET of the shared frames list, and
# EMPTY_DICT/MARK/SETITEMS (3 B): 45-50 B, so ~110 B/event. 150 B leaves
# room for the other event mixes (OOMs, teardown) and the final segments,
# and fails if frames stop being memoized (an unshared 8-frame list costs
# several hundred bytes per entry).
MAX_BYTES_PER_EVENT = 150
MAX_1M_FILE = 300 * 10 ** 6


def env(name):
    v = os.environ.get(name, "")
    return v


def run(cmd, expect_rc=0, env=None, timeout=None):
    r = harness.run(cmd, env, timeout=timeout)
    if expect_rc is not None and r.returncode != expect_rc:
        raise Failed("exit status %d expected\n%s" % (expect_rc, r.describe()))
    return r


def fixture(tmp, name, *extra):
    path = os.path.join(tmp, name + ".tseal")
    expect = os.path.join(tmp, name + ".expect.json")
    run([env("TSEAL_EX_FIXTURE"), path, "--expect", expect] + list(extra))
    return path, expect


def export(history, *args, expect_rc=0):
    return run([env("TSEAL_EX_CLI"), "export", history] + list(args), expect_rc=expect_rc)


def validate_mv(path, *args):
    r = run([PY, VALIDATE_MV, path, "--stats"] + list(args))
    return json.loads(r.stdout)


def validate_pf(path, *args):
    r = run([PY, VALIDATE_PF, path, "--stats"] + list(args))
    return json.loads(r.stdout)


def test_small(tmp):
    hist, expect = fixture(tmp, "small", "--events", "3000")
    mv, pf = os.path.join(tmp, "s.pickle"), os.path.join(tmp, "s.json")
    r = export(hist, "--memory-viz", mv, "--perfetto", pf)
    if "wrote" not in r.stdout:
        raise Failed("no summary line: %r" % r.stdout)
    st = validate_mv(mv, "--empty-start", "--expect", expect, "--min-entries", "1000")
    if st["devices"] != 2:
        raise Failed("expected 2 device lists, got %d" % st["devices"])
    if not st["frames_nonempty"]:
        raise Failed("no entry has frames")
    snap = pickle.load(open(mv, "rb"))
    # Trimming: no torchseal/libcudart frame and no cudaMalloc frame may lead.
    for tr in snap["device_traces"]:
        for e in tr:
            if e["action"] == "snapshot":
                continue  # a mark: its one frame names the label
            if e["frames"]:
                top = e["frames"][0]
                if "torchseal" in top["name"] or top["name"].startswith("cuda") \
                        or "libcudart" in top["filename"]:
                    raise Failed("untrimmed frame leads: %r" % top)
                names = [f["name"] for f in e["frames"]]
                # Native frames (ending in main), then Python innermost first.
                if names[-1] == "<module>":
                    if names[-4:] != ["main", "Model.forward", "train_step", "<module>"]:
                        raise Failed("Python frames misplaced: %r" % names)
                elif names[-1] != "main":
                    raise Failed("outermost frame is not main: %r" % names)
    if not any(f["filename"] == "/app/train.py" for tr in snap["device_traces"]
               for e in tr for f in e["frames"]):
        raise Failed("no Python frames")
    # Inlined frames are expanded (fixture stacks divisible by 3 have one).
    if not any(f["name"].startswith("inlined_helper") for tr in snap["device_traces"]
               for e in tr for f in e["frames"]):
        raise Failed("inlined frame levels missing")
    # VMM allocations sit at synthetic addresses >= 2**52.
    if not any(e["addr"] >= 2 ** 52 for tr in snap["device_traces"] for e in tr
               if e["action"] == "alloc"):
        raise Failed("no VMM allocation shown")
    validate_pf(pf, "--min-slice-bytes", str(1 << 20), "--expect-counters", "--expect-slices",
                "--expect-instants", "OOM", "step", "mark", "invalid free", "teardown")
    # Reproducible: the same input gives the same bytes.
    mv2 = os.path.join(tmp, "s2.pickle")
    export(hist, "--memory-viz", mv2)
    if open(mv, "rb").read() != open(mv2, "rb").read():
        raise Failed("two exports of one history differ")


def test_max_entries(tmp):
    hist, _ = fixture(tmp, "win", "--events", "4000")
    full = os.path.join(tmp, "full.pickle")
    export(hist, "--memory-viz", full)
    total = validate_mv(full, "--empty-start")["entries"]
    for n in (1, 10, 500, total - 1, total, total + 10):
        out = os.path.join(tmp, "m%d.pickle" % n)
        export(hist, "--memory-viz", out, "--max-entries", str(n))
        st = validate_mv(out, "--max-entries", str(n))
        # Whole events only: at most one event's entries (a teardown can free
        # many) are dropped at the cut; the fixture's biggest ordinary event has 5.
        if n >= 10 and n < total and st["entries"] < n - 5 and st["entries"] < n // 2:
            raise Failed("--max-entries %d kept only %d entries" % (n, st["entries"]))
        if n >= total and st["entries"] != total:
            raise Failed("--max-entries %d >= total kept %d of %d" % (n, st["entries"], total))
    # The newest entries are the ones kept.
    snap_full = pickle.load(open(full, "rb"))
    snap_cut = pickle.load(open(os.path.join(tmp, "m500.pickle"), "rb"))
    for d in range(len(snap_full["device_traces"])):
        a, b = snap_full["device_traces"][d], snap_cut["device_traces"][d]
        if b and a[len(a) - len(b):] != b:
            raise Failed("device %d: --max-entries kept other than the newest entries" % d)
    if snap_full["segments"] != snap_cut["segments"]:
        raise Failed("--max-entries changed the final segments")


def test_device(tmp):
    hist, expect = fixture(tmp, "dev", "--events", "3000")
    for d in (0, 1, 3):
        out = os.path.join(tmp, "d%d.pickle" % d)
        export(hist, "--memory-viz", out, "--device", str(d))
        st = validate_mv(out, "--device", str(d), "--empty-start")
        if d == 3 and st["entries"]:
            raise Failed("device 3 does not exist but has entries")
        if d < 2:
            exp = json.load(open(expect))["devices"][d]
            snap = pickle.load(open(out, "rb"))
            if len(snap["segments"]) != exp["live_segments"]:
                raise Failed("--device %d: %d segments, fixture says %d" % (
                    d, len(snap["segments"]), exp["live_segments"]))


def test_window(tmp):
    hist, expect = fixture(tmp, "tw", "--events", "4000")
    full = os.path.join(tmp, "full.pickle")
    export(hist, "--memory-viz", full)
    snap = pickle.load(open(full, "rb"))
    times = sorted(e["time_us"] for tr in snap["device_traces"] for e in tr)
    t0, t1 = times[0], times[-1]
    start_us = round(json.load(open(expect))["start_unix"] * 1e6)
    lo = t0 + (t1 - t0) // 4
    hi = t0 + (t1 - t0) * 3 // 4
    cases = {
        "rel": ["--since", "%.6f" % ((lo - start_us) / 1e6), "--until",
                "%.6f" % ((hi - start_us) / 1e6)],
        "abs": ["--since", "%.6f" % (lo / 1e6), "--until", "%.6f" % (hi / 1e6)],
        "since_only": ["--since", "%.6f" % ((lo - start_us) / 1e6)],
        "until_only": ["--until", "%.6f" % (hi / 1e6)],
    }
    results = {}
    for name, args in cases.items():
        out = os.path.join(tmp, name + ".pickle")
        export(hist, "--memory-viz", out, *args)
        extra = ["--empty-start"] if name == "until_only" else []
        validate_mv(out, *extra)
        s = pickle.load(open(out, "rb"))
        ts = [e["time_us"] for tr in s["device_traces"] for e in tr]
        if not ts:
            raise Failed("%s: empty window" % name)
        if "--since" in args and min(ts) < lo - 1:
            raise Failed("%s: entry at %d before --since %d" % (name, min(ts), lo))
        if "--until" in args and max(ts) > hi + 1:
            raise Failed("%s: entry at %d after --until %d" % (name, max(ts), hi))
        results[name] = s
    if results["rel"] != results["abs"]:
        raise Failed("relative and absolute --since/--until disagree")
    # --until: the snapshot is the state at that time, not at exit.
    if results["until_only"]["segments"] == snap["segments"]:
        raise Failed("--until did not change the final segments")
    if results["since_only"]["segments"] != snap["segments"]:
        raise Failed("--since changed the final segments")
    # Combined with --device and --max-entries.
    out = os.path.join(tmp, "combo.pickle")
    export(hist, "--memory-viz", out, *cases["rel"], "--device", "1", "--max-entries", "100")
    validate_mv(out, "--device", "1", "--max-entries", "100")
    export(hist, "--memory-viz", out, "--since", "5", "--until", "1", expect_rc=2)


def test_truncated(tmp):
    hist, _ = fixture(tmp, "tr", "--events", "2000", "--truncate")
    mv, pf = os.path.join(tmp, "t.pickle"), os.path.join(tmp, "t.json")
    r = export(hist, "--memory-viz", mv, "--perfetto", pf)
    if "truncated" not in r.stderr or "warning" not in r.stderr:
        raise Failed("no truncation warning: %r" % r.stderr)
    validate_mv(mv, "--empty-start")
    validate_pf(pf, "--expect-counters")
    # No symbol table and no binaries: frames still well-formed (module+address).
    hist2, _ = fixture(tmp, "nosym", "--events", "500", "--no-symbols")
    export(hist2, "--memory-viz", mv)
    validate_mv(mv, "--empty-start")


def test_errors(tmp):
    cli = env("TSEAL_EX_CLI")
    junk = os.path.join(tmp, "junk.tseal")
    with open(junk, "w") as f:
        f.write("not a history\n")
    for args in ([junk, "--memory-viz", os.path.join(tmp, "x.pickle")],
                 [os.path.join(tmp, "missing.tseal"), "--perfetto", os.path.join(tmp, "x.json")],
                 [junk],
                 [junk, "--memory-viz", os.path.join(tmp, "x.pickle"), "--device", "-1"]):
        r = run([cli, "export"] + args, expect_rc=2)
        lines = r.stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("torchseal: error: "):
            raise Failed("expected one 'torchseal: error:' line, got %r" % r.stderr)
    hist, _ = fixture(tmp, "e", "--events", "100")
    r = run([cli, "export", hist, "--memory-viz", os.path.join(tmp, "no", "such", "dir.pickle")],
            expect_rc=2)
    if not r.stderr.startswith("torchseal: error: "):
        raise Failed("unwritable output: %r" % r.stderr)
    if os.path.exists(os.path.join(tmp, "x.pickle")):
        raise Failed("a failed export left its output behind")
    r = run([cli, "export", "--help"])
    for word in ("--memory-viz", "--perfetto", "--max-entries", "TIMES", "EXIT STATUS"):
        if word not in r.stdout:
            raise Failed("--help lacks %s" % word)


def test_pickle_encoding(tmp):
    out = os.path.join(tmp, "probe.pickle")
    run([env("TSEAL_EX_PROBE"), out])
    data = open(out, "rb").read()
    p = validate_memory_viz.Problems()
    validate_memory_viz.check_opcodes(data, p)
    # The probe deliberately writes integers beyond 2**53 (exactness is the
    # snapshot validator's business, not the encoder's); nothing else may fail.
    real = [m for m in p.items if "JavaScript Number" not in m]
    if real:
        raise Failed("; ".join(real))
    got = pickle.loads(data)
    want_ints = [0, 1, 255, 256, 65535, 65536, 2147483647, 2147483648, -1, -128, -129, -32768,
                 -2147483648, -2147483649, 2 ** 53 - 1, 2 ** 63 - 1, -2 ** 63, 0x7f0000001000,
                 -(2 ** 40), 2 ** 55, 2 ** 64 - 1, 2 ** 63, 2 ** 63 + 12345]
    if got["ints"] != want_ints:
        raise Failed("ints: %r" % got["ints"])
    if got["misc"] != [None, True, False, 1.5, -0.1]:
        raise Failed("misc: %r" % got["misc"])
    want_str = ["", "plain", "a" * 255, "b" * 256, "c" * 70000, "caf\u00e9 \u20ac \U0001F600",
                b"bad\xff\xfe end".decode("utf-8", "replace"),
                "trunc\ufffd\ufffd", "overlong\ufffd\ufffd", "surrogate\ufffd\ufffd\ufffd"]
    if got["strings"] != want_str:
        raise Failed("strings: %r" % [s[:40] for s in got["strings"]])
    m = got["memo"]
    if m != [{"k": 1}, {"k": 1}, "shared", "shared"] or m[0] is not m[1]:
        raise Failed("memo: %r" % m)
    if got["batched"] != list(range(2500)) or got["empty"] != []:
        raise Failed("batched/empty lists wrong")
    # Minimal encodings: BININT1 for 255, LONG1 of 5 bytes for 2**31, 9 for 2**63.
    import pickletools
    ops = [(op.name, arg) for op, arg, _ in pickletools.genops(data)]
    if ("BININT1", 255) not in ops or ("BININT2", 65535) not in ops:
        raise Failed("small ints not minimally encoded")
    longs = {arg: None for name, arg in ops if name == "LONG1"}
    if 2147483648 not in longs or 2 ** 63 not in longs:
        raise Failed("LONG1 values missing")
    if data.count(b"\x8a\x05\x00\x00\x00\x80\x00") != 1:
        raise Failed("2**31 is not the 5-byte LONG1 00 00 00 80 00")
    if data.count(b"\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00") != 1:
        raise Failed("2**63 is not the 9-byte LONG1 with a 0x00 sign byte")


def test_large(tmp):
    n = 1000000
    hist, expect = fixture(tmp, "big", "--events", str(n))
    out = os.path.join(tmp, "big.pickle")
    export(hist, "--memory-viz", out)
    size = os.path.getsize(out)
    per_event = size / n
    print("1M-event snapshot: %d bytes, %.1f bytes/event (history %d bytes)" % (
        size, per_event, os.path.getsize(hist)))
    if size >= MAX_1M_FILE:
        raise Failed("snapshot is %d bytes, limit %d" % (size, MAX_1M_FILE))
    if per_event >= MAX_BYTES_PER_EVENT:
        raise Failed("%.1f bytes/event, limit %d" % (per_event, MAX_BYTES_PER_EVENT))
    st = validate_mv(out, "--empty-start", "--expect", expect)
    print("validated: %s" % json.dumps(st))
    # And the bounded version a browser can open.
    cut = os.path.join(tmp, "cut.pickle")
    export(hist, "--memory-viz", cut, "--max-entries", "500000")
    validate_mv(cut, "--max-entries", "500000", "--min-entries", "499000")


def test_e2e(tmp):
    shim, simcuda, exe = env("TSEAL_EX_SHIM"), env("TSEAL_EX_SIMCUDA_DIR"), env("TSEAL_EX_EXAMPLE")
    if not (shim and simcuda and exe and os.path.exists(shim) and os.path.exists(exe)):
        print("SKIP: shim, simcuda or the planted_leaks example is not built")
        return SKIP
    e = with_simcuda(clean_env(drop_prefixes=("TORCHSEAL_",)), simcuda)
    e["LD_PRELOAD"] = preload(shim)
    prefix = os.path.join(tmp, "P")
    e["TORCHSEAL_OUTPUT"] = prefix
    r = run([exe], expect_rc=None, env=e, timeout=120)
    hist = prefix + ".tseal"
    if not os.path.exists(hist):
        raise Failed("no %s after running the example (rc %d): %s" % (hist, r.returncode,
                                                                      r.stderr[-2000:]))
    mv, pf = os.path.join(tmp, "e.pickle"), os.path.join(tmp, "e.json")
    export(hist, "--memory-viz", mv, "--perfetto", pf)
    st = validate_mv(mv, "--empty-start", "--min-entries", "2")
    if not st["segments"]:
        raise Failed("planted_leaks leaks, but the snapshot has no live segment")
    if not st["frames_nonempty"]:
        raise Failed("no frames in a shim-produced snapshot")
    snap = pickle.load(open(mv, "rb"))
    files = {f["filename"] for s in snap["segments"] for f in s["frames"]}
    if not any(fn.endswith("planted_leaks.cpp") for fn in files):
        raise Failed("leak frames do not point at planted_leaks.cpp: %r" % sorted(files))
    validate_pf(pf, "--expect-counters")
    return 0


def test_validator(tmp):
    """The validator rejects what the browser viewer would choke on: every
    check the exports rely on, seen failing once on a snapshot made to break
    it (a validator that passes everything would pass every other test)."""
    frames = [{"filename": "train.py", "line": 7, "name": "step"}]
    t0 = 1700000000 * 10 ** 6

    def snapshot():
        seg = {"device": 0, "address": 0x1000, "total_size": 512, "stream": 0,
               "segment_type": "small", "allocated_size": 256, "active_size": 256,
               "requested_size": 256, "blocks": [
                   {"size": 256, "requested_size": 256, "address": 0x1000,
                    "state": "active_allocated", "frames": frames},
                   {"size": 256, "requested_size": 0, "address": 0x1100, "state": "inactive",
                    "frames": []}]}
        trace = [{"action": "segment_alloc", "addr": 0x1000, "size": 512, "stream": 0,
                  "time_us": t0, "frames": frames},
                 {"action": "alloc", "addr": 0x1000, "size": 256, "stream": 0,
                  "time_us": t0 + 1, "frames": frames}]
        return {"segments": [seg], "device_traces": [trace]}

    def check(name, data, expect, *args):
        path = os.path.join(tmp, name + ".pickle")
        with open(path, "wb") as f:
            f.write(data)
        r = run([PY, VALIDATE_MV, path, "--empty-start"] + list(args), expect_rc=None)
        if expect is None:
            if r.returncode != 0:
                raise Failed("%s: a valid snapshot was rejected\n%s" % (name, r.describe()))
        elif r.returncode != 1 or expect not in r.stderr:
            raise Failed("%s: expected exit 1 with %r\n%s" % (name, expect, r.describe()))

    def mutated(fn):
        snap = snapshot()
        fn(snap)
        return pickle.dumps(snap, protocol=4)

    check("valid", pickle.dumps(snapshot(), protocol=4), None)
    check("proto1", pickle.dumps(snapshot(), protocol=1), "does not start with PROTO")
    check("set", mutated(lambda s: s.update(allocator_settings={"x": {1}})),
          "opcode EMPTY_SET")
    check("batch", b"\x80\x04](" + b"K\x00" * 1001 + b"e.", "adds 1001 items")
    check("memo_mix", b"\x80\x04]\x94q\x01.", "MEMOIZE mixed with explicit BINPUT")
    check("underflow", b"\x80\x04(\x85.", "pops past a MARK")
    check("no_stop", pickle.dumps(snapshot(), protocol=4)[:-1], "without STOP")
    check("big_int", mutated(lambda s: s["device_traces"][0][1].update(stream=2 ** 53)),
          "is not exact as a JavaScript Number")
    check("category", mutated(lambda s: s["segments"][0].update(category="x")),
          "has a `category` key")
    check("surrogate", mutated(lambda s: s["device_traces"][0][0].update(
        frames=[{"filename": "\ud800", "line": 1, "name": "f"}])), "not valid UTF-8")
    check("negative", mutated(lambda s: s["device_traces"][0][1].update(size=-1)),
          "size must be a non-negative int")
    check("backwards", mutated(lambda s: s["device_traces"][0][1].update(time_us=t0 - 1)),
          "time_us goes backwards")
    check("frame_keys", mutated(lambda s: s["device_traces"][0][1].update(
        frames=[{"filename": "a", "line": 1}])), "must be {filename, line, name}")
    check("tiling", mutated(lambda s: s["segments"][0]["blocks"][1].update(size=128)),
          "block sizes do not sum to total_size")
    check("replay", mutated(lambda s: s["device_traces"][0].append(
        {"action": "free_completed", "addr": 0x1000, "size": 256, "stream": 0,
         "time_us": t0 + 2, "frames": frames})), "entry 2 (free_completed 0x1000)")


TESTS = {
    "small": test_small, "max_entries": test_max_entries, "device": test_device,
    "window": test_window, "truncated": test_truncated, "errors": test_errors,
    "pickle_encoding": test_pickle_encoding, "large": test_large, "e2e": test_e2e,
    "validator": test_validator,
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in TESTS:
        print("usage: run_export_tests.py {%s}" % ",".join(TESTS), file=sys.stderr)
        return 2
    name = sys.argv[1]
    for var in ("TSEAL_EX_CLI", "TSEAL_EX_FIXTURE", "TSEAL_EX_PROBE"):
        if not env(var):
            print("SKIP: %s is not set (the export command is not built)" % var)
            return SKIP
    with tempfile.TemporaryDirectory(prefix="tseal-export-") as tmp:
        try:
            rc = TESTS[name](tmp)
        except Failed as e:
            print("FAIL %s: %s" % (name, e), file=sys.stderr)
            return 1
    print("PASS %s" % name)
    return rc or 0


if __name__ == "__main__":
    sys.exit(main())
