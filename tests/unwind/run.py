"""run.py zoo|zoo-cupti|python|same-sites|rbp-loop|deep-after-shallow: the fast
unwinder against libunwind.

zoo         unwind_zoo under TORCHSEAL_UNWIND=check: no stack may differ,
            every shape must have been compared, and the signal frames and
            the alternate stack must have gone to libunwind.
zoo-cupti   the same with the CUPTI backend: stacks are captured inside
            CUPTI's callback, below the runtime and driver frames.
python      a Python program allocating through ctypes from nested Python
            frames, on every interpreter present, under =check.
same-sites  unwind_zoo leak under =fast and =libunwind: the two reports must
            name the same leak sites, frame for frame.
rbp-loop    one site allocating 1000 times under a caller that keeps a changing
            counter in rbp, under =check: the memo must still serve.
deep-after-shallow  a deep stack after a shallow one of the same recursion,
            past the default stack depth, under =check: the memo must serve.

Python 3 standard library only.
"""
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import harness  # noqa: E402
from harness import Failed, clean_env, preload, skip  # noqa: E402

ENV = os.environ
SHIM, CLI = ENV["TSEAL_UW_SHIM"], ENV["TSEAL_UW_CLI"]
SIM, ZOO, PLUGIN = ENV["TSEAL_UW_SIMCUDA_DIR"], ENV["TSEAL_UW_ZOO"], ENV["TSEAL_UW_PLUGIN"]
CHECK_RE = re.compile(r"unwind check: (\d+) stacks compared with libunwind, (\d+) differed; "
                      r"(\d+) walked by libunwind alone; (\d+) frame rules learned")
REUSED_RE = re.compile(r"(\d+) walks finished from the previous one's frames, (\d+) of them "
                       r"the same stack whole")


def run(cmd, tmp, unwind, extra=None, backend="hooks"):
    env = clean_env(drop_prefixes=("TORCHSEAL_",))
    env.update({"LD_PRELOAD": preload(SHIM), "LD_LIBRARY_PATH": SIM,
                "TORCHSEAL_UNWIND": unwind, "TORCHSEAL_BACKEND": backend,
                "TORCHSEAL_OUTPUT": os.path.join(tmp, "P-%p")})
    env.update(extra or {})
    p = harness.run(cmd, env, timeout=150)
    if p.returncode != 0:
        raise Failed(f"{cmd} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def check_line(stderr):
    m = CHECK_RE.search(stderr)
    if not m:
        raise Failed("no unwind check line in stderr:\n" + stderr)
    compared, differed, alone, rules = map(int, m.groups())
    print(f"compared={compared} differed={differed} libunwind_alone={alone} rules={rules}")
    if differed:
        raise Failed(f"{differed} of {compared} stacks differ from libunwind's:\n" + stderr)
    return compared, alone, rules


def zoo(backend="hooks"):
    with tempfile.TemporaryDirectory() as tmp:
        p = run([ZOO, PLUGIN], tmp, "check", backend=backend)
        compared, alone, rules = check_line(p.stderr)
        reports = [f for f in os.listdir(tmp) if f.endswith(".json")]
        with open(os.path.join(tmp, reports[0])) as f:
            used = json.load(f).get("process", {}).get("backend")
        if used != backend:
            raise Failed(f"backend {used}, want {backend}")
        # 41 depths x 3, realigned, alloca, 4 x 50 threads, the first plugin
        # rounds.
        if compared < 41 * 3 + 2 + 200 + 15:
            raise Failed(f"only {compared} stacks compared")
        if alone < 2:
            raise Failed(f"signal frame / alternate stack: {alone} captures went to libunwind, want >= 2")
        if rules < 10:
            raise Failed(f"only {rules} rules learned")
        if "unloaded too often" not in p.stderr:
            raise Failed("70 plugin unloads: no line saying the walker gave up its rules:\n" + p.stderr)
        quiet = p.stderr.find("unwind_zoo: quiet unloads done")
        if quiet < 0 or p.stderr.find("unloaded too often") < quiet:
            raise Failed("100 unloads of a plugin that never ran cost the walker its rules "
                         "(or the run never got past them):\n" + p.stderr)


def memo_run(mode, stacks):
    """unwind_zoo MODE under =check: no stack may differ and at least `stacks`
    must be compared. Returns (walks that ended in the memo, of which the
    same stack whole)."""
    with tempfile.TemporaryDirectory() as tmp:
        p = run([ZOO, mode, PLUGIN], tmp, "check")
    compared, _, _ = check_line(p.stderr)
    if compared < stacks:
        raise Failed(f"only {compared} stacks compared")
    m = REUSED_RE.search(p.stderr)
    if not m:
        raise Failed("no count of walks finished from the previous one's frames:\n" + p.stderr)
    reused, same = int(m.group(1)), int(m.group(2))
    print(f"reused={reused} same={same}")
    return reused, same


def rbp_loop():
    """1000 allocations from one site under callers that keep a changing
    counter in rbp: the walks must agree with libunwind, and each but the
    first must end in the last one's frames (the saved counter is a word no
    step reads; static cudart's frames under the driver hooks are such
    callers, and before this every walk of theirs started over)."""
    reused, _ = memo_run("rbp-loop", 1000)
    if reused < 990:
        raise Failed(f"only {reused} of 1000 walks ended in the previous walk's frames")


def deep_after_shallow():
    """500 allocations 25 frames of one recursing function deep, then 1000 at
    75, past the default stack depth: the first deep walk meets the shallow
    walks' outer frames and ends in them, and the memo it leaves must serve
    the next deep stack whole (it once kept more frames than a walk may
    return, and every later walk started over: 2.2x the cost at depth 80)."""
    reused, same = memo_run("deep-after-shallow", 1500)
    # Two walks start over (the first of each depth), and the first deep one
    # ends in the shallow walks' frames.
    if same < 1480:
        raise Failed(f"only {same} of 1500 walks found the previous walk's stack whole "
                     f"({reused} ended in its frames)")


def python():
    pythons = ENV.get("TSEAL_UW_PYTHONS", "").split()
    if not pythons:
        skip("no CPython interpreter found")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "py_alloc.py")
    for py in pythons:
        with tempfile.TemporaryDirectory() as tmp:
            print(py)
            p = run([py, script, os.path.join(SIM, "libcudart.so.13")], tmp, "check")
            compared, _, _ = check_line(p.stderr)
            # 14 depths x 3, a generator of 20, 10 methods, a thread of 20.
            if compared < 92:
                raise Failed(f"{py}: only {compared} stacks compared")


def sites(report):
    with open(report) as f:
        d = json.load(f)
    out = []
    for leak in d["leaks"]:
        frames = [(fr.get("function"), fr.get("file"), fr.get("line"))
                  for fr in leak.get("frames", [])]
        out.append((leak.get("bytes"), leak.get("allocations"), frames))
    return sorted(out, key=repr)


def same_sites():
    got = {}
    for mode in ("fast", "libunwind"):
        with tempfile.TemporaryDirectory() as tmp:
            run([ZOO, "leak", PLUGIN], tmp, mode)
            reports = [f for f in os.listdir(tmp) if f.endswith(".json")]
            if len(reports) != 1:
                raise Failed(f"{mode}: expected one report, found {reports}")
            got[mode] = sites(os.path.join(tmp, reports[0]))
    if not got["fast"] or len(got["fast"]) < 3:
        raise Failed(f"expected >= 3 leak sites, got {got['fast']}")
    if got["fast"] != got["libunwind"]:
        raise Failed("leak sites differ:\nfast:\n%s\nlibunwind:\n%s" % (
            json.dumps(got["fast"], indent=1), json.dumps(got["libunwind"], indent=1)))
    print(f"{len(got['fast'])} leak sites, identical frames")


try:
    {"zoo": zoo, "zoo-cupti": lambda: zoo("cupti"), "python": python,
     "same-sites": same_sites, "rbp-loop": rbp_loop,
     "deep-after-shallow": deep_after_shallow}[sys.argv[1]]()
except Failed as e:
    print("FAIL: %s" % e)
    sys.exit(1)
print("PASS")
