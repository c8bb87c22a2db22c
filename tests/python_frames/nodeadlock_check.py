"""nodeadlock_check.py LIB

capture() must never wait for the GIL. Another thread holds the GIL (a
pure-Python busy loop, then a C call that sleeps with the GIL held) while
this thread captures from a ctypes.CDLL call, i.e. with the GIL released.
Each capture is timed in C: one that waited for the GIL would take as long
as the other thread keeps it (~1 s), instead of microseconds.
"""
import ctypes
import sys
import threading
import time

lib = ctypes.CDLL(sys.argv[1])
lib.probe_capture_loop.restype = ctypes.c_longlong
lib.probe_capture_loop.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_uint)]
lib.probe_capture.argtypes = [ctypes.c_char_p, ctypes.c_int]
LIMIT_NS = 50_000_000  # far above a capture, far below a GIL hold
ok = True


def report(name, worst_ns, first_id):
    global ok
    good = worst_ns < LIMIT_NS and first_id != 0
    ok = ok and good
    print(f"{'ok  ' if good else 'FAIL'} {name}: slowest capture {worst_ns / 1000:.1f} us, stack id {first_id}")


# 1. Pure-Python spinner holding the GIL whenever we release it.
stop = False


def spin():
    while not stop:
        pass


t = threading.Thread(target=spin, daemon=True)
t.start()
first = ctypes.c_uint(0)
worst = lib.probe_capture_loop(20000, 20000, ctypes.byref(first))
report("GIL held by a Python busy loop", worst, first.value)
# Many separate GIL-released calls while the spinner competes for the GIL.
buf = ctypes.create_string_buffer(1 << 20)
t0 = time.monotonic()
for _ in range(300):
    if lib.probe_capture(buf, len(buf)) <= 0:
        ok = False
        print("FAIL separate calls: no frames captured")
        break
print(f"ok   300 separate CDLL captures beside the spinner in {time.monotonic() - t0:.2f} s")
stop = True
t.join()

# 2. A thread that sleeps 1 s inside a C call *with* the GIL held (PyDLL).
libc = ctypes.PyDLL(None)
libc.usleep.argtypes = [ctypes.c_uint]
holder = threading.Thread(target=lambda: libc.usleep(1_000_000), daemon=True)
holder.start()
worst = lib.probe_capture_loop(1000, 100_000, ctypes.byref(first))  # 0.1 s in: holder owns the GIL
report("GIL held by a sleeping PyDLL call", worst, first.value)
holder.join()
sys.exit(0 if ok else 1)
