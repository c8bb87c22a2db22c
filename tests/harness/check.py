"""Failure and skip helpers shared by the test runners."""

import json
import sys

SKIP = 77  # meson's exit status for a skipped test


class Failed(Exception):
    """A check that cannot continue: the runner prints it and exits 1."""


def skip(reason):
    print("SKIP: " + reason)
    sys.exit(SKIP)


class Checker:
    """Collects every difference and prints them together with the notes
    (report paths, command lines), so one run tells the whole story.
    verbose=True also prints every check as it is made (`ok` or `FAIL`), for
    long scenarios whose log should show progress."""

    def __init__(self, scenario, verbose=False):
        self.scenario = scenario
        self.verbose = verbose
        self.failures = []
        self.context = []  # (label, value) shown on failure

    def note(self, label, value):
        self.context.append((label, value))

    def fail(self, what, actual=None, expected=None, detail=None):
        if self.verbose:
            print("FAIL " + what, flush=True)
        msg = "FAIL: " + what
        if expected is not None or actual is not None:
            msg += "\n    expected: %r\n    actual:   %r" % (expected, actual)
        if detail:
            msg += "\n    " + str(detail).replace("\n", "\n    ")
        self.failures.append(msg)
        return False

    def eq(self, what, actual, expected, detail=None):
        if actual != expected:
            return self.fail(what, actual, expected, detail)
        return self._ok(what)

    def true(self, what, cond, detail=None):
        if not cond:
            return self.fail(what, detail=detail)
        return self._ok(what)

    def _ok(self, what):
        if self.verbose:
            print("ok   " + what, flush=True)
        return True

    def read_json(self, path, what="report"):
        """The parsed JSON file at `path`, or None after recording why not."""
        try:
            return load_json(path, what)
        except Failed as e:
            self.fail(str(e))
            return None

    def finish(self):
        if not self.failures:
            print("PASS: %s" % self.scenario)
            # Measured figures (label "figure...") are reported on success too.
            for label, value in self.context:
                if label.startswith("figure"):
                    print("%s: %s" % (label, value))
            return 0
        print("=" * 72)
        print("scenario: %s" % self.scenario)
        for label, value in self.context:
            print("%s: %s" % (label, value))
        print("-" * 72)
        for f in self.failures:
            print(f)
        print("=" * 72)
        print("%d check(s) failed in %s" % (len(self.failures), self.scenario))
        return 1


def load_json(path, what="report"):
    """The parsed JSON file at `path`; Failed with a one-line reason if it is
    missing or not JSON."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise Failed("no %s at %s: %s" % (what, path, e))
    except ValueError as e:
        raise Failed("%s %s is not valid JSON: %s" % (what, path, e))
