#!/usr/bin/env python3
"""The CUPTI backend, end to end, on simcuda's libcupti.so.13.

    test_cupti_backend.py SCENARIO [--shim P] [--simcuda-dir D] [--examples-src D] [--binary B]

Scenarios (one meson test each; see tests/integration/cupti.build):

    cupti         LD_PRELOAD, TORCHSEAL_BACKEND=cupti: planted_leaks' report, backend "cupti"
    busy          LD_PRELOAD, SIMCUDA_CUPTI_BUSY=1, backend cupti: the same report from the
                  hooks (backend "hooks") and exactly one stderr line explaining the fallback
    second-*      second_subscriber.cpp starts its own subscriber (v1 or v2) mid-run: default
                  backend (torchseal never subscribes), or backend cupti on a single- or
                  multi-subscriber CUPTI (SIMCUDA_CUPTI_MULTI=1), handing the slot over
                  where CUPTI cannot share it
    injection     CUDA_INJECTION64_PATH=<shim>, no LD_PRELOAD: the same report, backend "cupti"
    injection-busy CUDA_INJECTION64_PATH with the CUPTI slot taken: the program is unharmed
                  and one line says nothing will be recorded

The expected report is the one planted_leaks.cpp states in its `// EXPECT:` lines
(3 leaks: 1048576 B in 1, 786432 B in 3, 65536 B host-pinned in 1; one OOM of
1125899906842624 bytes), checked by run.py's own check_report, so every backend is held
to the same promise.

Paths come from run.py's environment (TSEAL_IT_SHIM, TSEAL_IT_SIMCUDA_DIR,
TSEAL_IT_EXAMPLES_SRC, TSEAL_IT_BIN_planted_leaks), else TS_SHIM, TS_SIMCUDA_DIR,
TS_EXAMPLES_DIR (a directory holding the planted_leaks binary or its source), else the
options above. Exit status: 0 pass, 1 fail, 77 skip. Python 3 standard library only.
"""

import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(1, os.path.join(HERE, "..", "integration"))
import run as it  # noqa: E402  (tests/integration/run.py: the report checks)
import harness  # noqa: E402
from harness import Checker, Failed, need, run, skip, tail  # noqa: E402

EXAMPLE = "planted_leaks"
SECOND = "second_subscriber"
HANDOVER_LINE = "handed it over"


def configure(argv):
    """Map TS_* variables and command-line options onto run.py's TSEAL_IT_* ones."""
    opts = dict(zip(argv[0::2], argv[1::2]))
    fallbacks = {
        "TSEAL_IT_SHIM": [opts.get("--shim"), os.environ.get("TS_SHIM")],
        "TSEAL_IT_SIMCUDA_DIR": [opts.get("--simcuda-dir"), os.environ.get("TS_SIMCUDA_DIR")],
        "TSEAL_IT_EXAMPLES_SRC": [opts.get("--examples-src"), os.environ.get("TS_EXAMPLES_DIR")],
        "TSEAL_IT_BIN_" + EXAMPLE: [opts.get("--binary")],
    }
    for key, values in fallbacks.items():
        if os.environ.get(key):
            continue
        for v in values:
            if v:
                os.environ[key] = v
                break
    if not os.environ.get("TSEAL_IT_BIN_" + EXAMPLE) and os.environ.get("TS_EXAMPLES_DIR"):
        os.environ["TSEAL_IT_BIN_" + EXAMPLE] = os.path.join(os.environ["TS_EXAMPLES_DIR"], EXAMPLE)
    src = os.environ.get("TSEAL_IT_EXAMPLES_SRC")
    if src and not os.path.exists(os.path.join(src, EXAMPLE + ".cpp")):
        # TS_EXAMPLES_DIR may be the build directory: the sources sit beside this file.
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
        os.environ["TSEAL_IT_EXAMPLES_SRC"] = os.path.normpath(here)


def need_simcuda_cupti():
    simcuda = need("TSEAL_IT_SIMCUDA_DIR", what="simcuda")
    if not os.path.exists(os.path.join(simcuda, "libcupti.so.13")):
        skip("simcuda's libcupti.so.13 is not built yet in %s" % simcuda)


def torchseal_lines(stderr):
    """`torchseal:` lines on stderr, minus the exit summary ("N byte(s) leaked ...; see P.txt")
    that every leaking run prints whatever the backend."""
    return [l for l in stderr.splitlines()
            if l.startswith("torchseal:") and not re.search(r"byte\(s\) leaked in", l)]


def run_example(check, tmp, label, env_extra, preload=True, inject=False, name=EXAMPLE, args=()):
    shim = need("TSEAL_IT_SHIM", what="shim (libtorchseal.so)")
    source = os.path.join(HERE, name + ".cpp") if name == SECOND else None
    binary, source = it.example_paths(name, source=source)
    exp = it.Expectations(source)
    check.note("binary", binary)
    prefix = os.path.join(tmp, label)
    env = it.base_env()
    env.update(exp.env)
    env["TORCHSEAL_OUTPUT"] = prefix
    if preload:
        env["LD_PRELOAD"] = harness.preload(shim)
    if inject:
        env["CUDA_INJECTION64_PATH"] = shim
    env.update(env_extra)
    result = run([binary] + list(args), env, cwd=tmp)
    check.note(label, "%s %s" % (" ".join("%s=%s" % kv for kv in sorted(env_extra.items())),
                                 result.describe()))
    return exp, prefix, result


def check_full_report(check, exp, prefix, result, backend):
    it.check_exit(check, result, exp.exit, "of the program")
    report = it.load_report(check, prefix, result)
    it.check_report(check, exp, report, result, result.pid, prefix)
    check.eq("process.backend", (report.get("process") or {}).get("backend"), backend)
    return report


def scenario_cupti(args):
    """TORCHSEAL_BACKEND=cupti under LD_PRELOAD: CUPTI alone counts every allocation."""
    need_simcuda_cupti()
    check = Checker("cupti backend (LD_PRELOAD)")
    with tempfile.TemporaryDirectory(prefix="tseal-cupti-") as tmp:
        exp, prefix, result = run_example(check, tmp, "cupti", {"TORCHSEAL_BACKEND": "cupti"})
        check_full_report(check, exp, prefix, result, "cupti")
        check.eq("torchseal lines on stderr", torchseal_lines(result.stderr), [])
    return check.finish()


def scenario_busy(args):
    """The CUPTI slot is taken (torch.profiler, Nsight...): cupti falls back to the hooks."""
    need_simcuda_cupti()
    check = Checker("cupti busy -> hooks")
    with tempfile.TemporaryDirectory(prefix="tseal-cupti-") as tmp:
        exp, prefix, result = run_example(check, tmp, "busy", {"SIMCUDA_CUPTI_BUSY": "1",
                                                               "TORCHSEAL_BACKEND": "cupti"})
        check_full_report(check, exp, prefix, result, "hooks")
        ours = torchseal_lines(result.stderr)
        check.eq("torchseal lines on stderr (one explaining the fallback)", len(ours), 1,
                 "stderr: %s" % tail(result.stderr))
        if len(ours) == 1:
            check.true("the line names CUPTI and the hooks", "CUPTI" in ours[0] and "hooks" in ours[0],
                       ours[0])
            check.true("the line says another subscriber holds the slot",
                       "subscriber" in ours[0], ours[0])
    return check.finish()


def scenario_injection(args):
    """CUDA_INJECTION64_PATH instead of LD_PRELOAD: CUPTI is the only way in."""
    need_simcuda_cupti()
    check = Checker("cupti via CUDA_INJECTION64_PATH")
    with tempfile.TemporaryDirectory(prefix="tseal-cupti-") as tmp:
        exp, prefix, result = run_example(check, tmp, "inject", {}, preload=False, inject=True)
        check_full_report(check, exp, prefix, result, "cupti")
        check.eq("torchseal lines on stderr", torchseal_lines(result.stderr), [])
    return check.finish()


def scenario_injection_busy(args):
    """Injected but the CUPTI slot is taken: nothing can be recorded; say so, harm nothing."""
    need_simcuda_cupti()
    check = Checker("cupti via CUDA_INJECTION64_PATH, slot taken")
    with tempfile.TemporaryDirectory(prefix="tseal-cupti-") as tmp:
        exp, prefix, result = run_example(check, tmp, "inject-busy", {"SIMCUDA_CUPTI_BUSY": "1"},
                                          preload=False, inject=True)
        it.check_exit(check, result, exp.exit, "of planted_leaks")
        check.true("the program ran to completion", "planted_leaks: done" in result.stdout)
        ours = torchseal_lines(result.stderr)
        check.eq("a line says nothing will be recorded",
                 len([l for l in ours if "nothing will be recorded" in l]), 1,
                 "stderr: %s" % tail(result.stderr))
    return check.finish()


def second_subscriber(title, env, mode, backend, handover):
    """second_subscriber.cpp subscribes to CUPTI itself (`mode` v1 or v2) while torchseal
    records: its subscribe succeeds and its callback sees its calls (the program checks
    both), torchseal's leak set and event count stay exact across any switch of backend,
    and exactly one line says so when torchseal handed the slot over."""
    need_simcuda_cupti()
    check = Checker(title)
    with tempfile.TemporaryDirectory(prefix="tseal-cupti-") as tmp:
        exp, prefix, result = run_example(check, tmp, "second", env, name=SECOND, args=[mode])
        check.true("the program's own subscriber worked", "saw allocs=2 frees=2" in result.stdout,
                   tail(result.stdout))
        check_full_report(check, exp, prefix, result, backend)
        ours = torchseal_lines(result.stderr)
        if handover:
            check.eq("torchseal lines on stderr (one saying the slot was handed over)", len(ours), 1,
                     "stderr: %s" % tail(result.stderr))
            if len(ours) == 1:
                check.true("the line says the hooks took over",
                           HANDOVER_LINE in ours[0] and "hooks" in ours[0], ours[0])
        else:
            check.eq("torchseal lines on stderr", ours, [])
    return check.finish()


def scenario_second_auto(args):
    """The default configuration never takes CUPTI's slot when preloaded."""
    return second_subscriber("second subscriber, default backend", {}, "v1", "hooks", False)


def scenario_second_handover(args):
    """A single-subscriber CUPTI (13.0): torchseal hands the slot over to a V1 subscriber."""
    return second_subscriber("second subscriber (v1), single-subscriber CUPTI",
                             {"TORCHSEAL_BACKEND": "cupti"}, "v1", "cupti", True)


def scenario_second_handover_v2(args):
    """A single-subscriber CUPTI (13.0) refuses cuptiSubscribe_v2 too: handed over."""
    return second_subscriber("second subscriber (v2), single-subscriber CUPTI",
                             {"TORCHSEAL_BACKEND": "cupti"}, "v2", "cupti", True)


def scenario_second_multi(args):
    """Multi-subscriber CUPTI (13.3): both subscribers keep their callbacks, nothing moves."""
    return second_subscriber("second subscriber (v2), multi-subscriber CUPTI",
                             {"TORCHSEAL_BACKEND": "cupti", "SIMCUDA_CUPTI_MULTI": "1"}, "v2",
                             "cupti", False)


def scenario_second_multi_v1(args):
    """Multi-subscriber CUPTI refuses a V1 subscriber next to V2 ones: handed over."""
    return second_subscriber("second subscriber (v1), multi-subscriber CUPTI",
                             {"TORCHSEAL_BACKEND": "cupti", "SIMCUDA_CUPTI_MULTI": "1"}, "v1",
                             "cupti", True)


SCENARIOS = {
    "cupti": scenario_cupti,
    "busy": scenario_busy,
    "injection": scenario_injection,
    "injection-busy": scenario_injection_busy,
    "second-auto": scenario_second_auto,
    "second-handover": scenario_second_handover,
    "second-handover-v2": scenario_second_handover_v2,
    "second-multi": scenario_second_multi,
    "second-multi-v1": scenario_second_multi_v1,
}


def main(argv):
    if len(argv) < 2 or argv[1] not in SCENARIOS:
        print(__doc__)
        return 2
    configure(argv[2:])
    try:
        return SCENARIOS[argv[1]](argv[2:])
    except Failed as e:
        print("FAIL: %s" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
