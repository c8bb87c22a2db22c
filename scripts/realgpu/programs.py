"""Programs built outside the repository (`--programs DIR`): each executable
in DIR runs bare, under torchseal with the hooks and with CUPTI, and under
`compute-sanitizer --leak-check full`; the table compares exit statuses,
leaked bytes and allocation counts. A program has no EXPECT lines here:
the two torchseal backends and compute-sanitizer are checked against one
another, and torchseal's invalid frees are shown (a correct program has none).
"""

import json
import os
import tempfile

from . import sanitizer

HEADER = ("program", "bare", "torchseal hooks", "torchseal cupti", "compute-sanitizer", "agree?")


def found(directory):
    """The executables in `directory`, by name."""
    if not os.path.isdir(directory):
        raise SystemExit("real-gpu: --programs %s is not a directory" % directory)
    names = sorted(n for n in os.listdir(directory)
                   if os.path.isfile(os.path.join(directory, n))
                   and os.access(os.path.join(directory, n), os.X_OK))
    return [os.path.join(directory, n) for n in names]


class Run:
    """One way of running a program: its exit status and leak set."""

    def __init__(self, status, leaked=None, invalid_frees=0, problem=None):
        self.status = status
        self.leaked = leaked  # (bytes, allocations), or None when unknown
        self.invalid_frees = invalid_frees
        self.problem = problem

    def cell(self, with_invalid=False):
        if self.problem:
            return "exit %s, %s" % (self.status, self.problem)
        text = "exit %d, %d B in %d" % ((self.status,) + self.leaked)
        if with_invalid:
            text += ", %d invalid free%s" % (self.invalid_frees,
                                             "" if self.invalid_frees == 1 else "s")
        return text


class Runner:
    def __init__(self, harness, stack, shim, sanitizer_path, timeout=3600):
        self.harness = harness
        self.stack = stack
        self.shim = shim
        self.sanitizer = sanitizer_path
        self.timeout = timeout

    def env(self):
        return self.stack.env(self.harness.clean_env())

    def bare(self, program, tmp):
        return Run(self.harness.run([program], self.env(), cwd=tmp, timeout=self.timeout).returncode)

    def torchseal(self, program, tmp, backend):
        env = self.env()
        prefix = os.path.join(tmp, "torchseal-" + backend)
        env.update(LD_PRELOAD=self.harness.preload(self.shim), TORCHSEAL_BACKEND=backend,
                   TORCHSEAL_OUTPUT=prefix)
        result = self.harness.run([program], env, cwd=tmp, timeout=self.timeout)
        try:
            with open(prefix + ".json") as f:
                report = json.load(f)
        except (OSError, ValueError):
            return Run(result.returncode, problem="no report")
        s = report.get("summary") or {}
        return Run(result.returncode, (s.get("leaked_bytes", 0), s.get("leaked_allocations", 0)),
                   len(report.get("invalid_frees") or []))

    def sanitized(self, program, tmp):
        if not self.sanitizer:
            return None
        env = self.harness.interpreter_env(self.env())
        result = self.harness.run(sanitizer.command(self.sanitizer, [program]), env, cwd=tmp,
                                  timeout=self.timeout, merge_stderr=True)
        parsed = sanitizer.parse(result.stdout)
        if parsed.problem():
            return Run(result.returncode, problem=parsed.problem())
        return Run(result.returncode, (sum(l.bytes for l in parsed.leaks), len(parsed.leaks)))

    def row(self, program):
        """(cells, agrees) for one program."""
        with tempfile.TemporaryDirectory(prefix="tseal-programs-") as tmp:
            bare = self.bare(program, tmp)
            hooks = self.torchseal(program, tmp, "hooks")
            cupti = self.torchseal(program, tmp, "cupti")
            cs = self.sanitized(program, tmp)
        runs = [r for r in (bare, hooks, cupti, cs) if r is not None]
        agrees = (all(r.status == bare.status and not r.problem for r in runs)
                  and hooks.leaked == cupti.leaked
                  and hooks.invalid_frees == cupti.invalid_frees
                  and (cs is None or cs.leaked == hooks.leaked))
        cells = (os.path.basename(program), "exit %d" % bare.status, hooks.cell(True),
                 cupti.cell(True), cs.cell() if cs else "not run", "yes" if agrees else "NO")
        return cells, agrees
