#!/usr/bin/env python3
"""Validate a `torchseal export --memory-viz` snapshot (Python stdlib only).

Checks, in order:
  1. the pickle stream: protocol 2-4, only opcodes the browser unpickler
     (MemoryViz.js) handles, no MEMOIZE mixed with BINPUT, APPENDS/SETITEMS
     batches of at most 1000 items, and a well-formed stack;
  2. the schema: top-level keys, segments and blocks, trace entries, frames,
     no `category` key anywhere, valid UTF-8, dict keys all strings, ints
     exact as JavaScript Numbers (< 2**53);
  3. consistency, per device: the state before the first trace entry is
     recovered by replaying the trace backwards from `segments` (as the
     viewer does), then the trace is replayed forwards: every entry must be
     legal, every live block must lie inside a live segment at every step,
     and the end state must equal `segments`.

Exit 0 if valid; 1 with one line per problem otherwise.

  validate_memory_viz.py FILE [--empty-start] [--expect J] [--device D]
                              [--max-entries N] [--min-entries N] [--stats]
"""
import argparse
import bisect
import json
import pickle
import pickletools
import sys

ALLOWED_OPCODES = {
    "PROTO", "FRAME", "STOP", "MARK", "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "TUPLE",
    "TUPLE1", "TUPLE2", "TUPLE3", "APPEND", "APPENDS", "SETITEMS", "SETITEM", "DICT", "LIST",
    "NONE", "NEWTRUE", "NEWFALSE", "BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT",
    "SHORT_BINUNICODE", "BINUNICODE", "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET",
    "MEMOIZE",
}
MAX_BATCH = 1000
JS_SAFE = 2 ** 53
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "snapshot", "oom"}
BLOCK_STATES = {"active_allocated", "active_pending_free", "inactive"}
SEGMENT_KEYS = {"device", "address", "total_size", "stream", "segment_type", "allocated_size",
                "active_size", "requested_size", "blocks"}
BLOCK_KEYS = {"size", "requested_size", "address", "state", "frames"}
ENTRY_KEYS = {"action", "addr", "size", "stream", "time_us", "frames"}
OOM_KEYS = {"action", "device_free", "size", "stream", "time_us", "frames"}
FRAME_KEYS = {"filename", "line", "name"}
# The int fields of each entry kind, in a fixed order.
ENTRY_INTS = tuple(sorted(ENTRY_KEYS - {"action", "frames"}))
OOM_INTS = tuple(sorted(OOM_KEYS - {"action", "frames"}))


class Problems:
    def __init__(self, limit=30):
        self.items = []
        self.count = 0
        self.limit = limit

    def add(self, msg):
        self.count += 1
        if len(self.items) < self.limit:
            self.items.append(msg)

    def __bool__(self):
        return self.count > 0


def _opcode_table():
    """Per opcode byte: (name, argument kind, items popped, items pushed).

    Argument kinds: n >= 0 fixed bytes, -1 a 1-byte length then that many
    bytes, -4 a 4-byte length then that many. Taken from pickletools, so the
    table cannot drift from Python's own opcode definitions.
    """
    table = [None] * 256
    for op in pickletools.opcodes:
        n = op.arg.n if op.arg is not None else 0
        if n < 0:
            n = {pickletools.TAKEN_FROM_ARGUMENT1: -1,
                 pickletools.TAKEN_FROM_ARGUMENT4U: -4}.get(n)
        table[ord(op.code)] = (op.name, n, len(op.stack_before), len(op.stack_after))
    return table


OPCODES = _opcode_table()
# Those that pop back to the last MARK; the first three leave a new object.
MARK_CONSUMERS = {"TUPLE", "DICT", "LIST", "APPENDS", "SETITEMS"}


def check_opcodes(data, p):
    """Stream-level checks; returns the declared protocol.

    A scan of its own rather than pickletools.genops: the 1M-event snapshot
    is 30M opcodes, and genops builds an object per argument. The stack is
    simulated as counts (items above the last MARK, and a list of the counts
    the MARKs hid), which is all the batch and underflow checks need.
    """
    proto = None
    used_memoize = used_put = False
    depth, marks = 0, []
    table = OPCODES
    i, n = 0, len(data)
    from_bytes = int.from_bytes
    while True:
        if i >= n:
            p.add("stream ends at byte %d without STOP" % n)
            break
        pos = i
        entry = table[data[i]]
        if entry is None or entry[0] not in ALLOWED_OPCODES:
            if pos == 0:
                p.add("stream does not start with PROTO (protocols 0/1 are rejected)")
            p.add("opcode %s at byte %d is not handled by the browser unpickler"
                  % (entry[0] if entry else "0x%02x" % data[i], pos))
            return proto
        name, arg, before, after = entry
        i += 1
        if arg > 0:
            i += arg
        elif arg == -1:
            ln = data[i] if i < n else 0
            i += 1 + ln
        elif arg == -4:
            ln = from_bytes(data[i:i + 4], "little")
            i += 4 + ln
        if i > n:
            p.add("%s at byte %d runs past the end of the stream" % (name, pos))
            return proto
        if pos == 0 and name != "PROTO":
            p.add("stream does not start with PROTO (protocols 0/1 are rejected)")
        if name == "MARK":
            marks.append(depth)
            depth = 0
            continue
        if name in MARK_CONSUMERS:
            if not marks:
                p.add("%s at byte %d without a MARK" % (name, pos))
                return proto
            items = depth // 2 if name == "SETITEMS" or name == "DICT" else depth
            if (name == "APPENDS" or name == "SETITEMS") and items > MAX_BATCH:
                p.add("%s at byte %d adds %d items (> %d overflows the browser's call stack)"
                      % (name, pos, items, MAX_BATCH))
            depth = marks.pop() + (1 if name in ("TUPLE", "DICT", "LIST") else 0)
            continue
        if depth < before:
            p.add("%s at byte %d pops past a MARK or an empty stack" % (name, pos))
            return proto
        depth += after - before
        if name == "STOP":
            break
        if name == "PROTO":
            proto = data[pos + 1]
            if not 2 <= proto <= 4:
                p.add("protocol %d: the browser accepts 2, 3 or 4" % proto)
        elif name == "MEMOIZE":
            used_memoize = True
        elif name == "BINPUT" or name == "LONG_BINPUT":
            used_put = True
        elif name == "LONG1":
            v = from_bytes(data[pos + 2:i], "little", signed=True)
            if abs(v) >= JS_SAFE:
                p.add("LONG1 %d at byte %d is not exact as a JavaScript Number" % (v, pos))
    if used_memoize and used_put:
        p.add("MEMOIZE mixed with explicit BINPUT/LONG_BINPUT indices")
    if proto is None:
        p.add("no PROTO opcode")
    return proto


def _where(chain):
    """The path of a (parent chain, piece) link: pieces are strings or list
    indices. Built only for a problem: formatting a path for each of the
    1M-event snapshot's 30M objects cost more than checking them."""
    parts = []
    while chain is not None:
        chain, piece = chain
        parts.append("[%d]" % piece if isinstance(piece, int) else piece)
    return "".join(reversed(parts))


def _bad_string(o):
    if o.isascii():
        return False
    try:
        o.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def walk_common(obj, path, p):
    """UTF-8, string keys, no `category`, JS-exact ints, everywhere."""
    pending = [(obj, (None, path))]
    seen = set()

    def scalar(v, link):
        t = type(v)
        if t is int:
            if not -JS_SAFE < v < JS_SAFE:
                p.add("%s: %d is not exact as a JavaScript Number" % (_where(link), v))
        elif t is str:
            if _bad_string(v):
                p.add("%s: string is not valid UTF-8" % _where(link))
        elif not (v is None or t is bool or t is float):
            p.add("%s: unexpected type %s" % (_where(link), t.__name__))

    while pending:
        o, chain = pending.pop()
        t = type(o)
        if t is not dict and t is not list:
            scalar(o, chain)
            continue
        if id(o) in seen:  # memoized and shared: already checked
            continue
        seen.add(id(o))
        if t is dict:
            for k, v in o.items():
                if type(k) is not str:
                    p.add("%s: non-string key %r" % (_where(chain), k))
                    scalar(k, (chain, " key"))
                    pending.append((v, (chain, "." + str(k))))
                    continue
                if k == "category":
                    p.add("%s: has a `category` key (breaks the viewer)" % _where(chain))
                if not k.isascii() and _bad_string(k):
                    p.add("%s key: string is not valid UTF-8" % _where(chain))
                tv = type(v)
                if tv is dict or tv is list:
                    pending.append((v, (chain, "." + k)))
                elif tv is int:
                    if not -JS_SAFE < v < JS_SAFE:
                        scalar(v, (chain, "." + k))
                elif tv is not str or not v.isascii():
                    scalar(v, (chain, "." + k))
        else:
            for i, v in enumerate(o):
                tv = type(v)
                if tv is dict or tv is list:
                    pending.append((v, (chain, i)))
                elif tv is not int or not -JS_SAFE < v < JS_SAFE:
                    scalar(v, (chain, i))


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_frames(frames, where, p, good=None):
    """`where` is a string or a function giving one (built only for a problem);
    `good`, a set of ids of frame lists already checked (the exporter shares
    one list between the entries of a stack)."""
    if good is not None and id(frames) in good:
        return
    if not isinstance(frames, list):
        p.add("%s: frames is not a list" % (where() if callable(where) else where))
        return
    ok = True
    for i, f in enumerate(frames):
        if not isinstance(f, dict) or f.keys() != FRAME_KEYS:
            ok = False
            p.add("%s.frames[%d]: must be {filename, line, name}, got %r"
                  % (where() if callable(where) else where, i, f))
            continue
        if type(f["filename"]) is not str or type(f["name"]) is not str \
                or not is_int(f["line"]):
            ok = False
            p.add("%s.frames[%d]: bad field types %r"
                  % (where() if callable(where) else where, i, f))
    if ok and good is not None:
        good.add(id(frames))


def check_schema(snap, p):
    if not isinstance(snap, dict):
        p.add("top level is not a dict")
        return False
    for k in ("segments", "device_traces"):
        if k not in snap:
            p.add("missing top-level key %r" % k)
    extra = set(snap) - {"segments", "device_traces", "allocator_settings"}
    if extra:
        p.add("unexpected top-level keys %s" % sorted(extra))
    if "allocator_settings" in snap and not isinstance(snap["allocator_settings"], dict):
        p.add("allocator_settings is not a dict")
    segs, traces = snap.get("segments"), snap.get("device_traces")
    if not isinstance(segs, list) or not isinstance(traces, list):
        p.add("segments / device_traces must be lists")
        return False
    if not traces:
        p.add("device_traces is empty: give one list per device")
    for d, tr in enumerate(traces):
        if not isinstance(tr, list):
            p.add("device_traces[%d] is not a list" % d)
            return False
        last_t = None
        good_frames = set()
        for i, e in enumerate(tr):
            def where(d=d, i=i):
                return "device_traces[%d][%d]" % (d, i)
            if type(e) is not dict:
                p.add("%s: not a dict" % where())
                continue
            a = e.get("action")
            if a not in ACTIONS:
                p.add("%s: bad action %r" % (where(), a))
                continue
            want, ints = (OOM_KEYS, OOM_INTS) if a == "oom" else (ENTRY_KEYS, ENTRY_INTS)
            if e.keys() != want:
                p.add("%s: keys %s, expected %s" % (where(), sorted(e), sorted(want)))
                continue
            for k in ints:
                v = e[k]
                if type(v) is not int or v < 0:
                    p.add("%s: %s must be a non-negative int, got %r" % (where(), k, v))
            check_frames(e["frames"], where, p, good_frames)
            t = e["time_us"]
            if type(t) is int:
                if last_t is not None and t < last_t:
                    p.add("%s: time_us goes backwards" % where())
                last_t = t
                # Epoch microseconds: 2001..2100, else the viewer shows odd dates.
                if not 978307200 * 10 ** 6 <= t <= 4102444800 * 10 ** 6:
                    p.add("%s: time_us %d is not epoch microseconds" % (where(), t))
    for i, s in enumerate(segs):
        where = "segments[%d]" % i
        if not isinstance(s, dict) or not SEGMENT_KEYS <= set(s) \
                or not set(s) <= SEGMENT_KEYS | {"frames"}:
            p.add("%s: keys %s, expected %s (+frames)" % (
                where, sorted(s) if isinstance(s, dict) else s, sorted(SEGMENT_KEYS)))
            continue
        for k in SEGMENT_KEYS - {"segment_type", "blocks"}:
            if not is_int(s[k]) or s[k] < 0:
                p.add("%s: %s must be a non-negative int" % (where, k))
        if s["segment_type"] not in ("large", "small"):
            p.add("%s: segment_type %r" % (where, s["segment_type"]))
        if not 0 <= s["device"] < len(traces):
            p.add("%s: device %r has no device_traces list" % (where, s["device"]))
        if "frames" in s:
            check_frames(s["frames"], where, p)
        addr = s["address"]
        allocated = active = 0
        if not isinstance(s["blocks"], list) or not s["blocks"]:
            p.add("%s: blocks must be a non-empty list" % where)
            continue
        for j, b in enumerate(s["blocks"]):
            bw = "%s.blocks[%d]" % (where, j)
            if not isinstance(b, dict) or set(b) != BLOCK_KEYS:
                p.add("%s: keys %s, expected %s" % (
                    bw, sorted(b) if isinstance(b, dict) else b, sorted(BLOCK_KEYS)))
                break
            if b["state"] not in BLOCK_STATES:
                p.add("%s: state %r" % (bw, b["state"]))
            if b["address"] != addr:
                p.add("%s: blocks must cover the segment in order without gaps" % bw)
            addr += b["size"]
            check_frames(b["frames"], bw, p)
            if b["state"] == "active_allocated":
                allocated += b["size"]
            if b["state"] != "inactive":
                active += b["size"]
        if addr != s["address"] + s["total_size"]:
            p.add("%s: block sizes do not sum to total_size" % where)
        if s["allocated_size"] != allocated or s["active_size"] != active:
            p.add("%s: allocated_size/active_size disagree with its blocks" % where)
    return not p


class Intervals:
    """Disjoint-or-not intervals by start address, with ordered lookups (the
    1M-event fixture needs better than a linear scan per entry)."""

    def __init__(self):
        self.size = {}    # start -> size
        self.state = {}   # start -> block state (blocks only)
        self.keys = []    # sorted starts

    def __contains__(self, addr):
        return addr in self.size

    def __len__(self):
        return len(self.size)

    def add(self, addr, size, state=None):
        bisect.insort(self.keys, addr)
        self.size[addr] = size
        if state is not None:
            self.state[addr] = state

    def remove(self, addr):
        del self.keys[bisect.bisect_left(self.keys, addr)]
        del self.size[addr]
        self.state.pop(addr, None)

    def containing(self, addr, size):
        """Start of an interval holding [addr, addr+size), or None."""
        i = bisect.bisect_right(self.keys, addr) - 1
        if i >= 0:
            a = self.keys[i]
            if addr + size <= a + self.size[a]:
                return a
        return None

    def overlapping(self, addr, size):
        """Start of an interval overlapping [addr, addr+size), or None."""
        i = bisect.bisect_right(self.keys, addr) - 1
        if i >= 0 and self.keys[i] + self.size[self.keys[i]] > addr:
            return self.keys[i]
        if i + 1 < len(self.keys) and self.keys[i + 1] < addr + size:
            return self.keys[i + 1]
        return None

    def as_dict(self, with_state):
        if with_state:
            return {a: [self.size[a], self.state[a]] for a in self.keys}
        return dict(self.size)


def replay_device(d, trace, final, empty_start, p):
    where = "device %d" % d

    def w(i, e):  # only for a problem: 4M formats cost more than the replay
        return "%s entry %d (%s 0x%x)" % (where, i, e["action"], e.get("addr") or 0)
    # Backwards from the final state: what must have been live before entry i.
    segs, blocks = Intervals(), Intervals()
    for s in final:
        segs.add(s["address"], s["total_size"])
        for b in s["blocks"]:
            if b["state"] != "inactive":
                blocks.add(b["address"], b["size"], b["state"])
    for i in range(len(trace) - 1, -1, -1):
        e = trace[i]
        a, addr, size = e["action"], e.get("addr"), e["size"]
        if a == "segment_free":
            if addr in segs:
                p.add("%s: segment is live after being freed" % w(i, e))
                return
            segs.add(addr, size)
        elif a == "free_completed":
            if addr in blocks:
                p.add("%s: block is live after free_completed" % w(i, e))
                return
            blocks.add(addr, size, "active_pending_free")
        elif a == "free_requested":
            if blocks.state.get(addr) != "active_pending_free":
                p.add("%s: no pending-free block after free_requested" % w(i, e))
                return
            blocks.state[addr] = "active_allocated"
        elif a == "alloc":
            if blocks.state.get(addr) != "active_allocated" or blocks.size[addr] != size:
                p.add("%s: block not live (or of another size) after its alloc" % w(i, e))
                return
            blocks.remove(addr)
        elif a == "segment_alloc":
            if segs.size.get(addr) != size:
                p.add("%s: segment not live (or of another size) after segment_alloc" % w(i, e))
                return
            segs.remove(addr)
    if empty_start and (len(segs) or len(blocks)):
        p.add("%s: %d segment(s)/%d block(s) live before the first entry, expected none "
              "(a free without its alloc?)" % (where, len(segs), len(blocks)))
    # Forwards, checking every step.
    for baddr in blocks.keys:
        if segs.containing(baddr, blocks.size[baddr]) is None:
            p.add("%s: initial block 0x%x outside every segment" % (where, baddr))
            return
    for i, e in enumerate(trace):
        a, addr, size = e["action"], e.get("addr"), e["size"]
        if a == "segment_alloc":
            o = segs.overlapping(addr, size)
            if o is not None:
                p.add("%s: overlaps live segment 0x%x" % (w(i, e), o))
                return
            segs.add(addr, size)
        elif a == "alloc":
            if segs.containing(addr, size) is None:
                p.add("%s: block outside every live segment" % w(i, e))
                return
            o = blocks.overlapping(addr, size)
            if o is not None:
                p.add("%s: overlaps live block 0x%x" % (w(i, e), o))
                return
            blocks.add(addr, size, "active_allocated")
        elif a == "free_requested":
            if blocks.state.get(addr) != "active_allocated" or blocks.size[addr] != size:
                p.add("%s: no such allocated block" % w(i, e))
                return
            blocks.state[addr] = "active_pending_free"
        elif a == "free_completed":
            if addr not in blocks:
                p.add("%s: no such block" % w(i, e))
                return
            blocks.remove(addr)
        elif a == "segment_free":
            if segs.size.get(addr) != size:
                p.add("%s: no such segment" % w(i, e))
                return
            o = blocks.overlapping(addr, size)
            if o is not None:
                p.add("%s: live block 0x%x inside the freed segment" % (w(i, e), o))
                return
            segs.remove(addr)
        elif a == "snapshot":
            # A torchseal_mark() label: the viewer lists it, no state changes.
            if addr != 0 or size != 0 or len(e["frames"]) != 1:
                p.add("%s: a mark has address 0, size 0 and one frame (its label)" % w(i, e))
        elif a in ("segment_map", "segment_unmap"):
            p.add("%s: torchseal never writes this action" % w(i, e))
    want_segs = {s["address"]: s["total_size"] for s in final}
    want_blocks = {b["address"]: [b["size"], b["state"]] for s in final for b in s["blocks"]
                   if b["state"] != "inactive"}
    if segs.as_dict(False) != want_segs or blocks.as_dict(True) != want_blocks:
        p.add("%s: replaying the trace ends in %d segment(s)/%d block(s), `segments` holds "
              "%d/%d" % (where, len(segs), len(blocks), len(want_segs), len(want_blocks)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--empty-start", action="store_true",
                    help="unwindowed export: nothing may be live before the first entry")
    ap.add_argument("--expect", help="fixture ground truth (tseal_fixture --expect)")
    ap.add_argument("--device", type=int, help="only this device may have entries/segments")
    ap.add_argument("--max-entries", type=int, help="at most this many trace entries in all")
    ap.add_argument("--min-entries", type=int, default=0, help="at least this many entries")
    ap.add_argument("--stats", action="store_true", help="print a JSON summary on stdout")
    args = ap.parse_args()

    with open(args.file, "rb") as f:
        data = f.read()
    p = Problems()
    check_opcodes(data, p)
    if p:
        return report(p)
    try:
        snap = pickle.loads(data)
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        p.add("pickle.loads failed: %s" % e)
        return report(p)
    walk_common(snap, "snapshot", p)
    if not check_schema(snap, p):
        return report(p)
    traces, segs = snap["device_traces"], snap["segments"]
    by_dev = {}
    for s in segs:
        by_dev.setdefault(s["device"], []).append(s)
    for d, tr in enumerate(traces):
        replay_device(d, tr, by_dev.get(d, []), args.empty_start, p)
    total = sum(len(t) for t in traces)
    if args.max_entries is not None and total > args.max_entries:
        p.add("%d trace entries, more than --max-entries %d" % (total, args.max_entries))
    if total < args.min_entries:
        p.add("%d trace entries, expected at least %d" % (total, args.min_entries))
    if args.device is not None:
        if len(traces) != args.device + 1:
            p.add("--device %d: expected %d device_traces lists, got %d"
                  % (args.device, args.device + 1, len(traces)))
        for d, tr in enumerate(traces):
            if d != args.device and tr:
                p.add("device %d has entries, only device %d was exported" % (d, args.device))
        if any(s["device"] != args.device for s in segs):
            p.add("segments of other devices than %d" % args.device)
    if args.expect:
        with open(args.expect) as f:
            exp = json.load(f)
        for d, want in enumerate(exp["devices"]):
            got_segs = by_dev.get(d, [])
            tr = traces[d] if d < len(traces) else []
            got = {
                "live_segments": len(got_segs),
                "live_bytes": sum(s["total_size"] for s in got_segs),
                "allocs": sum(1 for e in tr if e["action"] == "alloc"),
                "ooms": sum(1 for e in tr if e["action"] == "oom"),
            }
            for k, v in got.items():
                if want[k] != v:
                    p.add("device %d: %s is %d, the fixture says %d" % (d, k, v, want[k]))
    if args.stats:
        print(json.dumps({
            "bytes": len(data), "entries": total, "devices": len(traces),
            "segments": len(segs),
            "per_device": [len(t) for t in traces],
            "frames_nonempty": sum(1 for t in traces for e in t if e["frames"]),
        }))
    return report(p)


def report(p):
    for m in p.items:
        print("validate_memory_viz: " + m, file=sys.stderr)
    if p.count > len(p.items):
        print("validate_memory_viz: ... and %d more" % (p.count - len(p.items)), file=sys.stderr)
    return 1 if p else 0


if __name__ == "__main__":
    sys.exit(main())
