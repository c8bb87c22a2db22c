#!/usr/bin/env python3
"""What keeps the holder scan (python/torchseal/_holder_scan.py) out of the
program's way, without torch:
- it defers the program's Python signal handlers while it runs
  (_DeferredSignals): a signal that arrives then is noted, not handled (a
  handler's SystemExit would be the scan's to swallow), the program's
  handlers are back afterwards, and the shim raises what was noted again
  once the scan has returned;
- a free-threaded interpreter (no GIL) runs no scan: one failure line says
  why.

    holder_scan_guards.py PATH/TO/_holder_scan.py
"""
import importlib.util
import os
import signal
import sys
import threading

spec = importlib.util.spec_from_file_location("holder_scan", sys.argv[1])
hs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hs)

failures = []


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else ": %r" % (detail,)))
    if not ok:
        failures.append(what)


handled = []


def on_term(signum, frame):
    handled.append(signum)


def on_usr1(signum, frame):
    raise SystemExit(3)  # a graceful shutdown


signal.signal(signal.SIGTERM, on_term)
signal.signal(signal.SIGUSR1, on_usr1)
d = hs._DeferredSignals()
os.kill(os.getpid(), signal.SIGUSR1)
os.kill(os.getpid(), signal.SIGTERM)
os.kill(os.getpid(), signal.SIGTERM)
for _ in range(1000):  # bytecode boundaries: the handlers in force run here
    pass
d.finish()
check("no program handler ran during the scan (no SystemExit in it)", handled == [], handled)
check("both signals were noted, once each",
      sorted(d.caught) == sorted([signal.SIGUSR1, signal.SIGTERM]), d.caught)
check("the program's handlers are back",
      signal.getsignal(signal.SIGTERM) is on_term and signal.getsignal(signal.SIGUSR1) is on_usr1)
check("default and ignored dispositions were left alone",
      signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL)
# What the shim does with the `signals` line: raise them again, in the program.
try:
    for s in d.caught:
        signal.raise_signal(s)
    for _ in range(1000):
        pass
    exited = None
except SystemExit as e:
    exited = e.code
for _ in range(1000):
    pass
check("raised again, the program's handler runs in the program: its SystemExit is the "
      "program's", exited == 3, (exited, handled))

# Off the main thread nothing can be deferred (nor handled there): no error.
result = []
t = threading.Thread(target=lambda: result.append(hs._DeferredSignals().saved))
t.start()
t.join()
check("off the main thread: nothing deferred, no error", result == [{}], result)
check("and the handlers are untouched", signal.getsignal(signal.SIGTERM) is on_term)

# Free-threaded: no scan, and the reason in the scan's failure line.
sys.modules["torch"] = type(sys)("torch")  # only ever reached past the check
had = getattr(sys, "_is_gil_enabled", None)
sys._is_gil_enabled = lambda: False
try:
    out = hs.scan(1.0).decode()
finally:
    if had is None:
        del sys._is_gil_enabled
    else:
        sys._is_gil_enabled = had
    del sys.modules["torch"]
fields = out.split("\x1f")
check("free-threaded: one failure line, saying why",
      len(fields) == 4 and fields[0] == "E" and "free-threaded" in fields[2], out)
sys.exit(1 if failures else 0)
