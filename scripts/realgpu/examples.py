"""The C++ examples on the chosen stack, checked exactly as the simcuda
integration tests check them.

Which examples, with which arguments and paths, is what meson registered for
the integration suite (`meson introspect --tests`): the `example_*` tests.
Each is run by tests/integration/run.py's own scenario (two runs, every
`// EXPECT:` line, exit statuses), with only its environment changed: this
stack's libraries on LD_LIBRARY_PATH instead of simcuda's. Examples built on
simcuda's static runtime (`--static`) carry simcuda inside and are left out.
"""

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile

from . import leaksets, sanitizer


def load_module(name, path):
    """A test runner as a module (its scenarios and checks, not its main)."""
    tests = os.path.dirname(os.path.dirname(path))
    if tests not in sys.path:
        sys.path.insert(0, tests)  # for `import harness`
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def registered(build):
    """[(name, runner arguments, environment)] of the integration suite's
    example tests, in meson's order."""
    # meson-info/intro-tests.json is what `meson introspect --tests` prints;
    # read directly, a carried build needs no meson on the GPU machine.
    intro = os.path.join(build, "meson-info", "intro-tests.json")
    if os.path.exists(intro):
        with open(intro) as f:
            tests = json.load(f)
    else:
        p = subprocess.run(["meson", "introspect", build, "--tests"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        if p.returncode != 0:
            raise SystemExit("real-gpu: `meson introspect %s --tests` failed: %s"
                             % (build, p.stderr.strip()))
        tests = json.loads(p.stdout)
    found = []
    for t in tests:
        suites = [s.split(":")[-1] for s in t.get("suite") or []]
        if "integration" not in suites or not t["name"].startswith("example_"):
            continue
        cmd = t["cmd"]
        args = cmd[cmd.index("example") + 1:]
        if "--static" in args:
            continue
        found.append((t["name"][len("example_"):], args, t.get("env") or {}))
    return found


def how_stacks_were_made(report):
    """(the unwinder the shim used, whether file:line were resolved): a
    machine without libunwind or libdw shows it here first."""
    proc = report.get("process") or {}
    unwinder = proc.get("unwinder") or "unknown"
    if proc.get("degraded"):
        unwinder += " (degraded: %s)" % "; ".join(proc["degraded"])
    frames = [f for key in ("leaks", "ooms", "invalid_frees") for e in report.get(key) or []
              for f in e.get("frames") or []]
    if not frames:
        return unwinder, "no frames"
    return unwinder, "yes" if any(f.get("line") for f in frames) else "NO"


class Outcome:
    def __init__(self, name):
        self.name = name
        self.status = None  # the scenario's exit status: 0 pass, 1 fail, 77 skip
        self.log = ""
        self.expected = None
        self.torchseal = None
        self.sanitizer = None  # leak set, or None when not run
        self.sanitizer_problem = None
        self.details = []
        self.unwinder = "no report"  # process.unwinder of the first report
        self.lines = "no report"  # whether its native frames carry file:line

    def agrees(self):
        return (self.status == 0 and self.sanitizer_problem is None
                and (self.sanitizer is None or self.sanitizer == self.expected))


class Runner:
    def __init__(self, source_root, build, stack, sanitizer_path):
        self.it = load_module("tseal_integration",
                              os.path.join(source_root, "tests", "integration", "run.py"))
        self.harness = sys.modules["harness"]
        self.build = build
        self.simcuda = os.path.join(build, "simcuda")
        self.stack = stack
        self.sanitizer = sanitizer_path
        self.reports = []
        self.it.base_env = self._base_env
        check_report = self.it.check_report

        def keep_report(check, exp, report, *rest):
            self.reports.append(report)
            return check_report(check, exp, report, *rest)
        self.it.check_report = keep_report

    def _base_env(self, need_simcuda=True):
        return self.stack.env(self.harness.clean_env())

    def run(self, name, args, env):
        out = Outcome(name)
        os.environ.update({k: v for k, v in env.items() if k.startswith("TSEAL_IT_")})
        opts = dict(zip(args[1::2], args[2::2]))
        self.reports = []
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            try:
                binary, source = self.it.example_paths(
                    opts.get("--source-name", name), opts.get("--binary"), opts.get("--source"))
                exp = self.it.Expectations(source)
                self.stack.runtime_of(binary, self._base_env(), self.simcuda)
                out.expected = leaksets.expected(exp)
                out.status = self.it.scenario_example([name] + args[1:])
            except SystemExit as e:  # skip(): not built in this configuration
                out.status = e.code
            except self.harness.Failed as e:
                print("FAIL: %s" % e)
                out.status = 1
        out.log = buf.getvalue()
        if out.expected is None:  # skipped, or its expectations do not parse
            out.details += out.log.strip().splitlines()[-1:]
            return out
        if self.reports:
            out.unwinder, out.lines = how_stacks_were_made(self.reports[0])
            out.torchseal = leaksets.from_report(self.reports[0])
            out.details += leaksets.differences(out.expected, out.torchseal, "torchseal")
        if out.status == 1:
            out.details += [l for l in out.log.splitlines() if l.startswith("FAIL")][:8]
        if self.sanitizer:
            self._sanitize(out, binary, exp)
        return out

    def _sanitize(self, out, binary, exp):
        # interpreter_env: in a sanitizer build of torchseal, LeakSanitizer
        # would judge the sanitizer itself (a script, in the tests) at exit.
        env = self.harness.interpreter_env(self._base_env())
        env.update(exp.env)
        with tempfile.TemporaryDirectory(prefix="tseal-realgpu-") as tmp:
            try:
                result = self.harness.run(sanitizer.command(self.sanitizer, [binary]), env,
                                          cwd=tmp, timeout=3600, merge_stderr=True)
            except self.harness.Failed as e:
                out.sanitizer_problem = str(e).splitlines()[0]
                return
        parsed = sanitizer.parse(result.stdout)
        out.sanitizer_problem = parsed.problem()
        if out.sanitizer_problem:
            out.details.append("compute-sanitizer: %s\n%s" % (
                out.sanitizer_problem, self.harness.tail(result.stdout)))
            return
        out.sanitizer = leaksets.from_sanitizer(parsed, exp.basename)
        out.details += leaksets.differences(out.expected, out.sanitizer, "compute-sanitizer")
