"""Environments for the processes the test runners start.

scripts/sanitize builds everything with ASan/UBSan and sets
TSEAL_SANITIZE_PRELOAD to the sanitizer runtimes (space separated). An
instrumented library preloaded into a program that is not instrumented
(python3, sh, a system tool) only works when those runtimes are loaded
before anything else, so they always come first. Outside sanitizer runs the
variable is unset and preload() is just the list given.
"""

import os

from .check import skip

# Variables that would steer torchseal, simcuda or the toy libraries: a test
# sets the ones it means, never inherits them.
STEERING_PREFIXES = ("TORCHSEAL_", "SIMCUDA_", "TSEAL_IT_")


def sanitizer_runtimes():
    return os.environ.get("TSEAL_SANITIZE_PRELOAD", "").split()


def sanitized():
    """A sanitizer run: a runner whose scale is there for the normal build's
    checks (an issue's acceptance) may run the same checks smaller, where
    the point is memory errors on the same paths at 3-6x the cost."""
    return bool(sanitizer_runtimes())


def preload(*libs):
    """The LD_PRELOAD value that loads `libs` (in order) into a child."""
    return ":".join(sanitizer_runtimes() + [lib for lib in libs if lib])


def interpreter_env(env):
    """`env` for an uninstrumented interpreter (python3) that loads the shim
    in a sanitizer run: the interpreter's own allocations at exit are not
    ours, so LeakSanitizer is off in that child only."""
    opts = env.get("ASAN_OPTIONS")
    if opts:
        env = dict(env, ASAN_OPTIONS=opts.replace("detect_leaks=1", "detect_leaks=0"))
    return env


def clean_env(drop_prefixes=STEERING_PREFIXES, drop=()):
    """The caller's environment minus anything that would steer the run;
    LD_PRELOAD holds only the sanitizer runtimes (the shim is added per run)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(tuple(drop_prefixes)) and k not in drop and k != "LD_PRELOAD"}
    if preload():
        env["LD_PRELOAD"] = preload()
    return env


def torch_env_dir(src):
    """The real-PyTorch venv scripts/torch-env makes (the torch tier's
    `torch-env` test, run first): TORCHSEAL_TORCH_ENV, else its default under
    the source tree. A runner that defaulted to nothing would skip outside CI."""
    return os.environ.get("TORCHSEAL_TORCH_ENV") or os.path.join(src, ".cache", "torch-env")


def with_simcuda(env, simcuda_dir):
    """`env` with simcuda's libraries first on LD_LIBRARY_PATH."""
    old = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = simcuda_dir + (":" + old if old else "")
    return env


def need(name, what=None):
    """A path meson passes in `name`; the test SKIPs (77) when it is empty
    (not built in this configuration) or does not exist yet."""
    value = os.environ.get(name, "")
    if not value:
        skip("%s is not built in this configuration (%s is empty)" % (what or name, name))
    if not os.path.exists(value):
        skip("%s does not exist yet: %s" % (what or name, value))
    return value
