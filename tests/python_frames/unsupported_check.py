"""unsupported_check.py LIB 3.9|off

An interpreter we cannot read (3.9), or TORCHSEAL_PYTHON=off, leaves Python
frames disabled: capture() returns 0, version() is "", and an unsupported
version says so in exactly one line on stderr (none when turned off)."""
import ctypes
import os
import subprocess
import sys

LIB, CASE = sys.argv[1], sys.argv[2]
if os.environ.get("PYFRAMES_CHILD"):
    lib = ctypes.CDLL(LIB)
    ids = [lib.probe_capture_id() for _ in range(5)]
    ver = ctypes.create_string_buffer(64)
    lib.probe_version(ver, 64)
    print(f"ids={ids} version={ver.value.decode()!r}")
    sys.exit(0 if ids == [0] * 5 and ver.value == b"" else 1)

env = dict(os.environ, PYFRAMES_CHILD="1")
if CASE == "off":
    env["TORCHSEAL_PYTHON"] = "off"
r = subprocess.run([sys.executable, __file__, LIB, CASE], env=env, capture_output=True, text=True)
notices = [l for l in r.stderr.splitlines() if l.startswith("torchseal:")]
print(r.stdout.strip())
print("stderr:", r.stderr.strip() or "(empty)")
want = 0 if CASE == "off" else 1
good = r.returncode == 0 and len(notices) == want
if CASE != "off":
    minor = "%d.%d" % sys.version_info[:2]
    good = good and f"Python {minor} frames are not supported; native frames only" in notices[0]
print("ok" if good else "FAIL")
sys.exit(0 if good else 1)
