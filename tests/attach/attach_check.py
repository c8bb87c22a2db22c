#!/usr/bin/env python3
"""`torchseal attach PID` without torch: a Python loop that calls simcuda's
cudaMalloc through ctypes, started without torchseal, is attached to, its
leaking line found, detached, and it runs on unharmed. And the refusals.

    attach_check.py BUILD SRC SCENARIO

refusals: not found, not Python, already tracked, not permitted (another
user), bad arguments: one line `torchseal: attach: ...`, exit 2, and the
target runs on.
ptrace-python3: the python3 running this test, through ptrace.
remote-exec-3.14 / ptrace-3.14: CPython 3.14 (scripts/python-interpreters),
through sys.remote_exec and through ptrace (its own, newer glibc).
Exit 0 pass, 1 fail, 77 skip (with the reason).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from harness import SKIP, Checker  # noqa: E402
import gotview  # noqa: E402
from session import Attach, Program, torchseal_threads  # noqa: E402

BUILD, SRC, SCENARIO = sys.argv[1], sys.argv[2], sys.argv[3]
CLI = os.path.join(BUILD, "report", "torchseal")
PLUGIN = os.path.join(BUILD, "tests", "reliability", "librel_cuda_refs.so")
SHIM = os.path.join(BUILD, "shim", "libtorchseal.so")
SIMGPU = os.path.join(SRC, "scripts", "simgpu")
CHECK = Checker("attach " + SCENARIO, verbose=True)

PROGRAM = '''\
import _ctypes, ctypes, os, sys, time
rt = ctypes.CDLL("libcudart.so.13")
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]

def alloc(n):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), n) == 0
    return p.value

pre = [alloc(1 << 14) for _ in range(2000)]    # before the attach: pre-existing
kept = []
i = 0
plugin, patched = None, 0
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    # A plugin with CUDA references, loaded again and again until five of
    # its loads were seen patched, then kept.
    if plugin is None:
        plugin = ctypes.CDLL(sys.argv[2])
        unpatched = plugin.cuda_refs_patched()
    elif i % 4 == 0 and patched < 5:
        patched += plugin.cuda_refs_patched() > unpatched
        _ctypes.dlclose(plugin._handle)
        plugin = ctypes.CDLL(sys.argv[2])
    print(f"plugin {i} {plugin.cuda_refs_patched()}", flush=True)
    kept.append(alloc(1 << 16))    # KEEP
    rt.cudaFree(pre.pop())
    scratch = alloc(1 << 12)
    rt.cudaFree(scratch)
    print(f"step {i} {len(kept)} {len(pre)}", flush=True)
    i += 1
    time.sleep(0.01)
print(f"exit ok {i}", flush=True)
'''


def done():
    sys.exit(CHECK.finish())


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def env_for():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCHSEAL_", "SIMCUDA_")) and k not in ("LD_PRELOAD",
                                                                       "CUDA_INJECTION64_PATH")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def python_314():
    sys.path.insert(0, os.path.join(SRC, "tests", "python_frames"))
    import find_pythons
    for name, path, why in find_pythons.found():
        if name == "py3.14":
            return path, why
    return "", "find_pythons.py does not know py3.14"


def line_of(tag):
    return next(i for i, l in enumerate(PROGRAM.splitlines(), 1) if tag in l)


def at_line(entry, script, line):
    return any(f.get("file") == script and f.get("line") == line
               for f in entry.get("python_frames") or [])


def refusal_ok(what, p_rc, err, expect):
    lines = [l for l in err.splitlines() if l.strip()]
    CHECK.eq(what + ": exit 2", p_rc, 2, err)
    CHECK.true(what + ": one line `torchseal: attach: ...` saying " + repr(expect),
               len(lines) == 1 and lines[0].startswith("torchseal: attach: ") and expect in lines[0],
               err)


def run_cli(args, env=None, user=None):
    argv = [CLI, "attach"] + [str(a) for a in args]
    if user:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] + argv
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


def scenario_refusals():
    with tempfile.TemporaryDirectory(prefix="tseal-attach-") as tmp:
        # Not found: a process that has exited.
        gone = subprocess.Popen(["true"])
        gone.wait()
        p = run_cli([gone.pid])
        refusal_ok("no such pid", p.returncode, p.stderr, "no process with pid")

        sleeper = subprocess.Popen(["sleep", "60"])
        try:
            p = run_cli([sleeper.pid, "--for", "1s"])
            refusal_ok("not Python", p.returncode, p.stderr, "is not a Python process")
            CHECK.true("sleep runs on", sleeper.poll() is None)
        finally:
            sleeper.kill()
            sleeper.wait()

        code = "import sys, time\nprint('ready', flush=True)\ntime.sleep(60)\n"
        env = env_for()
        env["LD_PRELOAD"] = SHIM
        tracked = Program([sys.executable, "-c", code], env)
        try:
            tracked.out.wait_for(lambda l: l == "ready", 30)
            p = run_cli([tracked.pid, "--for", "1s"])
            refusal_ok("already tracked", p.returncode, p.stderr, "is already tracked")
        finally:
            tracked.kill()

        plain = Program([sys.executable, "-c", code], env_for())
        try:
            plain.out.wait_for(lambda l: l == "ready", 30)
            bad = [([plain.pid, "--for", "10x"], "expected a duration"),
                   ([plain.pid, "--for", "1s", "--snapshot"], "give one of")]
            if sys.version_info < (3, 14):
                bad.append(([plain.pid, "--via", "remote-exec"], "needs Python 3.14+"))
            for args, expect in bad:
                p = run_cli(args)
                refusal_ok(" ".join(map(str, args[1:])), p.returncode, p.stderr, expect)
            # Another user may not attach (ptrace permission), checked
            # before anything is loaded.
            if os.getuid() == 0 and shutil.which("setpriv"):
                p = run_cli([plain.pid, "--for", "1s"], user=65534)
                refusal_ok("another user's process", p.returncode, p.stderr, "permission denied")
            else:
                CHECK.note("not checked", "another user's process (needs root and setpriv)")
            maps = open(f"/proc/{plain.pid}/maps").read()
            CHECK.true("no refusal loaded the shim", "libtorchseal" not in maps)
            CHECK.true("the target runs on", plain.p.poll() is None)
        finally:
            plain.kill()
    done()


def scenario_attach(python, via):
    if not os.path.exists(python):
        skip(f"{python} is missing")
    with tempfile.TemporaryDirectory(prefix="tseal-attach-") as tmp:
        os.chmod(tmp, 0o755)
        script = os.path.join(tmp, "loop.py")
        open(script, "w").write(PROGRAM)
        stop = os.path.join(tmp, "stop")
        prefix = os.path.join(tmp, "attached")
        prog = Program(["bash", SIMGPU, "--build", BUILD, python, script, stop, PLUGIN], env_for())
        try:
            if not CHECK.true("the loop started", prog.out.wait_for(lambda l: l.startswith("step 3 "), 60),
                              "\n".join(prog.out.all[-20:])):
                done()
            where = gotview.slots(prog.pid)
            before = gotview.read(prog.pid, where)
            # remote-exec: --for 60s ended by Ctrl-C (SIGINT to the CLI).
            interrupt = via == "remote-exec"
            cli = Attach(CLI, [prog.pid, "--for", "60s" if interrupt else "2s", "-o", prefix,
                               "--via", via])
            t0 = time.time()
            line = cli.err.wait_for(lambda l: "torchseal: attached" in l, 60)
            CHECK.true("the CLI says it attached", line, "\n".join(cli.err.all))
            threads_during = torchseal_threads(prog.pid)
            if interrupt:
                time.sleep(1)
                cli.p.send_signal(signal.SIGINT)
            rc = cli.wait(120)
            CHECK.eq("attach exits 0", rc, 0, "\n".join(cli.err.all))
            if interrupt:
                CHECK.true("Ctrl-C ended the tracking early, with its report",
                           time.time() - t0 < 45 and any("ending early" in l for l in cli.err.all),
                           cli.err.all)
            CHECK.true("the CLI says a window this short cannot give a growth verdict",
                       any("too few for a growth verdict" in l for l in cli.err.all), cli.err.all)
            CHECK.true("torchseal threads ran while attached", "torchseal-wr" in threads_during,
                       threads_during)
            CHECK.eq("no torchseal thread is left", torchseal_threads(prog.pid), [])
            CHECK.eq("every CUDA GOT entry holds its value from before", gotview.read(prog.pid, where),
                     before)
            steps_at_detach = len(prog.steps())
            CHECK.true("the loop keeps stepping after the detach",
                       prog.wait_steps(steps_at_detach + 5, 30))
            rc = prog.finish(stop)
            CHECK.eq("the loop exits 0", rc, 0, "\n".join(prog.out.all[-20:]))
            steps = prog.steps()
            CHECK.eq("its steps are consecutive and unchanged", steps, list(range(len(steps))))
            CHECK.true("every step line is what the program computes",
                       all(l == f"step {n} {n + 1} {2000 - n - 1}"
                           for n, l in enumerate(l for l in prog.out.all if l.startswith("step "))),
                       [l for l in prog.out.all if l.startswith("step ")][:5])
            CHECK.true("its last line is its own", prog.out.all[-1] == f"exit ok {len(steps)}",
                       prog.out.all[-3:])
            CHECK.true("it stepped after the detach too", len(steps) > steps_at_detach)
            # The plugin is loaded anew every 4th step, often at the base of
            # the last one, until five loads were seen patched, and then
            # kept through the detach, which must put its slots back (only
            # slots that still hold the shim's hooks, in objects loaded
            # then). Its count before the attach is what the loader itself
            # resolves (simcuda's runtime is global here).
            plugin = [tuple(map(int, l.split()[1:])) for l in prog.out.all if l.startswith("plugin ")]
            unpatched = plugin[0][1] if plugin else None
            CHECK.true("the reloaded plugin was patched while attached",
                       any(n > unpatched for _, n in plugin), plugin[-40:])
            after = [n for i, n in plugin if i >= steps_at_detach]
            CHECK.eq("after the detach its CUDA entries are what the loader gave them",
                     after, [unpatched] * len(after))
            report = CHECK.read_json(prefix + ".json")
            if report is None:
                done()
            line = line_of("# KEEP")
            at_keep = [e for e in report.get("leaks") or [] if at_line(e, script, line)]
            CHECK.true(f"the leak is found at loop.py:{line}", at_keep,
                       json.dumps(report, indent=1)[:3000])
            CHECK.true("64 KiB each", all(e["bytes"] % (1 << 16) == 0 for e in at_keep))
            pre_line = line_of("# before the attach")
            listed = [e for k in ("leaks", "reachable") for e in report.get(k) or []]
            CHECK.eq("nothing allocated before the attach is listed",
                     [e["bytes"] for e in listed if at_line(e, script, pre_line)], [])
            CHECK.true("the frees of pre-existing memory are counted",
                       report["summary"].get("preexisting_frees", 0) >= 1, report["summary"])
            CHECK.true("a history was written", os.path.getsize(prefix + ".tseal") > 0)
            text = open(prefix + ".txt").read()
            CHECK.true("the CLI printed the text report", cli.stdout.strip() == text.strip(),
                       cli.stdout[:500])
            replay = subprocess.run([CLI, "report", prefix + ".tseal"], capture_output=True, text=True)
            CHECK.eq("torchseal report reads the history", replay.returncode, 0, replay.stderr)
        finally:
            prog.kill()
    done()


def main():
    if SCENARIO == "refusals":
        scenario_refusals()
    if SCENARIO == "ptrace-python3":
        scenario_attach(sys.executable, "ptrace")
    if SCENARIO in ("remote-exec-3.14", "ptrace-3.14"):
        path, why = python_314()
        if not path:
            skip(f"CPython 3.14 is absent: {why}")
        scenario_attach(path, SCENARIO.split("-3.14")[0])
    print(f"unknown scenario {SCENARIO!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
