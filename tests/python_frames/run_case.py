"""run_case.py INTERP SCRIPT ARGS...: runs SCRIPT under INTERP with a hard
timeout (a deadlock must fail, not hang). Exit 77 (meson: skipped) when the
interpreter is absent."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import preload  # noqa: E402

TIMEOUT_S = 90

interp, script, args = sys.argv[1], sys.argv[2], sys.argv[3:]
if not interp or not os.access(interp, os.X_OK):
    print(f"skip: interpreter {interp or '(none)'} not present")
    sys.exit(77)
env = dict(os.environ)
env.pop("PYTHONPATH", None)
env.pop("PYTHONHOME", None)
if preload():  # sanitizer runs: the probe library is instrumented, the interpreter is not
    env["LD_PRELOAD"] = preload()
try:
    r = subprocess.run([interp, script, *args], env=env, timeout=TIMEOUT_S)
except subprocess.TimeoutExpired:
    print(f"FAIL: {script} did not finish within {TIMEOUT_S}s (deadlock?)")
    sys.exit(1)
sys.exit(r.returncode)
