#!/usr/bin/env python3
"""Training-loop leak patterns under `torchseal run`, checked end to end.

    run_pattern.py script INTERP SCRIPT MODE [ARGS...]   examples/python/SCRIPT
    run_pattern.py helper INTERP HELPER_CHECK            the torchseal helper module
    run_pattern.py nvtx BINARY SOURCE                    examples/nvtx_steps.cpp
    run_pattern.py demo NAME INTERP DEMO BUILD EXAMPLE   `scripts/demo --python
                                                         INTERP`: its report shows
                                                         EXAMPLE's growth site and hint

MODE is `async` (`torchseal run --tensors`: one cudaMallocAsync per tensor)
or `caching` (the default segments mode: 2 MiB cudaMalloc segments). The
toy library picks its allocator from PYTORCH_CUDA_ALLOC_CONF exactly as
PyTorch does, so the mode really comes from the CLI flag and the shim.

What a run must produce is written in the script, as comment lines:

    # EXPECT: growth N             exactly N growth entries
    # EXPECT: growth-site NAME     each growth entry's python_frames hold the
                                   line marked `# SITE: NAME`, in the function
                                   that contains it
    # EXPECT: hint TEXT            P.txt has a `hint:` line containing TEXT
    # EXPECT: ooms                 the report has OOM entries
    # EXPECT[MODE]: ...            the same, for one mode; it replaces the
                                   generic line of the same kind
    # ARGS[MODE]: ...              extra arguments in that mode
    # ENV: NAME=VALUE              environment of the run

Paths come from meson's environment: TSEAL_PY_CLI, TSEAL_PY_SIMCUDA_DIR,
TSEAL_PY_HELPER_DIR (where the helper must be imported from),
TSEAL_PY_EXAMPLES_DIR (examples/python, for helper_check.py). Exit status:
0 pass, 1 fail, 77 skip (interpreter missing). Standard library only.
"""

import ast
import glob
import math
import os
import re
import shlex
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import harness  # noqa: E402
from harness import SKIP, Checker, Failed, clean_env, load_json  # noqa: E402

TIMEOUT = 300

# Warm-up rule of report/analysis/growth.h (defaults), used only to sanity-check
# the number of samples a flagged series was fitted on.
WARMUP_FRACTION = 0.2
WARMUP_MIN = 2

EXPECT_RE = re.compile(r"^\s*(?:#|//)\s*EXPECT(?:\[(\w+)\])?:\s*(\S+)\s*(.*?)\s*$")
ARGS_RE = re.compile(r"^\s*#\s*ARGS\[(\w+)\]:\s*(.*?)\s*$")
ENV_RE = re.compile(r"^\s*(?:#|//)\s*ENV:\s*([A-Za-z_][A-Za-z0-9_]*)=(.*?)\s*$")
SITE_RE = re.compile(r"#\s*SITE:\s*([\w-]+)")
LEAK_SITE_RE = re.compile(r"//\s*LEAK-SITE:\s*([\w-]+)")
GROWTH_CXX_RE = re.compile(r"^\s*//\s*EXPECT-GROWTH:\s*(\d+)(?:\s+site=([\w-]+))?\s*$")

KIND_OF_MODE = {"async": "stream-ordered", "caching": "device"}
# Runtime name and the driver name the allocation shows as when the runtime
# is reached through dlsym(handle) (ctypes) and only the driver hook sees it.
APIS_OF_MODE = {"async": {"cudaMallocAsync", "cuMemAllocAsync"},
                "caching": {"cudaMalloc", "cuMemAlloc_v2", "cuMemAlloc"}}


def env_path(name):
    value = os.environ.get(name, "")
    if not value:
        print(f"FAIL: {name} is not set (meson passes it)")
        sys.exit(1)
    return value


def base_env():
    """The caller's environment minus anything that would change the run;
    LD_PRELOAD holds the sanitizer runtimes only (`torchseal run` adds the shim)."""
    env = clean_env(drop_prefixes=("TORCHSEAL_", "SIMCUDA_", "TOYTORCH_", "PYTORCH_"),
                    drop=("PYTHONPATH", "PYTHONHOME", "NVTX_INJECTION64_PATH",
                          "CUDA_INJECTION64_PATH"))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["TORCHSEAL_LOG"] = "warn"
    return env


def run(cmd, env, cwd):
    """Run cmd (stderr merged into stdout) and show its output."""
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    r = harness.run(cmd, env, cwd=cwd, timeout=TIMEOUT, merge_stderr=True)
    print(r.stdout, end="")
    return r


def load_report(check, prefix):
    report = check.read_json(prefix + ".json")
    if report is None:
        return None, ""
    try:
        with open(prefix + ".txt") as f:
            text = f.read()
    except OSError as err:
        check.fail(f"no {prefix}.txt: {err}")
        text = ""
    return report, text


def describe(g):
    py = ", ".join(f"{os.path.basename(f.get('file') or '?')}:{f.get('line')} {f.get('function')}"
                   for f in g.get("python_frames") or [])
    nat = g.get("frames") or [{}]
    return (f"{g.get('bytes_per_step')} B/step over {g.get('steps')} steps, r={g.get('r')}, "
            f"{g.get('kind')} {g.get('api')} at {nat[0].get('function')} "
            f"{nat[0].get('file')}:{nat[0].get('line')}; python: [{py}]")


def finish(check, prefix, text):
    check.note(prefix + ".txt", "\n" + text)
    return check.finish()


def check_steps(check, g, n_steps):
    # Every sample after warm-up is in the fit when steps come from the
    # program (torchseal.step() / NVTX); time windows would give another count.
    expected = n_steps - max(WARMUP_MIN, math.ceil(WARMUP_FRACTION * n_steps))
    check.true(f"growth fitted on {g.get('steps')} samples, expected {expected} "
               f"(one per step marked by the program, minus warm-up): {describe(g)}",
               g.get("steps") == expected)


# --------------------------------------------------------------------------


def parse_script(path, mode):
    expects, args, env = {}, [], {}
    generic, specific = {}, {}
    with open(path) as f:
        lines = f.read().splitlines()
    sites = {}
    for no, line in enumerate(lines, 1):
        m = SITE_RE.search(line)
        if m:
            sites[m.group(1)] = no
        m = EXPECT_RE.match(line)
        if m:
            which, key, value = m.groups()
            if which is None:
                generic.setdefault(key, []).append(value)
            elif which == mode:
                specific.setdefault(key, []).append(value)
            continue
        m = ARGS_RE.match(line)
        if m and m.group(1) == mode:
            args += shlex.split(m.group(2))
            continue
        m = ENV_RE.match(line)
        if m:
            env[m.group(1)] = m.group(2)
    # growth-site and growth-function describe one site: a mode's own
    # location replaces the generic one.
    if "growth-site" in specific:
        generic.pop("growth-site", None)
    expects = {**generic, **specific}
    if "growth" not in expects:
        raise SystemExit(f"FAIL: {path} has no `# EXPECT: growth N` line")
    return expects, args, env, sites, lines


def enclosing_function(source, line):
    """Name of the innermost def containing `line`, as CPython reports it in
    frames (co_qualname on 3.11+, co_name before; both end in the name)."""
    tree = ast.parse(source)
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.lineno <= line <= getattr(node, "end_lineno", node.lineno):
                if best is None or node.lineno > best.lineno:
                    best = node
    return best.name if best else "<module>"


def frame_matches(frame, path, line, func):
    return (os.path.realpath(frame.get("file") or "") == os.path.realpath(path)
            and frame.get("line") == line
            and (frame.get("function") or "").split(".")[-1] == func)


def cmd_script(interp, script, mode, extra):
    if not interp or not os.access(interp, os.X_OK):
        print(f"skip: interpreter {interp or '(none)'} not present")
        return SKIP
    cli = env_path("TSEAL_PY_CLI")
    simcuda = env_path("TSEAL_PY_SIMCUDA_DIR")
    expects, args, script_env, sites, lines = parse_script(script, mode)
    args += extra
    n_steps = 30
    if "--steps" in args:
        n_steps = int(args[args.index("--steps") + 1])

    env = base_env()
    env.update(script_env)
    env["TOYTORCH_CUDART"] = os.path.join(simcuda, "libcudart.so.13")
    tmp = tempfile.mkdtemp(prefix="tseal-pypat-")
    prefix = os.path.join(tmp, "P")
    cmd = [cli, "run", "--output", prefix]
    if mode == "async":
        cmd.append("--tensors")
    cmd += ["--", interp, script] + args
    r = run(cmd, env, tmp)

    check = Checker(" ".join(sys.argv[1:]))
    check.true(f"exit status {r.returncode}", r.returncode == 0)
    check.true(f"the script did not run with the {mode} allocator",
               f"toytorch: allocator={mode} " in r.stdout)
    report, text = load_report(check, prefix)
    if report is None:
        return finish(check, prefix, text)

    growth = report.get("growth") or []
    want = int(expects["growth"][0])
    for g in growth:
        print("growth: " + describe(g))
    check.true(f"{len(growth)} growth entries, expected {want}", len(growth) == want)

    for g in growth:
        check.true(f"kind {g.get('kind')!r}, expected {KIND_OF_MODE[mode]!r}: {describe(g)}",
                   g.get("kind") == KIND_OF_MODE[mode])
        check.true(f"api {g.get('api')!r} is not one of {sorted(APIS_OF_MODE[mode])}: {describe(g)}",
                   g.get("api") in APIS_OF_MODE[mode])
        check.true(f"non-positive slope: {describe(g)}", g.get("bytes_per_step", 0) > 0)
        check_steps(check, g, n_steps)
        for name in expects.get("growth-site", []):
            if name not in sites:
                check.fail(f"no `# SITE: {name}` marker in {script}")
                continue
            line = sites[name]
            func = enclosing_function("\n".join(lines), line)
            check.true(f"python_frames lack {os.path.basename(script)}:{line} in {func}() "
                       f"(`# SITE: {name}`): {describe(g)}",
                       any(frame_matches(f, script, line, func) for f in g.get("python_frames") or []))

    hints = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("hint:")]
    for h in hints:
        print(h)
    for wanted in expects.get("hint", []):
        check.true(f"no hint line mentions {wanted!r}", any(wanted in h for h in hints))
    if want == 0:
        check.true("hints without growth", not hints)
    if "ooms" in expects:
        check.true("the report records no OOM", len(report.get("ooms") or []) > 0)
    return finish(check, prefix, text)


# --------------------------------------------------------------------------


def cmd_helper(interp, checker):
    if not interp or not os.access(interp, os.X_OK):
        print(f"skip: interpreter {interp or '(none)'} not present")
        return SKIP
    cli = env_path("TSEAL_PY_CLI")
    simcuda = env_path("TSEAL_PY_SIMCUDA_DIR")
    helper_dir = env_path("TSEAL_PY_HELPER_DIR")
    examples = env_path("TSEAL_PY_EXAMPLES_DIR")
    check = Checker(" ".join(sys.argv[1:]))
    tmp = tempfile.mkdtemp(prefix="tseal-pyhelper-")
    env = base_env()
    env["TOYTORCH_CUDART"] = os.path.join(simcuda, "libcudart.so.13")

    # Without the shim: importable from the helper directory, every call a no-op.
    plain = dict(env, PYTHONPATH=helper_dir)
    r = run([interp, checker, "absent", helper_dir, examples], plain, tmp)
    check.true(f"helper without the shim: exit status {r.returncode}", r.returncode == 0)

    # Under `torchseal run`: found through the PYTHONPATH the CLI sets.
    prefix = os.path.join(tmp, "P")
    r = run([cli, "run", "--output", prefix, "--", interp, checker, "present", helper_dir, examples], env, tmp)
    check.true(f"helper under torchseal run: exit status {r.returncode}", r.returncode == 0)
    dumps = sorted(glob.glob(prefix + ".[0-9]*.json"))
    check.true(f"torchseal.dump() should write one P.<n>.json, found {dumps}", len(dumps) == 1)
    for d in dumps:
        check.true(f"{d}: trigger is not 'api'", load_json(d).get("trigger") == "api")
    text = ""
    if os.path.exists(prefix + ".txt"):
        with open(prefix + ".txt") as f:
            text = f.read()
    return finish(check, prefix, text)


# --------------------------------------------------------------------------


def cmd_nvtx(binary, source):
    if not binary or not os.path.exists(binary):
        print(f"skip: {binary or 'nvtx_steps'} was not built (no nvtx3 headers?)")
        return SKIP
    cli = env_path("TSEAL_PY_CLI")
    simcuda = env_path("TSEAL_PY_SIMCUDA_DIR")
    with open(source) as f:
        lines = f.read().splitlines()
    env = base_env()
    want, site, sites = None, None, {}
    for no, line in enumerate(lines, 1):
        m = LEAK_SITE_RE.search(line)
        if m:
            sites[m.group(1)] = no
        m = GROWTH_CXX_RE.match(line)
        if m:
            want, site = int(m.group(1)), m.group(2)
        m = ENV_RE.match(line)
        if m:
            env[m.group(1)] = m.group(2)
    if want is None:
        raise Failed(f"{source} has no `// EXPECT-GROWTH: N` line")
    env["LD_LIBRARY_PATH"] = simcuda + (":" + os.environ["LD_LIBRARY_PATH"]
                                        if os.environ.get("LD_LIBRARY_PATH") else "")
    tmp = tempfile.mkdtemp(prefix="tseal-nvtx-")
    prefix = os.path.join(tmp, "P")
    r = run([cli, "run", "--output", prefix, "--", binary], env, tmp)
    check = Checker(" ".join(sys.argv[1:]))
    check.true(f"exit status {r.returncode}", r.returncode == 0)
    report, text = load_report(check, prefix)
    if report is None:
        return finish(check, prefix, text)
    growth = report.get("growth") or []
    for g in growth:
        print("growth: " + describe(g))
    check.true(f"{len(growth)} growth entries, expected {want}", len(growth) == want)
    for g in growth:
        check_steps(check, g, 30)
        top = (g.get("frames") or [{}])[0]
        if site:
            check.true(f"no `// LEAK-SITE: {site}` marker in {source}", site in sites)
            check.true(f"frames[0] is {top.get('file')}:{top.get('line')}, expected "
                       f"{os.path.basename(source)}:{sites.get(site)}: {describe(g)}",
                       os.path.basename(top.get("file") or "") == os.path.basename(source)
                       and top.get("line") == sites.get(site))
        check.true(f"expected a device cudaMalloc site: {describe(g)}",
                   g.get("kind") == "device" and g.get("api") == "cudaMalloc")
    return finish(check, prefix, text)


def cmd_demo(name, interp, demo, build, example):
    """The Python demo as a user runs it, on one interpreter: the report it
    prints names the line marked `# SITE:` for its mode (async: the demo
    runs `torchseal run --tensors`) and the hint the example expects."""
    if not interp:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "python_frames"))
        import find_pythons
        why = next((w for n, _, w in find_pythons.found() if n == name), "not listed")
        print(f"SKIP: Python demo on {name}: the interpreter is absent: {why}")
        return SKIP
    expects, _, _, sites, _ = parse_script(example, "async")
    tmp = tempfile.mkdtemp(prefix="tseal-demo-")
    env = base_env()
    env["TORCHSEAL_BUILD_DIR"] = build
    r = run(["bash", demo, "--python", interp, "--no-build", "--out", tmp], env, tmp)
    check = Checker(" ".join(sys.argv[1:]))
    check.true(f"scripts/demo exit status {r.returncode}", r.returncode == 0)
    for site in expects.get("growth-site", []):
        where = f"{os.path.basename(example)}:{sites.get(site)}"
        check.true(f"the demo's report does not show the leaking line {where} (`# SITE: {site}`)",
                   site in sites and any(where in ln for ln in r.stdout.splitlines()))
    hints = [ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith("hint:")]
    for wanted in expects.get("hint", []):
        check.true(f"no hint line of the demo's report mentions {wanted!r}",
                   any(wanted in h for h in hints))
    return check.finish()


def main(argv):
    try:
        if len(argv) >= 4 and argv[0] == "script":
            return cmd_script(argv[1], argv[2], argv[3], argv[4:])
        if len(argv) == 3 and argv[0] == "helper":
            return cmd_helper(argv[1], argv[2])
        if len(argv) == 3 and argv[0] == "nvtx":
            return cmd_nvtx(argv[1], argv[2])
        if len(argv) == 6 and argv[0] == "demo":
            return cmd_demo(*argv[1:])
    except Failed as e:
        print("FAIL: %s" % e)
        return 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
