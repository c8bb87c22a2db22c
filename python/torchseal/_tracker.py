"""Recording started from Python: torchseal.start()/stop() and Tracker.

With the shim preloaded (``torchseal run``), start() opens an interval: what
is live then is pre-existing, and stop() reports what the interval left
behind. Without it (a notebook kernel, a script started plainly), start()
first loads libtorchseal.so into the running process. The shim then takes a
late CUPTI subscription where CUPTI accepts one, or else points the loaded
libraries' CUDA entries (their GOT) at its hooks. Memory allocated before
the start is pre-existing, not a leak; its frees are counted.

Unlike step()/mark()/dump(), these raise: they are explicit requests, and a
silent no-op would read as "no leaks".
"""

import ctypes
import json
import os

_ENV_SHIM = "TORCHSEAL_SHIM"


class TorchsealError(RuntimeError):
    """torchseal could not start or stop recording (one-line reason)."""


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    explicit = os.environ.get(_ENV_SHIM)
    if explicit:
        yield explicit
    yield os.path.join(here, "lib", "libtorchseal.so")  # wheel: inside the package
    # Installed by Meson: <libdir>/torchseal/python/torchseal/ and the shim
    # in <libdir>/torchseal/; build tree: build/python/torchseal/ and
    # build/shim/.
    yield os.path.join(here, "..", "..", "libtorchseal.so")
    yield os.path.join(here, "..", "..", "shim", "libtorchseal.so")


def _in_process():
    """The shim's functions when it is already in the process (preloaded)."""
    try:
        lib = ctypes.CDLL(None)
        lib.torchseal_start  # noqa: B018 - probe
        return lib
    except (OSError, AttributeError, TypeError):
        return None


_lib = None


def _shim():
    global _lib
    if _lib is not None:
        return _lib
    lib = _in_process()
    if lib is None:
        tried = []
        for path in _candidates():
            path = os.path.normpath(path)
            tried.append(path)
            if not os.path.isfile(path):
                continue
            try:
                # Local: the shim reaches the callers through their GOT or
                # CUPTI, and must not join the global lookup scope.
                lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
                break
            except OSError as e:
                raise TorchsealError(f"torchseal: cannot load {path}: {e}") from None
        if lib is None:
            raise TorchsealError("torchseal: libtorchseal.so not found (tried "
                                 + ", ".join(tried) + f"; set {_ENV_SHIM})")
    try:
        lib.torchseal_start.restype = ctypes.c_int
        lib.torchseal_start.argtypes = [ctypes.c_char_p]
        lib.torchseal_stop.restype = ctypes.c_longlong
        lib.torchseal_stop.argtypes = []
    except AttributeError:
        raise TorchsealError("torchseal: this libtorchseal.so has no torchseal_start "
                             "(an older shim is preloaded)") from None
    _lib = lib
    from torchseal import _rebind  # step/mark/dump reach a late shim too

    _rebind(lib)
    return lib


class Result:
    """What stop() wrote: the report's prefix, its leak count and its JSON."""

    def __init__(self, prefix, leaks):
        self.prefix = prefix
        self.leaks = leaks
        self.json_path = prefix + ".json"
        self.text_path = prefix + ".txt"
        self._report = None

    @property
    def report(self):
        """The parsed P.json (dict)."""
        if self._report is None:
            with open(self.json_path, encoding="utf-8") as f:
                self._report = json.load(f)
        return self._report

    @property
    def text(self):
        with open(self.text_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def __repr__(self):
        return f"torchseal.Result(prefix={self.prefix!r}, leaks={self.leaks})"


_prefix = None


def start(prefix="torchseal-interval"):
    """Start recording; stop() writes PREFIX.json and PREFIX.txt."""
    global _prefix
    prefix = os.path.abspath(os.fspath(prefix))
    lib = _shim()
    if lib.torchseal_start(prefix.encode("utf-8")) != 0:
        raise TorchsealError("torchseal: recording could not start (its reason is on stderr)")
    _prefix = prefix


def stop():
    """Stop the interval and write its report. Returns a Result."""
    global _prefix
    if _prefix is None or _lib is None:
        raise TorchsealError("torchseal: stop() without start()")
    prefix, _prefix = _prefix, None
    leaks = _lib.torchseal_stop()
    if leaks < 0:
        raise TorchsealError(f"torchseal: no report written to {prefix}.json "
                             "(its reason is on stderr)")
    return Result(prefix, int(leaks))


class Tracker:
    """``with torchseal.Tracker("out") as t: ...``; then ``t.result``."""

    def __init__(self, prefix="torchseal-interval"):
        self.prefix = prefix
        self.result = None

    def __enter__(self):
        start(self.prefix)
        return self

    def __exit__(self, *exc):
        self.result = stop()
        return False
