"""LD_PRELOAD for the processes the test runners start (one definition).

scripts/sanitize builds everything with ASan/UBSan and sets
TSEAL_SANITIZE_PRELOAD to the sanitizer runtimes (space separated). An
instrumented library preloaded into a program that is not instrumented
(python3, sh, a system tool) only works when those runtimes are loaded
before anything else, so they always come first. Outside sanitizer runs the
variable is unset and this is just the list given.

Python 3 standard library only.
"""

import os


def sanitizer_runtimes():
    return os.environ.get("TSEAL_SANITIZE_PRELOAD", "").split()


def preload(*libs):
    """The LD_PRELOAD value that loads `libs` (in order) into a child."""
    return ":".join(sanitizer_runtimes() + [lib for lib in libs if lib])
