"""Run a child process with a time limit; describe it when a check fails."""

import os
import resource
import shlex
import signal
import subprocess
import time

from .check import Failed

TIMEOUT = 600  # seconds per child process unless the runner says otherwise


class Result:
    def __init__(self, argv, pid, returncode, out, err, seconds):
        self.argv, self.pid, self.returncode = argv, pid, returncode
        self.stdout, self.stderr, self.seconds = out, err, seconds

    def status(self):
        rc = self.returncode
        if rc < 0:
            try:
                return "killed by %s" % signal.Signals(-rc).name
            except ValueError:
                return "killed by signal %d" % -rc
        return "exit %d" % rc

    def describe(self):
        return "$ %s\n  %s after %.1fs\n  stdout (tail): %s\n  stderr (tail): %s" % (
            " ".join(shlex.quote(a) for a in self.argv), self.status(), self.seconds,
            tail(self.stdout), tail(self.stderr))

    def value(self, key, last=True):
        """The integer the program printed as a `key=N` line."""
        vals = [l.split("=", 1)[1] for l in self.stdout.splitlines() if l.startswith(key + "=")]
        if not vals:
            raise Failed("the program printed no `%s=` line\n%s" % (key, self.describe()))
        return int(vals[-1 if last else 0], 0)

    def ours(self):
        """torchseal's own lines on stderr."""
        return [l for l in self.stderr.splitlines() if l.startswith("torchseal:")]


def tail(text, n=15):
    lines = (text or "").splitlines()
    if len(lines) > n:
        lines = ["..."] + lines[-n:]
    return "\n    | " + "\n    | ".join(lines) if lines else "(empty)"


def group_stacks(pgid, most=4):
    """The stacks of the processes in group `pgid` (gdb, where installed): a
    hang seen once in CI is only fixable with them."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                pids.append(int(d))
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # gdb hangs under ASan
    text = ""
    for pid in sorted(pids)[:most]:
        try:
            p = subprocess.run(["gdb", "-q", "-nx", "-batch", "-p", str(pid),
                                "-ex", "thread apply all bt"], env=env, timeout=60,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               universal_newlines=True, errors="replace")
            bt = p.stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            bt = "(no stacks: %s)" % e
        text += "\n  stacks of %d:\n    %s" % (pid, bt.strip().replace("\n", "\n    "))
    return text


def run(argv, env, cwd=None, timeout=TIMEOUT, umask=None, watchdog=False, merge_stderr=False):
    """Run argv to completion, capturing its output as text.

    watchdog=True: the child gets its own process group and no core dumps;
    past `timeout` the whole group is killed (a deadlock fails the test, it
    never hangs CI). umask: the child's umask. merge_stderr: stderr goes to
    stdout, in order. A child that cannot start or outlives `timeout` raises
    Failed."""
    def pre():
        if watchdog:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if umask is not None:
            os.umask(umask)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            universal_newlines=True, errors="replace", start_new_session=watchdog,
            preexec_fn=pre if (watchdog or umask is not None) else None)
    except OSError as e:
        raise Failed("cannot start %s: %s" % (argv[0], e))
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stacks = group_stacks(proc.pid) if watchdog else ""
        try:
            if watchdog:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        raise Failed("%s after %ds: %s\n  stdout: %s\n  stderr: %s%s" % (
            "DEADLOCK/HANG: watchdog killed the process group" if watchdog else "timed out",
            timeout, " ".join(argv), tail(out), tail(err), stacks))
    return Result(argv, proc.pid, proc.returncode, out, err or "", time.monotonic() - t0)
