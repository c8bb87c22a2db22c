#!/usr/bin/env python3
"""`pytest --torchseal` with real torch on simcuda.

    pytest_check.py plain|xdist

Runs pytest_cases/test_gpu_memory.py in the torch tier's venv (pytest and
pytest-xdist installed there on first use) WITHOUT the shim: the plugin
re-executes pytest under `torchseal run --tensors`. Checks each test's
outcome, the leaking test's line in its failure, the summary line and the
per-test reports (one set per xdist worker). Exit 0 pass, 1 fail, 77 skip.
"""
import glob
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as tier  # noqa: E402
from run import BUILD, CHECK, CLI, done, prerequisites  # noqa: E402

import harness  # noqa: E402

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytest_cases",
                     "test_gpu_memory.py")
EXPECTED = {
    "test_leaks_into_a_global": "failed",
    "test_clean": "passed",
    "test_cache_is_not_a_leak": "passed",
    "test_keeps_less_than_its_limit": "passed",
    "test_peak_over_its_limit": "failed",
    "test_failing_assertion_stays_a_failure": "failed",
    # Its dump cannot be read: not judged (it keeps 1 MiB), and said so.
    "test_unreadable_dump_is_not_checked": "passed",
}


def with_pytest(py):
    p = harness.run([py, "-c", "import pytest, xdist"], None, timeout=120)
    if p.returncode == 0:
        return
    env = dict(os.environ)
    env.setdefault("PIP_CACHE_DIR", os.path.join(tier.SRC, ".cache", "pip"))
    p = harness.run([py, "-m", "pip", "install", "-q", "pytest", "pytest-xdist"], env,
                    timeout=600)
    if p.returncode != 0:
        tier.loud_skip("cannot install pytest and pytest-xdist in the torch venv:\n" +
                       (p.stderr or p.stdout)[-2000:])


def main():
    scenario = sys.argv[1] if len(sys.argv) > 1 else "plain"
    py = prerequisites()
    with_pytest(py)
    out = tempfile.mkdtemp(prefix="tseal-pytest-")
    args = ["-m", "pytest", "-p", "torchseal.pytest_plugin", "-p", "no:cacheprovider",
            "--torchseal", "--torchseal-output", out, "-rA", CASES]
    if scenario == "xdist":
        args[4:4] = ["-n", "2"]
    # No shim in the environment: the plugin must re-execute pytest under it,
    # finding the CLI on PATH and the module on PYTHONPATH (the build tree's).
    extra = {"PYTHONPATH": os.path.join(BUILD, "python"),
             "PATH": os.path.dirname(CLI) + os.pathsep + os.environ.get("PATH", "")}
    p = tier.run(py, args, timeout=900, extra=extra)
    text = p.stdout
    CHECK.note("output", text[-6000:])
    CHECK.eq("pytest's exit status is 1 (tests failed)", p.returncode, 1)
    outcomes = {}
    for m in re.finditer(r"^(PASSED|FAILED) \S*::(\w+)", text, re.M):
        outcomes[m.group(2)] = m.group(1).lower()
    CHECK.eq("each test's outcome", outcomes, EXPECTED)
    keep = next(i for i, l in enumerate(open(CASES), 1) if "# KEEP" in l)
    CHECK.true("the leaking test's failure names its line",
               re.search(r"test_gpu_memory\.py:%d in test_leaks_into_a_global" % keep, text))
    CHECK.true("the failure says how much it kept", "kept 1.0 MiB of CUDA memory" in text)
    CHECK.true("the peak failure says its peak",
               re.search(r"test_peak_over_its_limit used [\d.]+ MiB of CUDA memory at its "
                         r"peak \(limit 1.0 MiB\)", text))
    CHECK.true("one summary line, with the test it could not check",
               len(re.findall(r"^torchseal: 6 test\(s\) checked, 2 over their limits, .*; "
                              r"1 not checked \(no report to read\)", text, re.M)) == 1)
    CHECK.true("a warning names the test that was not checked",
               "test_unreadable_dump_is_not_checked was not checked for kept CUDA memory" in text)
    pids = {re.sub(r"\.\d+\.json$", "", os.path.basename(f))
            for f in glob.glob(os.path.join(out, "*.*.json"))}
    CHECK.note("reports", sorted(os.listdir(out)))
    want = 2 if scenario == "xdist" else 1
    CHECK.eq("per-test reports from each process that ran tests", len(pids), want)
    if not CHECK.failures:
        shutil.rmtree(out, ignore_errors=True)
    done()


if __name__ == "__main__":
    main()
