"""run_case.py INTERP SCRIPT ARGS...: runs SCRIPT under INTERP with a hard
timeout (a deadlock must fail, not hang). Exit 77 (meson: skipped) when the
interpreter is absent."""
import os
import subprocess
import sys

TIMEOUT_S = 90

interp, script, args = sys.argv[1], sys.argv[2], sys.argv[3:]
if not interp or not os.access(interp, os.X_OK):
    print(f"skip: interpreter {interp or '(none)'} not present")
    sys.exit(77)
env = dict(os.environ)
env.pop("PYTHONPATH", None)
env.pop("PYTHONHOME", None)
try:
    r = subprocess.run([interp, script, *args], env=env, timeout=TIMEOUT_S)
except subprocess.TimeoutExpired:
    print(f"FAIL: {script} did not finish within {TIMEOUT_S}s (deadlock?)")
    sys.exit(1)
sys.exit(r.returncode)
