#!/usr/bin/env python3
"""torchseal reliability tests: load, faults, fork, disk, config, host integrity.

One invocation runs one scenario (meson registers one test per scenario):

    run.py stress                       8 threads x N pairs + SIGUSR1 every 10 ms
    run.py crash MODE [capped]          MODE: segv abort exit kill; capped: under
                                        TORCHSEAL_HISTORY_LIMIT (a segmented history)
    run.py fork-live [capped] | fork-hammer | exec-noncuda
    run.py disk-full | unwritable-fallback | symlink-output | file-modes
    run.py bad-config VAR VALUE
    run.py host-integrity
    run.py signal MODE                  MODE: before after ignore

Paths come from the environment meson sets (an empty or missing one makes
the test SKIP, exit 77):

    TSEAL_REL_SHIM          build/shim/libtorchseal.so
    TSEAL_REL_SIMCUDA_DIR   directory holding simcuda's libcudart.so.13, libcuda.so.1
    TSEAL_REL_HISTSTAT      tests/reliability/histstat (reads a .tseal, prints JSON)
    TSEAL_REL_BIN_<name>    test programs (examples/stress_*.cpp, crash_*, fork_*,
                            signals_*, tests/reliability/host_integrity.cpp)

TSEAL_REL_SHIM_LINKED=1: the test programs link the shim themselves, so it
is not preloaded (tests/tsan: a ThreadSanitizer runtime cannot be preloaded).

Load size: STRESS_PAIRS (pairs per thread) if set in the environment, else
TSEAL_REL_STRESS_PAIRS_CI (what meson sets for CI). The full figure of the
issue is STRESS_PAIRS=250000 (8 x 250k pairs = 4,000,002 events).

Every child process runs under a watchdog: past its time limit the whole
process group is killed and the test FAILS as a deadlock.

Exit status: 0 pass, 1 fail, 77 skip. Python 3 standard library only.
"""

import glob
import json
import os
import random
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import harness  # noqa: E402
from harness import (Checker, Failed, clean_env, need, preload, skip, tail,  # noqa: E402
                     with_simcuda)

WATCHDOG = 120  # seconds per child process unless a scenario says otherwise


def binary(name):
    return need("TSEAL_REL_BIN_" + name, "test program " + name)


def base_env(with_shim=True):
    # ASAN_OPTIONS etc. pass through (sanitizer runs).
    env = clean_env(drop_prefixes=("TORCHSEAL_", "TSEAL_", "SIMCUDA_"), drop=("STRESS_PAIRS",))
    simcuda = need("TSEAL_REL_SIMCUDA_DIR", "simcuda")
    for lib in ("libcudart.so.13", "libcuda.so.1"):
        if not os.path.exists(os.path.join(simcuda, lib)):
            skip("simcuda's %s is not built yet in %s" % (lib, simcuda))
    with_simcuda(env, simcuda)
    linked = os.environ.get("TSEAL_REL_SHIM_LINKED") == "1"
    shim = need("TSEAL_REL_SHIM", "shim (libtorchseal.so)") if with_shim and not linked else None
    if preload(shim):
        env["LD_PRELOAD"] = preload(shim)
    env["TORCHSEAL_LOG"] = "warn"
    return env


# GCC 12's ASan allocator has no fork handler: a child forked while another
# thread of its parent was inside malloc waits forever on the allocator's
# lock (seen in CI: a forked child's first thread stuck in the allocator's
# refill). That is the sanitizer's runtime, not torchseal: glibc's malloc is
# fork-safe, and the normal build runs every fork scenario without this.
# Under the sanitizers a hang whose stacks show it is run once more; any
# other hang fails as before.
SANITIZER_FORK_HANG = ("__sanitizer::SizeClassAllocator64", "__sanitizer::Mutex::Lock")


def sanitizer_fork_hang(text):
    return harness.sanitized() and all(s in text for s in SANITIZER_FORK_HANG)


def run(argv, env, cwd=None, watchdog=WATCHDOG, umask=None):
    """Every child runs in its own process group under a watchdog: a hang
    past `watchdog` kills the group and fails (a deadlock is a failure,
    never a hang of CI)."""
    try:
        return harness.run(argv, env, cwd=cwd, timeout=watchdog, watchdog=True, umask=umask)
    except Failed as e:
        if not sanitizer_fork_hang(str(e)):
            raise
        print("note: %s hung in the sanitizer's allocator after a fork (not fork-safe in "
              "GCC 12's ASan); running it once more" % os.path.basename(argv[0]))
        return harness.run(argv, env, cwd=cwd, timeout=watchdog, watchdog=True, umask=umask)


def load_json(check, path, what):
    return check.read_json(path, what)


def histstat(path):
    tool = need("TSEAL_REL_HISTSTAT", "histstat")
    p = subprocess.run([tool, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=300)
    try:
        return json.loads(p.stdout)
    except ValueError:
        raise Failed("histstat %s: unreadable output %r / %r" % (path, p.stdout, p.stderr))


def check_modes(check, directory):
    """Every file torchseal wrote is mode 0600 (group/other get nothing)."""
    for path in sorted(glob.glob(os.path.join(directory, "**"), recursive=True)):
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            check.eq("mode of %s" % os.path.basename(path), oct(stat.S_IMODE(st.st_mode)), "0o600")


def leak_sizes(report):
    return sorted(l.get("bytes") for l in report.get("leaks", []))


# --------------------------------------------------------------------------
# Scenarios


def scenario_stress(args):
    """8 threads x N alloc/free pairs (10% freed by another thread), SIGUSR1
    every 10 ms: no event lost or doubled, in the report and in the history."""
    prog = binary("stress_threads")
    pairs = int(os.environ.get("STRESS_PAIRS") or os.environ.get("TSEAL_REL_STRESS_PAIRS_CI")
                or 250000)
    check = Checker("stress (8 threads x %d pairs)" % pairs)
    with tempfile.TemporaryDirectory(prefix="tseal-rel-") as tmp:
        env = base_env()
        env["STRESS_PAIRS"] = str(pairs)
        env["TORCHSEAL_OUTPUT"] = os.path.join(tmp, "p")
        r = run([prog], env, cwd=tmp, watchdog=60 + pairs // 1000, umask=0)
        check.note("run", r.describe())
        check.eq("exit status", r.status(), "exit 0")
        calls = r.value("calls")
        check.eq("calls made", calls, 8 * pairs * 2 + 2)
        rep = load_json(check, os.path.join(tmp, "p.json"), "exit report")
        if rep:
            s = rep["summary"]
            check.eq("summary.events == calls", s.get("events"), calls)
            check.eq("summary.leaked_allocations", s.get("leaked_allocations"), 0)
            check.eq("leaks", rep.get("leaks"), [])
            check.eq("invalid_frees", rep.get("invalid_frees"), [])
        h = histstat(os.path.join(tmp, "p.tseal"))
        check.note("history", json.dumps(h))
        check.eq("history: clean end", h["clean_end"], True)
        check.eq("history: warnings", h["warnings"], [])
        check.eq("history: user events read == calls", h["user_events"], calls)
        check.eq("history: End chunk count == events read", h["end_events"], h["events_read"])
        check.eq("history: live at end", h["live_at_end"], 0)
        dumps = sorted(glob.glob(os.path.join(tmp, "p.[0-9]*.json")))
        signals = r.value("signals")
        check.true("SIGUSR1 sent during the run", signals > 0)
        check.true("at least one signal dump written", len(dumps) >= 1)
        for d in dumps:
            dj = load_json(check, d, "signal dump")
            if dj:
                check.eq("%s trigger" % os.path.basename(d), dj.get("trigger"), "signal")
        check_modes(check, tmp)
        check.note("figure events", "%d events (alloc+free) in %.1fs, %d SIGUSR1, %d dumps, "
                   "none lost" % (calls, r.seconds, signals, len(dumps)))
    return check.finish()


# A cap far above what the programs write: the history is segmented (main
# file, segment files, checkpoints) and nothing is dropped, so every event
# count below holds as it does for a single file.
CAPPED_LIMIT = "64MiB"


def scenario_crash(args):
    """The process dies at a random point; the history stays readable, the
    original signal behaviour (status) is kept. segv/abort: flushed fully."""
    mode = args[0]
    capped = "capped" in args[1:]
    prog = binary("crash_points")
    seed = int(os.environ.get("TSEAL_REL_SEED") or random.randrange(1, 1 << 30))
    check = Checker("crash %s%s (seed %d)" % (mode, " capped" if capped else "", seed))
    expected = {"segv": "killed by SIGSEGV", "abort": "killed by SIGABRT",
                "exit": "exit 7", "kill": "killed by SIGKILL"}[mode]
    with tempfile.TemporaryDirectory(prefix="tseal-rel-") as tmp:
        env = base_env()
        env["TORCHSEAL_OUTPUT"] = os.path.join(tmp, "p")
        if capped:
            env["TORCHSEAL_HISTORY_LIMIT"] = CAPPED_LIMIT
        r = run([prog, mode, str(seed)], env, cwd=tmp, umask=0)
        check.note("run", r.describe())
        check.eq("status (original signal behaviour kept)", r.status(), expected)
        calls = r.value("calls")
        path = os.path.join(tmp, "p.tseal")
        if not check.true("history file exists", os.path.exists(path)):
            return check.finish()
        if capped:
            check.true("segment files exist", os.path.exists(path + ".000001"))
        h = histstat(path)
        check.note("history", json.dumps(h))
        check.eq("history readable", h["ok"], True)
        check.true("reader warns 'truncated'", any("truncated" in w for w in h["warnings"]))
        check.true("history holds no more events than were made", h["user_events"] <= calls)
        if mode == "kill":
            before = r.value("calls_before_pause")
            # Everything made before a pause of 6 flush intervals is on disk.
            check.true("history holds every event before the last flush (%d <= %d)"
                       % (before, h["user_events"]), h["user_events"] >= before)
        if mode in ("segv", "abort"):
            check.eq("history flushed at the crash: events == calls (needs a "
                     "SIGSEGV/SIGABRT flush handler, see PATCHES.md)", h["user_events"], calls)
        check_modes(check, tmp)
    return check.finish()


def scenario_fork_live(args):
    prog = binary("fork_live")
    capped = "capped" in args
    check = Checker("fork-live" + (" capped" if capped else ""))
    with tempfile.TemporaryDirectory(prefix="tseal-rel-") as tmp:
        env = base_env()
        env["TORCHSEAL_OUTPUT"] = os.path.join(tmp, "p-%p")
        if capped:
            env["TORCHSEAL_HISTORY_LIMIT"] = CAPPED_LIMIT
        r = run([prog], env, cwd=tmp, umask=0)
        check.note("run", r.describe())
        check.eq("exit status", r.status(), "exit 0")
        child = r.value("child_pid")
        check.note("files", sorted(os.listdir(tmp)))
        parent_rep = load_json(check, os.path.join(tmp, "p-%d.json" % r.pid), "parent report")
        child_rep = load_json(check, os.path.join(tmp, "p-%d.json" % child), "child report")
        if child_rep:
            check.eq("child leaks: only its own 12345-byte allocation", leak_sizes(child_rep),
                     [12345])
            check.eq("child summary.events == child's calls", child_rep["summary"]["events"],
                     r.value("child_calls"))
            check.eq("child report pid", child_rep["process"]["pid"], child)
        if parent_rep:
            check.eq("parent leaks: only its own 54321-byte allocation", leak_sizes(parent_rep),
                     [54321])
            check.eq("parent summary.events == parent's calls", parent_rep["summary"]["events"],
                     r.value("parent_calls"))
        for who, pid, calls in (("parent", r.pid, "parent_calls"), ("child", child, "child_calls")):
            p = os.path.join(tmp, "p-%d.tseal" % pid)
            if capped:
                check.true("%s segment files exist" % who, os.path.exists(p + ".000001"))
            if check.true("%s history exists" % who, os.path.exists(p)):
                h = histstat(p)
                check.eq("%s history: clean end" % who, h["clean_end"], True)
                check.eq("%s history: events == calls" % who, h["user_events"], r.value(calls))
        check_modes(check, tmp)
    return check.finish()


def scenario_fork_hammer(args):
    prog = binary("fork_hammer")
    forks = 40
    check = Checker("fork-hammer (%d forks while 3 threads hammer the shim)" % forks)
    with tempfile.TemporaryDirectory(prefix="tseal-rel-") as tmp:
        env = base_env()
        env["TORCHSEAL_OUTPUT"] = os.path.join(tmp, "p-%p")
        os.mkdir(os.path.join(tmp, "iv"))  # the intervals' reports (torchseal_start)
        # GCC 12's ASan allocator has no fork handler: a child forked while
        # another thread is inside malloc waits forever on the allocator's
        # lock (glibc's malloc is fork-safe). The interval thread mallocs
        # throughout (each stop writes a report), so it stays off there.
        intervals = not harness.sanitized()
        if not intervals:
            env["FORK_HAMMER_INTERVALS"] = "0"
        r = run([prog, str(forks)], env, cwd=tmp, watchdog=300)
        if r.returncode == 4 and sanitizer_fork_hang(r.stderr):
            print("note: a child hung in the sanitizer's allocator (see run()); once more")
            for f in glob.glob(os.path.join(tmp, "p-*")) + glob.glob(os.path.join(tmp, "iv", "*")):
                os.remove(f)
            r = run([prog, str(forks)], env, cwd=tmp, watchdog=300)
        check.note("run", r.describe())
        check.eq("exit status (4 = a child deadlocked)", r.status(), "exit 0")
        check.eq("deadlocked children", r.value("deadlocked"), 0,
                 detail="stderr, with the stuck children's stacks:\n" + r.stderr)
        entered = r.value("cuda_children")
        reports = glob.glob(os.path.join(tmp, "p-*.json"))
        dumps = [p for p in reports if p.endswith(".1.json")]
        check.eq("reports: the parent's exit report + one API dump per child that entered "
                 "the shim (the others write none)", len(reports), 1 + entered,
                 sorted(os.path.basename(p) for p in reports))
        check.eq("child dumps", len(dumps), entered)
        for rp in dumps:
            rep = load_json(check, rp, "child dump")
            if rep:
                # Nothing the parent (or its hammering threads) held is the child's.
                check.eq("%s leaks" % os.path.basename(rp), rep["leaks"], [])
                check.eq("%s events" % os.path.basename(rp), rep["summary"]["events"], 0)
        check.true("no child wrote a history file",
                   len(glob.glob(os.path.join(tmp, "p-*.tseal"))) == 1)
        # The bundled libdw loads no libdebuginfod (shim/bundled/bundle.py);
        # a host's own libdw, where nothing is bundled, still would.
        shim = os.environ.get("TSEAL_REL_SHIM", "")
        if intervals and os.path.exists(
                os.path.join(os.path.dirname(shim), "bundled", "libdw-torchseal.so.1")):
            check.eq("libdebuginfod or libcurl segments mapped after the reports",
                     r.value("network_libs"), 0)
        if intervals:
            check.true("the parent's intervals wrote their report (iv/parent.json)",
                       os.path.exists(os.path.join(tmp, "iv", "parent.json")),
                       detail=str(os.listdir(os.path.join(tmp, "iv"))))
    return check.finish()


def scenario_exec_noncuda(args):
    prog = binary("fork_exec")
    check = Checker("exec-noncuda")
    for cmd in (["sh", "-c", "true"], [sys.executable, "-c", "pass"]):
        with tempfile.TemporaryDirectory(prefix="tseal-rel-") as tmp:
            env = base_env()
            env["TORCHSEAL_OUTPUT"] = os.path.join(tmp, "p-%p")
            r = run([prog] + cmd, env, cwd=tmp)
            check.note("run %s" % cmd[0], r.describe())
            check.eq("%s: exit status" % cmd[0], r.status(), "exit 0")
            want = sorted("p-%d.%s" % (r.pid, e) for e in ("json", "tseal", "txt"))
            check.eq("%s: files (only the CUDA process's)" % cmd[0], sorted(os.listdir(tmp)), want)
    return check.finish()


def mount_tmpfs(path, opts):
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        skip("cannot mount a tmpfs (%s): %s" % (opts, p.stderr.strip()))


def umount(path):
    subprocess.run(["umount", "-l", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def scenario_disk_full(args):
    """A 64 KiB tmpfs fills up: ONE stderr line, the program finishes with its
    own status and output."""
    prog = binary("stress_threads")
    check = Checker("disk-full")
    with tempfile.TemporaryDirectory(prefix="tseal-rel-") as tmp:
        mnt = os.path.join(tmp, "small")
        os.mkdir(mnt)
        mount_tmpfs(mnt, "size=64k")
        try:
            env = base_env()
            env["STRESS_PAIRS"] = "5000"
            env["TORCHSEAL_OUTPUT"] = os.path.join(mnt, "p")
            r = run([prog], env, cwd=tmp)
            check.note("run", r.describe())
            check.note("files", sorted(os.listdir(mnt)))
            check.eq("exit status", r.status(), "exit 0")
            check.eq("program output intact", r.value("calls"), 8 * 5000 * 2 + 2)
            check.eq("torchseal stderr lines (exactly one)", len(r.ours()), 1, r.ours())
            check.true("the line says recording stopped",
                       any("No space" in l or "full" in l for l in r.ours()), r.ours())
            leftovers = [f for f in os.listdir(mnt) if ".tmp." in f]
            check.eq("no temporary files left behind", leftovers, [])
        finally:
            umount(mnt)
    return check.finish()


def scenario_unwritable_fallback(args):
    """An unwritable output directory falls back to $TMPDIR (docs/report-format.md)."""
    prog = binary("crash_points")
    check = Checker("unwritable-fallback")
    with tempfile.TemporaryDirectory(prefix="tseal-rel-") as tmp:
        blocker = os.path.join(tmp, "not-a-dir")
        open(blocker, "w").close()
        alt = os.path.join(tmp, "alt-tmp")
        os.mkdir(alt)
        env = base_env()
        env["TMPDIR"] = alt
        env["TORCHSEAL_OUTPUT"] = os.path.join(blocker, "p")
        r = run([prog, "return", "3"], env, cwd=tmp, umask=0)
        check.note("run", r.describe())
        check.eq("exit status", r.status(), "exit 0")
        check.eq("files in $TMPDIR", sorted(os.listdir(alt)), ["p.json", "p.tseal", "p.txt"])
        check.eq("torchseal stderr lines (one warning naming the fallback)", len(r.ours()), 1,
                 r.ours())
        check_modes(check, alt)
        # Read-only filesystem (root ignores permission bits, not EROFS).
        ro = os.path.join(tmp, "ro")
        os.mkdir(ro)
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", ro],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode == 0:
            try:
                for f in os.listdir(alt):
                    os.unlink(os.path.join(alt, f))
                env["TORCHSEAL_OUTPUT"] = os.path.join(ro, "p")
                r = run([prog, "return", "3"], env, cwd=tmp, umask=0)
                check.note("run (read-only fs)", r.describe())
                check.eq("ro: exit status", r.status(), "exit 0")
                check.eq("ro: files in $TMPDIR", sorted(os.listdir(alt)),
                         ["p.json", "p.tseal", "p.txt"])
            finally:
                umount(ro)
        else:
            check.note("read-only variant", "skipped: mount not permitted")
    return check.finish()


def scenario_symlink_output(args):
    """Pre-planted symlinks at every output path are never followed."""
    prog = binary("crash_points")
    check = Checker("symlink-output")
    with tempfile.TemporaryDirectory(prefix="tseal-rel-") as tmp:
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        victim = os.path.join(tmp, "victim")
        with open(victim, "w") as f:
            f.write("original\n")
        dangling = os.path.join(tmp, "would-be-created")
        os.symlink(victim, os.path.join(out, "p.json"))
        os.symlink(victim, os.path.join(out, "p.txt"))
        os.symlink(dangling, os.path.join(out, "p.tseal"))
        os.symlink(victim, os.path.join(out, "p.1.json"))
        env = base_env()
        env["TORCHSEAL_OUTPUT"] = os.path.join(out, "p")
        r = run([prog, "return", "3"], env, cwd=tmp)
        check.note("run", r.describe())
        check.eq("exit status", r.status(), "exit 0")
        with open(victim) as f:
            check.eq("symlink target untouched", f.read(), "original\n")
        check.true("dangling symlink target not created", not os.path.exists(dangling))
        check.true("torchseal said why it did not write", len(r.ours()) >= 1, r.ours())
        check.eq("no temporary files left behind",
                 [f for f in os.listdir(out) if ".tmp." in f], [])
    return check.finish()


def scenario_file_modes(args):
    """Every file written (history, report, dumps, fork child) is 0600 even with umask 0."""
    check = Checker("file-modes")
    with tempfile.TemporaryDirectory(prefix="tseal-rel-") as tmp:
        env = base_env()
        env["TORCHSEAL_OUTPUT"] = os.path.join(tmp, "p-%p")
        r = run([binary("signals_chain"), "before"], env, cwd=tmp, umask=0)
        check.note("run signals_chain", r.describe())
        r = run([binary("fork_live")], env, cwd=tmp, umask=0)
        check.note("run fork_live", r.describe())
        files = sorted(os.listdir(tmp))
        check.note("files", files)
        check.true("dump, exit and fork-child files written", len(files) >= 8, files)
        check_modes(check, tmp)
    return check.finish()


ACCEPTED_HINT = {  # what the one line must mention besides the variable
    "TORCHSEAL_SUPPRESSIONS": None, "TORCHSEAL_CUPTI_PATH": None, "TORCHSEAL_OUTPUT": None,
}


def scenario_bad_config(args):
    """An invalid TORCHSEAL_* value: one line naming it (and the accepted
    values); the program runs unaffected (same exit status and stdout)."""
    var, value = args[0], args[1]
    prog = binary("crash_points")
    check = Checker("bad-config %s=%s" % (var, value))
    with tempfile.TemporaryDirectory(prefix="tseal-rel-") as tmp:
        base = run([prog, "return", "11"], base_env(with_shim=False), cwd=tmp)
        env = base_env()
        env["TORCHSEAL_OUTPUT"] = os.path.join(tmp, "p")
        env[var] = value
        if var == "TORCHSEAL_OUTPUT":
            env[var] = os.path.join(tmp, value)
        r = run([prog, "return", "11"], env, cwd=tmp)
        check.note("run", r.describe())
        check.eq("exit status as without torchseal", r.status(), base.status())
        check.eq("stdout as without torchseal", r.stdout, base.stdout)
        ours = r.ours()
        naming = [l for l in ours if var in l]
        check.eq("torchseal lines naming %s" % var, len(naming), 1, ours)
        check.eq("torchseal lines in all", len(ours), 1, ours)
        if naming and ACCEPTED_HINT.get(var, "accepted"):
            check.true("the line lists the accepted values", "accepted" in naming[0], naming[0])
    return check.finish()


def scenario_host_integrity(args):
    prog = binary("host_integrity")
    check = Checker("host-integrity")
    with tempfile.TemporaryDirectory(prefix="tseal-rel-") as tmp:
        base = run([prog], base_env(with_shim=False), cwd=tmp)
        check.note("baseline", base.describe())
        env = base_env()
        env["TORCHSEAL_OUTPUT"] = os.path.join(tmp, "p")
        r = run([prog], env, cwd=tmp)
        check.note("run", r.describe())
        check.eq("baseline exit status (test program sanity)", base.status(), "exit 0")
        check.eq("exit status", r.status(), "exit 0")
        checks = [l for l in r.stdout.splitlines() if l.startswith("check ")]
        check.eq("host checks", [l for l in checks if " ok" not in l], [])
        check.eq("host checks as without torchseal", checks,
                 [l for l in base.stdout.splitlines() if l.startswith("check ")])
        check.true("atexit handlers ran in reverse order", "atexit_order=CBA" in r.stdout,
                   tail(r.stdout))
        rep = load_json(check, os.path.join(tmp, "p.json"), "report")
        if rep:
            check.eq("leaks (the 3333 B freed by an atexit handler is no leak)", rep["leaks"], [])
            check.eq("summary.events == calls", rep["summary"]["events"], r.value("calls"))
    return check.finish()


def scenario_signal(args):
    mode = args[0]
    prog = binary("signals_chain")
    check = Checker("signal %s" % mode)
    with tempfile.TemporaryDirectory(prefix="tseal-rel-") as tmp:
        env = base_env()
        env["TORCHSEAL_OUTPUT"] = os.path.join(tmp, "p")
        r = run([prog, mode], env, cwd=tmp)
        check.note("run", r.describe())
        check.note("files", sorted(os.listdir(tmp)))
        check.eq("exit status (0: the program's handler ran as it expects)", r.status(), "exit 0")
        dump = os.path.join(tmp, "p.1.json")
        if mode in ("before", "ignore"):
            check.true("torchseal's handler (chained) wrote a dump", os.path.exists(dump))
        else:
            # Documented: a handler installed after torchseal replaces it.
            check.note("after", "program's handler replaced torchseal's (dump written: %s)"
                       % os.path.exists(dump))
        check.true("exit report written", os.path.exists(os.path.join(tmp, "p.json")))
    return check.finish()


SCENARIOS = {
    "stress": scenario_stress,
    "crash": scenario_crash,
    "fork-live": scenario_fork_live,
    "fork-hammer": scenario_fork_hammer,
    "exec-noncuda": scenario_exec_noncuda,
    "disk-full": scenario_disk_full,
    "unwritable-fallback": scenario_unwritable_fallback,
    "symlink-output": scenario_symlink_output,
    "file-modes": scenario_file_modes,
    "bad-config": scenario_bad_config,
    "host-integrity": scenario_host_integrity,
    "signal": scenario_signal,
}


def main(argv):
    if len(argv) < 2 or argv[1] not in SCENARIOS:
        print(__doc__)
        return 2
    try:
        return SCENARIOS[argv[1]](argv[2:])
    except Failed as e:
        print("FAIL: %s" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
