"""A running program and a `torchseal attach` to it, driven line by line:
the program's stdout and the CLI's stderr are read by threads, so a test
can wait for a line ("ready", "attached") while both keep running.
"""
import os
import queue
import subprocess
import threading
import time


class Lines:
    """The lines of one stream, kept and also handed out as they come."""

    def __init__(self, stream):
        self.all = []
        self._q = queue.Queue()
        self._t = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._t.start()

    def _pump(self, stream):
        for line in stream:
            line = line.rstrip("\n")
            self.all.append(line)
            self._q.put(line)
        self._q.put(None)

    def wait_for(self, pred, timeout):
        """The first new line satisfying pred, or None (timeout or end)."""
        end = time.time() + timeout
        while True:
            left = end - time.time()
            if left <= 0:
                return None
            try:
                line = self._q.get(timeout=left)
            except queue.Empty:
                return None
            if line is None:
                return None
            if pred(line):
                return line

    def join(self, timeout=30):
        self._t.join(timeout)


class Program:
    """A program started plainly (no torchseal), its stdout followed."""

    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        self.pid = self.p.pid
        self.out = Lines(self.p.stdout)

    def steps(self):
        """The step numbers printed so far ("step N ...")."""
        return [int(l.split()[1]) for l in self.out.all if l.startswith("step ")]

    def wait_steps(self, n, timeout):
        """True once n step lines were printed in all (polls what came)."""
        end = time.time() + timeout
        while len(self.steps()) < n:
            if time.time() > end or self.p.poll() is not None:
                return len(self.steps()) >= n
            time.sleep(0.05)
        return True

    def finish(self, stop_file, timeout=120):
        open(stop_file, "w").close()
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        self.out.join()
        return rc

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


class Attach:
    """`torchseal attach ...` running; its stderr followed."""

    def __init__(self, cli, args, env=None):
        self.argv = [cli, "attach"] + [str(a) for a in args]
        self.p = subprocess.Popen(self.argv, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.err = Lines(self.p.stderr)
        self.stdout = ""

    def wait(self, timeout=300):
        try:
            self.stdout = self.p.stdout.read()
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        self.err.join()
        return rc


def torchseal_threads(pid):
    names = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        if name.startswith("torchseal"):
            names.append(name)
    return names
