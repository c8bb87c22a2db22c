"""pytest plugin: fail tests that keep GPU memory (`pytest --torchseal`).

Registered through the `pytest11` entry point of the torchseal package and
off unless `--torchseal` is given (docs/pytest.md):

* Not under the shim yet: pytest re-executes itself as
  `torchseal run --tensors -- <the same command>`, keeping its arguments,
  output and exit status. xdist workers inherit the preload and each writes
  its own files (the default prefix carries the pid).
* Tensors mode: PyTorch then makes one allocation per tensor and frees it
  when the tensor dies, so what is live after a test is what is held, and the
  caching allocator's cache is never counted.
* Each test phase gets a mark (`<nodeid> setup|call|teardown`) on the
  timeline. Around the call, after gc.collect(), a dump before and one after
  give, per allocation site, the bytes the test allocated and still holds;
  more than `limit_cuda_leaks` (default 0) fails the test with the sites,
  their Python lines and holders. `limit_cuda_memory` bounds the peak of
  live bytes during the call (torchseal_peak_bytes).
"""

import ctypes
import gc
import glob
import json
import os
import re
import shutil
import socket
import sys
import tempfile

import pytest

import torchseal

_REEXEC = "TORCHSEAL_PYTEST_REEXEC"  # set in the re-executed pytest
_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000 ** 2, "gb": 1000 ** 3, "tb": 1000 ** 4,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_MAX_SITES = 5  # sites listed in a failure message
_RUNNER_DIRS = ("/_pytest/", "/pluggy/", "/xdist/", "/execnet/")


def parse_size(text):
    """Bytes in "1 MiB", "512KB", "2 GiB" or an int; ValueError otherwise."""
    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError("invalid size %r (examples: 1 MiB, 512KB, 2 GiB)" % (text,))
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def format_size(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return "%.1f %s" % (n / size, unit)
    return "%d B" % n


def pytest_addoption(parser):
    group = parser.getgroup("torchseal", "GPU memory leaks (torchseal)")
    group.addoption("--torchseal", action="store_true", default=False,
                    help="fail tests that keep CUDA memory they allocated (runs pytest "
                         "under `torchseal run --tensors`)")
    group.addoption("--torchseal-output", metavar="DIR", default=None,
                    help="keep the per-test reports in DIR (default: a temporary "
                         "directory, and each test's reports are deleted once read)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "limit_cuda_leaks(size): with --torchseal, allow the test to keep up "
        "to `size` (\"1 MiB\") of the CUDA memory it allocated")
    config.addinivalue_line(
        "markers", "limit_cuda_memory(size): with --torchseal, fail the test when its "
        "peak of live CUDA memory exceeds `size` (\"2 GiB\")")
    if not config.getoption("torchseal"):
        return
    if not torchseal.available():
        _reexec(config)
    if os.environ.get("TORCHSEAL_TORCH") != "tensors":
        # Started under the shim by the user without --tensors: PyTorch's
        # caching allocator then hides what a test keeps inside its cache.
        config.issue_config_time_warning(pytest.PytestWarning(
            "--torchseal: the shim was preloaded without `torchseal run --tensors`; "
            "with PyTorch, memory a test keeps inside the caching allocator's segments "
            "is not seen"), stacklevel=2)
    config.pluginmanager.register(_Session(config), "torchseal-session")


# ---------------------------------------------------------------- re-exec
def _cli():
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "bin", "torchseal"), shutil.which("torchseal")):
        if path and os.access(path, os.X_OK):
            return path
    return None


def _command_line():
    """The command that started this pytest, as the OS saw it."""
    orig = getattr(sys, "orig_argv", None)  # 3.10+
    if orig:
        return [sys.executable] + list(orig[1:])
    return [sys.executable] + sys.argv if sys.argv[0].endswith(".py") else \
        [sys.executable, "-m", "pytest"] + sys.argv[1:]


def _reexec(config):
    if os.environ.get(_REEXEC):
        raise pytest.UsageError("--torchseal: the torchseal shim is not loaded even under "
                                "`torchseal run` (LD_PRELOAD cleared?)")
    cli = _cli()
    if cli is None:
        raise pytest.UsageError("--torchseal: cannot find the `torchseal` command "
                                "(pip install torchseal, or put it on PATH)")
    out = config.getoption("torchseal_output")
    if out:
        os.makedirs(out, exist_ok=True)
    else:
        # The dumps are deleted once read; the exit reports stay here.
        out = tempfile.mkdtemp(prefix="torchseal-pytest-")
    argv = [cli, "run", "--tensors", "--output",
            os.path.join(os.path.abspath(out), "torchseal-%h-%p"), "--"] + _command_line()
    # Give the terminal back before exec: pytest may be capturing fd 1 and 2.
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        capman.stop_global_capturing()
    sys.stdout.flush()
    sys.stderr.flush()
    os.environ[_REEXEC] = "1"
    os.execv(cli, argv)


# ---------------------------------------------------------------- dumps
def _bind_peak():
    try:
        fn = ctypes.CDLL(None).torchseal_peak_bytes
    except (AttributeError, OSError, TypeError):
        return None
    fn.restype = ctypes.c_longlong
    fn.argtypes = [ctypes.c_int]
    return fn


def _site_key(entry):
    py = tuple((f.get("file"), f.get("line"), f.get("function"))
               for f in entry.get("python_frames") or [])
    native = tuple((f.get("function"), f.get("file"), f.get("line"))
                   for f in entry.get("frames") or [])
    return (entry.get("kind"), entry.get("api"), py, native)


def _held_sites(report):
    """Site key -> (bytes, allocations, entry): what is live now, held by
    Python objects (reachable) or by nothing (leaks)."""
    sites = {}
    for entry in (report.get("leaks") or []) + (report.get("reachable") or []):
        key = _site_key(entry)
        b, n, first = sites.get(key, (0, 0, entry))
        holders = first.setdefault("holders", [])
        if first is not entry:
            holders.extend(entry.get("holders") or [])
        sites[key] = (b + entry.get("bytes", 0), n + entry.get("allocations", 0), first)
    return sites


class _Dumps:
    """Writes dumps through the shim and reads the newest one back."""

    def __init__(self):
        self.prefix_glob = self._prefix_glob()

    @staticmethod
    def _prefix_glob():
        # The template `torchseal run --output` set, %-placeholders expanded
        # with what this process knows; %t (the start time) stays a wildcard.
        template = os.environ.get("TORCHSEAL_OUTPUT") or "torchseal-%p"
        rank = next((os.environ[k] for k in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                                            "PMI_RANK") if os.environ.get(k)), "")
        if not os.environ.get("TORCHSEAL_OUTPUT") and rank:
            template = "torchseal-r%r-%p"
        subs = {"p": str(os.getpid()), "h": socket.gethostname(), "r": rank, "t": "*",
                "%": "%"}
        return re.sub(r"%(.)", lambda m: subs.get(m.group(1), m.group(0)),
                      glob.escape(template))

    def dump(self, reason):
        """(report, path) of the dump just written; (None, None) before the
        first CUDA call or when it could not be written or found."""
        if not torchseal.dump(reason):
            return None, None
        numbered = []
        for path in glob.glob(self.prefix_glob + ".*.json"):
            m = re.search(r"\.(\d+)\.json$", path)
            if m:
                numbered.append((int(m.group(1)), path))
        if not numbered:
            return None, None
        path = max(numbered)[1]
        with open(path, encoding="utf-8") as f:
            return json.load(f), path


# ---------------------------------------------------------------- per test
def _marker_size(item, name):
    marker = item.get_closest_marker(name)
    if marker is None:
        return None
    if len(marker.args) != 1:
        raise pytest.UsageError("%s: @pytest.mark.%s takes one size (\"1 MiB\")"
                                % (item.nodeid, name))
    try:
        return parse_size(marker.args[0])
    except ValueError as e:
        raise pytest.UsageError("%s: @pytest.mark.%s: %s" % (item.nodeid, name, e))


def _describe_site(held, allocations, entry):
    lines = ["  %s in %d allocation(s) by %s" % (format_size(held), allocations,
                                                 entry.get("api") or "?")]
    # The test's own frames: pytest's and pluggy's below them say nothing.
    py = []
    for f in entry.get("python_frames") or []:
        if any(part in (f.get("file") or "") for part in _RUNNER_DIRS):
            break
        py.append(f)
    for f in py[:8]:
        lines.append("    %s:%s in %s" % (f.get("file"), f.get("line"), f.get("function")))
    if not py:
        for f in (entry.get("frames") or [])[:4]:
            where = "%s:%s" % (f.get("file"), f.get("line")) if f.get("file") else \
                f.get("module") or "?"
            lines.append("    %s in %s" % (where, f.get("function")))
    for h in (entry.get("holders") or [])[:3]:
        lines.append("    held by: %s" % " -> ".join(h.get("chain") or []))
    return lines


class _Session:
    def __init__(self, config):
        self.config = config
        self.dumps = _Dumps()
        self.peak = _bind_peak()
        self.keep = bool(config.getoption("torchseal_output"))

    # Marks on the timeline, so a report or `torchseal report P.tseal` shows
    # which test and phase allocated what.
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        torchseal.mark(item.nodeid + " setup")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item):
        torchseal.mark(item.nodeid + " teardown")

    def _dump(self):
        report, path = self.dumps.dump("pytest")
        if path and not self.keep:
            for f in (path, path[:-len(".json")] + ".txt"):
                try:
                    os.unlink(f)
                except OSError:
                    pass
        return report

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        limits = (_marker_size(item, "limit_cuda_leaks") or 0,
                  _marker_size(item, "limit_cuda_memory"))
        gc.collect()
        active_before = torchseal.active()
        before = self._dump() if active_before else None
        # The window restarts at the bytes live now: the test's peak is its
        # own allocations' high-water mark above them.
        # Before the first CUDA call nothing is live: the start is 0.
        start = 0
        if self.peak is not None:
            self.peak(1)
            start = max(self.peak(0), 0)
        torchseal.mark(item.nodeid + " call")
        yield
        end = self.peak(0) if self.peak is not None else -1
        peak = end - start if end >= 0 else -1
        gc.collect()
        after = self._dump()
        # Recording, yet no dump to read (not written: a full disk turns the
        # output off; or not found where the plugin looks): what the test
        # kept is unknown, and comparing against a missing "before" would
        # blame the test for everything live.
        unchecked = (active_before and before is None) or (torchseal.active() and after is None)
        item.stash[_RESULT] = (before, after, peak, unchecked) + limits

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if call.when != "call" or _RESULT not in item.stash:
            return
        before, after, peak, unchecked, limit_leaks, limit_memory = item.stash[_RESULT]
        held = {} if unchecked else _held_since(before, after)
        if unchecked:
            item.warn(pytest.PytestWarning(
                "torchseal: %s was not checked for kept CUDA memory: no report could be "
                "read %s it (see the torchseal: lines on stderr)"
                % (item.nodeid, "after" if before is not None else "before")))
        leaked = sum(b for b, _, _ in held.values())
        problems = []
        if leaked > limit_leaks:
            problems.append("%s kept %s of CUDA memory it allocated (limit %s):"
                            % (item.nodeid, format_size(leaked), format_size(limit_leaks)))
            ranked = sorted(held.values(), key=lambda v: -v[0])
            for b, n, entry in ranked[:_MAX_SITES]:
                problems.extend(_describe_site(b, n, entry))
            if len(ranked) > _MAX_SITES:
                problems.append("  ... and %d more site(s)" % (len(ranked) - _MAX_SITES))
        if limit_memory is not None and peak > limit_memory:
            problems.append("%s used %s of CUDA memory at its peak (limit %s)"
                            % (item.nodeid, format_size(peak), format_size(limit_memory)))
        # A test that failed by itself keeps its locals alive in the
        # traceback: its outcome stays its own.
        over = bool(problems) and report.passed
        report.user_properties.append(("torchseal", {
            "leaked_bytes": leaked, "peak_bytes": peak, "failed": over, "unchecked": unchecked}))
        if over:
            report.outcome = "failed"
            report.longrepr = "\n".join(problems)

    def pytest_terminal_summary(self, terminalreporter):
        # Reads the reports, so an xdist controller counts its workers' tests.
        tests = leaked = failing = peak = unchecked = 0
        for reports in terminalreporter.stats.values():
            for rep in reports:
                props = dict(getattr(rep, "user_properties", None) or [])
                mine = props.get("torchseal")
                if getattr(rep, "when", None) != "call" or not isinstance(mine, dict):
                    continue
                if mine.get("unchecked"):
                    unchecked += 1
                    continue
                tests += 1
                leaked += mine["leaked_bytes"]
                peak = max(peak, mine["peak_bytes"])
                failing += bool(mine["failed"])
        out = self.config.getoption("torchseal_output")
        terminalreporter.write_line(
            "torchseal: %d test(s) checked, %d over their limits, %s kept, peak %s%s%s"
            % (tests, failing, format_size(leaked), format_size(max(peak, 0)),
               "; %d not checked (no report to read)" % unchecked if unchecked else "",
               "; reports in " + out if out else ""))


def _held_since(before, after):
    """Site key -> (bytes, allocations, entry) held in `after` beyond `before`."""
    if after is None:
        return {}
    old = _held_sites(before) if before is not None else {}
    held = {}
    for key, (b, n, entry) in _held_sites(after).items():
        ob, on, _ = old.get(key, (0, 0, None))
        if b > ob:
            held[key] = (b - ob, max(n - on, 1), entry)
    return held


_RESULT = pytest.StashKey()
