"""Mark training steps (and dump reports) for the torchseal leak detector.

    import torchseal

    for batch in loader:
        loss = train_step(model, batch)
        torchseal.step()          # one training step ended

`torchseal run -- python train.py` preloads libtorchseal.so and puts this
package on PYTHONPATH. The functions call the shim's C API (README.md,
"Quick start") through ``ctypes.CDLL(None)``: the preloaded shim's exports are in
the process's global symbol scope, so no path is needed, and a process
started without the shim finds no symbols and every call does nothing.

Nothing here raises. A helper that marks steps must never be the reason a
training run dies: a missing shim, an old shim without one of the symbols or
an odd argument all degrade to "do nothing" (and `dump` returns False).

Pure Python, standard library only, no import-time work beyond one dlsym
per function, so it is safe to import unconditionally.
"""

import ctypes

__all__ = ["Tracker", "active", "available", "dump", "mark", "start", "step", "stop"]


def _bind(lib, name, restype, argtypes):
    """The shim's function `name`, or None when it is not in the process."""
    if lib is None:
        return None
    try:
        fn = getattr(lib, name)
    except AttributeError:  # no shim preloaded (or an older one without `name`)
        return None
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


def _process_symbols():
    try:
        # The main program's global scope, which includes LD_PRELOADed
        # libraries. CDLL (not PyDLL) releases the GIL during each call: a
        # dump symbolizes and writes files, and other Python threads should
        # keep running meanwhile.
        return ctypes.CDLL(None)
    except (OSError, TypeError):  # platforms without dlopen(NULL)
        return None


def _rebind(lib):
    """Binds step/mark/dump to `lib` (also a shim loaded later by start())."""
    global _active, _step, _mark, _dump
    _active = _bind(lib, "torchseal_active", ctypes.c_int, [])
    _step = _bind(lib, "torchseal_step", None, [])
    _mark = _bind(lib, "torchseal_mark", None, [ctypes.c_char_p])
    _dump = _bind(lib, "torchseal_dump", ctypes.c_int, [ctypes.c_char_p])


_rebind(_process_symbols())


def _as_bytes(text):
    if text is None:
        return b""
    if isinstance(text, bytes):
        data = text
    else:
        data = str(text).encode("utf-8", "replace")
    # A C string ends at the first NUL; say so rather than let ctypes refuse.
    return data.split(b"\0", 1)[0]


def available():
    """True when the torchseal shim is loaded in this process."""
    return _step is not None


def active():
    """True once the shim is recording (after the process's first CUDA call).

    Before that, `step`, `mark` and `dump` are accepted and do nothing."""
    if _active is None:
        return False
    try:
        return bool(_active())
    except Exception:  # noqa: BLE001 - never raise from the helper
        return False


def step():
    """One training step ended: the shim samples live bytes per allocation
    site now. Call it once per step, at the same point of every step (after
    the optimizer step is usual); growth is judged on these samples."""
    if _step is None:
        return
    try:
        _step()
    except Exception:  # noqa: BLE001
        pass


def mark(label):
    """Put a named mark (e.g. "epoch 3", "validation") on the recorded
    timeline."""
    if _mark is None:
        return
    try:
        _mark(_as_bytes(label))
    except Exception:  # noqa: BLE001
        pass


def dump(reason="api"):
    """Write a report now (P.<n>.json and P.<n>.txt) and keep recording.

    Returns True when a report was written; False without the shim, before
    the first CUDA call, or when writing failed."""
    if _dump is None:
        return False
    try:
        return _dump(_as_bytes(reason)) == 0
    except Exception:  # noqa: BLE001
        return False


# Recording started from Python, and the IPython extension. Imported last:
# they use _rebind above.
from torchseal._tracker import Result, Tracker, TorchsealError, start, stop  # noqa: E402


def load_ipython_extension(ipython):
    """``%load_ext torchseal``: registers the ``%%torchseal`` cell magic."""
    from torchseal._magic import load_ipython_extension as load

    load(ipython)
