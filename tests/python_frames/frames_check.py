"""frames_check.py LIB cdll|pydll

Captures the Python stack from C (libpyprobe.so) in many shapes of Python
code and compares it, frame by frame, with what Python itself reports at the
call site: sys._getframe() for the function names (co_qualname on 3.11+,
co_name on 3.10) and traceback.extract_stack() for files and lines. cdll
calls run with the GIL released, pydll calls with the GIL held.
"""
import asyncio
import ctypes
import importlib.util
import os
import sys
import tempfile
import threading
import traceback

LIB, MODE = sys.argv[1], sys.argv[2]
lib = (ctypes.CDLL if MODE == "cdll" else ctypes.PyDLL)(LIB)
lib.probe_capture.argtypes = [ctypes.c_char_p, ctypes.c_int]
lib.probe_capture_id.restype = ctypes.c_uint
CAP = 128
QUALNAME = sys.version_info >= (3, 11)


def expected(frame):
    """(function, file, line) innermost first, as Python sees the stack."""
    names = []
    f = frame
    while f is not None:
        names.append(f.f_code.co_qualname if QUALNAME else f.f_code.co_name)
        f = f.f_back
    summary = list(reversed(traceback.extract_stack(frame)))
    assert len(summary) == len(names), (len(summary), len(names))
    return [(n, s.filename, s.lineno) for n, s in zip(names, summary)]


def parse(raw):
    out = []
    for line in raw.decode("utf-8").splitlines():
        fn, path, lineno = line.split("\t")
        out.append((fn, path, int(lineno)))
    return out


def probe():
    """Returns (captured, expected) for this call site."""
    buf = ctypes.create_string_buffer(1 << 22)
    exp = expected(sys._getframe()); n = lib.probe_capture(buf, len(buf))  # noqa: E702 (same line on purpose)
    assert n >= 0, "probe buffer too small"
    return parse(buf.value), exp


# ---- scenarios: each returns probe()'s result from a different shape of code

def nested():
    def a():
        return b()

    def b():
        return c()

    def c():
        return probe()
    return a()


class Widget:
    def method(self):
        return probe()

    def __init__(self):
        self.result = probe()


def generator():
    def gen():
        yield probe()
    return next(gen())


def generator_nested():
    def inner():
        yield probe()

    def outer():
        yield from inner()
    return next(outer())


def coroutine():
    async def leaf():
        await asyncio.sleep(0)
        return probe()

    async def main():
        return await leaf()
    return asyncio.run(main())


def in_thread():
    box = {}

    def target():
        box["r"] = probe()
    t = threading.Thread(target=target, name="probe-thread")
    t.start()
    t.join()
    return box["r"]


def worker_threads():
    """Several threads at once, each calling a hot function many times. On
    free-threaded 3.14+ every thread but the first runs its own copy of the
    bytecode (thread-local bytecode), specialized as it warms up, and a new
    thread's first call of a code object makes that object's copy array grow
    while the others walk theirs (it starts with room for 16 copies: more
    threads than that are alive at once). Lines must be right on every
    thread."""
    results = []
    lock = threading.Lock()
    n_threads = 24
    start = threading.Barrier(n_threads)

    def hot(i):
        if i % 97 == 0:
            return probe()
        return i + 1

    def target():
        mine = []
        start.wait()
        for i in range(1000):
            r = hot(i)
            if isinstance(r, tuple):
                mine.append(r)
        with lock:
            results.extend(mine)

    threads = [threading.Thread(target=target, name=f"worker-{k}") for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def recursion(depth):
    if depth == 0:
        return probe()
    return recursion(depth - 1)


def lambda_and_comprehension():
    f = lambda: probe()  # noqa: E731
    return [f() for _ in range(1)][0]


def genexpr():
    return list(probe() for _ in range(1))[0]


def non_ascii():
    # Latin-1 (kind 1), Cyrillic (kind 2) and an astral character in the
    # directory (kind 4), in both the file name and the function name.
    d = tempfile.mkdtemp(prefix="pyframes_\U0001F600_")
    path = os.path.join(d, "модуль_ü.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("def grüße(cb):\n    return cb()\n\n"
                 "def функция(cb):\n    return grüße(cb)\n")
    spec = importlib.util.spec_from_file_location("модуль_ü", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.функция(probe)


def lone_surrogate():
    # An undecodable file name (surrogateescape) must come out as U+FFFD.
    code = compile("def f(cb):\n    return cb()\n", "bad_\udcff_name.py", "exec")
    ns = {}
    exec(code, ns)
    got, exp = ns["f"](probe)
    exp = [(fn, path.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
            .replace("\ufffd\ufffd\ufffd", "\ufffd"), line) for fn, path, line in exp]
    return got, exp


SCENARIOS = [
    ("nested", nested),
    ("method", lambda: Widget().method()),
    ("__init__", lambda: Widget().result),
    ("generator", generator),
    ("yield from", generator_nested),
    ("asyncio coroutine", coroutine),
    ("threading.Thread", in_thread),
    ("recursion 50", lambda: recursion(50)),
    ("frame cap (300 deep)", lambda: recursion(300)),
    ("lambda + comprehension", lambda_and_comprehension),
    ("generator expression", genexpr),
    ("non-ASCII names", non_ascii),
    ("lone surrogate", lone_surrogate),
]


def check_all(name, fn):
    """fn returns many (captured, expected) pairs: all must agree."""
    pairs = fn()
    bad = [(got, exp) for got, exp in pairs if got != exp]
    if pairs and not bad:
        print(f"ok   {name}: {len(pairs)} stacks")
        return True
    print(f"FAIL {name}: {len(bad)} of {len(pairs)} stacks differ")
    return check(name + " (first that differs)", lambda: bad[0]) if bad else False


def check(name, fn):
    got, exp = fn()
    if len(exp) > CAP:
        exp = exp[:CAP]  # the innermost 128 are kept
    if got == exp:
        print(f"ok   {name}: {len(got)} frames")
        return True
    print(f"FAIL {name}: captured {len(got)} frames, expected {len(exp)}")
    for i in range(max(len(got), len(exp))):
        g = got[i] if i < len(got) else None
        e = exp[i] if i < len(exp) else None
        print(f"  {'  ' if g == e else '!='} #{i} got={g} expected={e}")
    return False


def check_identity():
    # The same call site interns to the same id; a different line does not.
    ids = [lib.probe_capture_id() for _ in range(3)]
    other = lib.probe_capture_id()
    ok = len(set(ids)) == 1 and ids[0] != 0 and other not in (0, ids[0])
    print(f"{'ok  ' if ok else 'FAIL'} stack identity: {ids} then {other}")
    return ok


def main():
    sys.setrecursionlimit(5000)
    ver = ctypes.create_string_buffer(64)
    lib.probe_version(ver, 64)
    want = "%d.%d.%d" % sys.version_info[:3]
    print(f"python {sys.version.split()[0]} ({sys.executable}), probe sees {ver.value.decode()!r}, mode {MODE}")
    ok = ver.value.decode().startswith(want)
    if not ok:
        print(f"FAIL version: expected {want}")
    for name, fn in SCENARIOS:
        ok = check(name, fn) and ok
    ok = check_all("worker threads, hot loop", worker_threads) and ok
    ok = check_identity() and ok
    sys.exit(0 if ok else 1)


main()
