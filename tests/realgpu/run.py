#!/usr/bin/env python3
"""scripts/real-gpu, tested on simcuda standing in for the machine's CUDA
stack (--cuda-libs) and this directory's fake compute-sanitizer.

    run.py SCENARIO

    parser        the compute-sanitizer parser on output in NVIDIA's real
                  layouts (before 2025 and 2025 on)
    agree         examples + fake sanitizer (2025 layout, found on PATH): all agree
    agree-2024    the same with the older layout, sanitizer named by --sanitizer
    disagree      the fake sanitizer misses an allocation: the row says NO, exit 1
    no-sanitizer  --sanitizer none: the column says so, exit 0
    no-gpu        no driver in --cuda-libs, and the machine's own stack when it
                  has no driver: one line, exit 77
    wrong-stack   a driver but no runtime: the examples would load simcuda's
                  runtime through their RUNPATH; refused, exit 1
    programs      --programs DIR (binaries built elsewhere): bare, both backends
                  and the fake sanitizer agree; a dropped allocation says NO
    torch         one real-torch pattern through the script (suite torch)

Paths come from meson (tests/realgpu/meson.build): TSEAL_RG_SOURCE,
TSEAL_RG_BUILD, TSEAL_RG_SHIM, TSEAL_RG_SIMCUDA, TSEAL_RG_NVML. Exit 0 pass, 1 fail, 77 skip.
"""

import ctypes
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from harness import Checker, clean_env, interpreter_env, need, run  # noqa: E402

SOURCE = need("TSEAL_RG_SOURCE", what="source root")
BUILD = need("TSEAL_RG_BUILD", what="build directory")
SHIM = need("TSEAL_RG_SHIM", what="shim (libtorchseal.so)")
SIMCUDA = need("TSEAL_RG_SIMCUDA", what="simcuda")
NVML = need("TSEAL_RG_NVML", what="simcuda's NVML")
SCRIPT = os.path.join(SOURCE, "scripts", "real-gpu")
FAKE = os.path.join(HERE, "compute-sanitizer")
sys.path.insert(0, os.path.join(SOURCE, "scripts"))
from realgpu import sanitizer  # noqa: E402
from realgpu.examples import load_module  # noqa: E402

# The integration runner's reading of the examples' EXPECT lines.
INTEGRATION = load_module("tseal_integration",
                          os.path.join(SOURCE, "tests", "integration", "run.py"))


def expected_cell(name):
    """What the table must show for an example, from its own EXPECT lines."""
    exp = INTEGRATION.Expectations(os.path.join(SOURCE, "examples", name + ".cpp"))
    if not exp.leaks:
        return "none"
    n = len(exp.leaks)
    return "%d site%s, %d B in %d" % (n, "" if n == 1 else "s", exp.leaked_bytes,
                                       exp.leaked_allocations)


def real_gpu(args, **env_extra):
    env = interpreter_env(clean_env())
    env.update(env_extra)
    env.setdefault("FAKE_SANITIZER_SHIM", SHIM)
    stack = "%s:%s" % (SIMCUDA, NVML)
    argv = [sys.executable, SCRIPT, "--build", BUILD] + (
        args if "--cuda-libs" in args else ["--cuda-libs", stack] + args)
    return run(argv, env, timeout=1200)


def rows(stdout):
    """{program: [cells]} from the table the script printed."""
    lines = stdout.splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if l.startswith("program "))
    except StopIteration:
        return {}
    cuts = [m.start() for m in re.finditer(r"-+", lines[start + 1])]
    found = {}
    for line in lines[start + 2:]:
        if not line.strip():
            break
        cells = [line[a:b].strip() for a, b in zip(cuts, cuts[1:] + [None])]
        found[cells[0]] = cells
    return found


def check_table(check, result, names, sanitizer_cell=None, agree="yes"):
    table = rows(result.stdout)
    for name in names:
        row = table.get(name)
        if not check.true("a table row for %s" % name, row, result.describe()):
            continue
        want = expected_cell(name)
        check.eq("%s: expected column" % name, row[1], want)
        check.eq("%s: torchseal column" % name, row[2], want)
        check.eq("%s: compute-sanitizer column" % name, row[3],
                 want if sanitizer_cell is None else sanitizer_cell)
        check.eq("%s: agree? column" % name, row[4], agree)


def check_parse(check, label, text, want):
    """`want`: [(bytes, address, frames)] per leak, in order; the summary
    line must match them."""
    p = sanitizer.parse(text)
    check.eq("%s: leaks" % label, [(l.bytes, l.address, l.frames) for l in p.leaks], want)
    check.eq("%s: summary" % label, p.summary,
             (sum(w[0] for w in want), len(want)))
    check.eq("%s: complete" % label, p.problem(), None)


def scenario_parser(check):
    # Layout before 2025 (CUDA 12.x), with program output in between, a frame
    # without symbol, a frame with line information, a second leak, then the
    # summaries.
    old = "\n".join([
        "========= COMPUTE-SANITIZER",
        "Using device 0",
        "========= Leaked 2097152 bytes at 0x7fb002000000",
        "=========     Saved host backtrace up to driver entry point at allocation time",
        "=========     Host Frame: [0x28e3ce]",
        "=========                in /usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "=========     Host Frame:cudaMalloc [0x55a37]",
        "=========                in /usr/local/cuda/lib64/libcudart.so.13",
        "=========     Host Frame:../examples/leak.cpp:41:grow(unsigned long) [0x1a2b]",
        "=========                in /tmp/leak",
        "=========     Host Frame:main [0x1c00]",
        "=========                in /tmp/leak",
        "=========",
        "========= Leaked 1,024 bytes at 0x7fb002200000",
        "=========     Saved host backtrace up to driver entry point at allocation time",
        "=========     Host Frame:Catch::RunContext::invokeActiveTestCase() [0x2ce42]",
        "=========                in /tmp/leak",
        "=========",
        "========= LEAK SUMMARY: 2098176 bytes leaked in 2 allocations",
        "========= ERROR SUMMARY: 2 errors"])
    check_parse(check, "old layout", old, [
        (2097152, 0x7fb002000000, [
            ("", None, None, "/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
            ("cudaMalloc", None, None, "/usr/local/cuda/lib64/libcudart.so.13"),
            ("grow(unsigned long)", "../examples/leak.cpp", 41, "/tmp/leak"),
            ("main", None, None, "/tmp/leak")]),
        # C++ names are not file:line
        (1024, 0x7fb002200000, [("Catch::RunContext::invokeActiveTestCase()", None, None,
                                 "/tmp/leak")])])

    new = "\n".join([
        "========= COMPUTE-SANITIZER",
        "========= Leaked 1,048,576 bytes at 0x7f566f200000",
        "=========     Saved host backtrace up to driver entry point at allocation time",
        "=========         Host Frame: cuMemAlloc_v2 [0x2da4eb] in libcuda.so.1",
        "=========         Host Frame: leak_device_buffer() in /src/examples/planted_leaks.cpp:47"
        " [0x8a81] in planted_leaks",
        "=========         Host Frame: main in planted_leaks.cpp:80 [0x8b00] in planted_leaks",
        "=========",
        "========= LEAK SUMMARY: 1048576 bytes leaked in 1 allocations",
        "========= ERROR SUMMARY: 1 error"])
    check_parse(check, "2025 layout", new, [
        (1048576, 0x7f566f200000, [
            ("cuMemAlloc_v2", None, None, "libcuda.so.1"),
            ("leak_device_buffer()", "/src/examples/planted_leaks.cpp", 47, "planted_leaks"),
            ("main", "planted_leaks.cpp", 80, "planted_leaks")])])

    # A truncated list (print limit), a run that never started or never
    # finished are not read as "no leaks"; a run without LEAK SUMMARY is
    # complete when ERROR SUMMARY ends it, and an API error report right after
    # a leak block adds no frames to it.
    lines = new.splitlines()
    cut = sanitizer.parse("\n".join(lines[:2] + [
        "========= LEAK SUMMARY: 2097152 bytes leaked in 2 allocations", lines[-1]]))
    check.true("truncated output is a problem", cut.problem() and "differ" in cut.problem(),
               cut.problem())
    check.true("no banner is a problem", sanitizer.parse("a.out: not found").problem())
    check.true("no ERROR SUMMARY is a problem",
               "did not finish" in (sanitizer.parse("\n".join(lines[:-1])).problem() or ""))
    bare = sanitizer.parse("\n".join(lines[:5] + [
        "========= Program hit cudaErrorInvalidValue (error 1) on CUDA API call to cudaFree.",
        "=========     Saved host backtrace up to driver entry point at error",
        "=========         Host Frame: main in planted_leaks.cpp:90 [0x8c00] in planted_leaks",
        lines[-1]]))
    check.eq("no LEAK SUMMARY, API error after the leak: complete", bare.problem(), None)
    check.eq("the API error's frame is not the leak's", len(bare.leaks[0].frames), 2)


def scenario_agree(check, layout):
    names = ["planted_leaks", "leak_in_loop", "pinned_managed_leaks"] if layout != "2024" \
        else ["planted_leaks", "device_reset", "no_leaks"]
    env = {"PATH": HERE + os.pathsep + os.environ.get("PATH", "")}
    args = ["--no-torch", "--only", ",".join(names)]
    if layout == "2024":
        env = {"FAKE_SANITIZER_LAYOUT": "2024"}
        args += ["--sanitizer", FAKE]
    result = real_gpu(args, **env)
    check.note("run", result.describe())
    check.eq("exit status", result.returncode, 0, result.describe())
    check.true("the first line names the stack and the sanitizer found",
               result.stdout.startswith("real-gpu: driver %s" % os.path.join(SIMCUDA, "libcuda.so.1"))
               and ("compute-sanitizer: " + FAKE) in result.stdout.splitlines()[0],
               result.stdout.splitlines()[:1])
    # simcuda's driver starts one thread at cuInit and one for the context
    # (simcuda/README.md); on a GPU the line records the real driver's count.
    check.true("the first line counts the driver's threads",
               "driver threads +1 at cuInit, +2 with a context" in result.stdout.splitlines()[0],
               result.stdout.splitlines()[:1])
    check_table(check, result, names)
    check.true("the last line says all agree",
               result.stdout.rstrip().endswith("%d program(s), all agree" % len(names)))


def scenario_disagree(check):
    result = real_gpu(["--no-torch", "--only", "leak_in_loop", "--sanitizer", FAKE],
                      FAKE_SANITIZER_DROP="1")
    check.note("run", result.describe())
    check.eq("exit status", result.returncode, 1, result.describe())
    check_table(check, result, [], None)
    row = rows(result.stdout).get("leak_in_loop") or [""] * 5
    check.eq("torchseal column", row[2], expected_cell("leak_in_loop"))
    check.eq("compute-sanitizer column (one allocation fewer)", row[3],
             "1 site, 36864 B in 9")
    check.eq("agree? column", row[4], "NO")
    check.true("the difference is named by site",
               re.search(r"leak_in_loop\.cpp:\d+: expected 40960 B in 10, compute-sanitizer "
                         r"reports 36864 B in 9", result.stdout), result.stdout[-1500:])


def scenario_no_sanitizer(check):
    result = real_gpu(["--no-torch", "--only", "no_leaks", "--sanitizer", "none"])
    check.note("run", result.describe())
    check.eq("exit status", result.returncode, 0, result.describe())
    check_table(check, result, ["no_leaks"], sanitizer_cell="not installed")


def machine_has_driver():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def scenario_no_gpu(check):
    with tempfile.TemporaryDirectory(prefix="tseal-realgpu-") as empty:
        cases = [["--cuda-libs", empty]]
        if not machine_has_driver():
            cases.append(["--cuda-libs", ""])  # this machine's own stack: no driver
        for args in cases:
            result = real_gpu(args + ["--no-torch"])
            label = "--cuda-libs %s" % (args[1] or "(machine's own)")
            check.note(label, result.describe())
            check.eq("%s: exit status" % label, result.returncode, 77, result.describe())
            lines = result.stdout.splitlines()
            check.eq("%s: one line of output" % label, len(lines), 1, lines)
            check.true("%s: it says there is no GPU" % label,
                       lines and lines[0].startswith("real-gpu: no GPU: no CUDA driver"), lines)
            check.eq("%s: nothing on stderr" % label, result.stderr, "")


def scenario_wrong_stack(check):
    """A driver but no runtime on the stack: the examples' RUNPATH would give
    them simcuda's runtime, which the script refuses."""
    with tempfile.TemporaryDirectory(prefix="tseal-realgpu-") as driver_only:
        os.symlink(os.path.join(SIMCUDA, "libcuda.so.1"), os.path.join(driver_only, "libcuda.so.1"))
        result = real_gpu(["--cuda-libs", driver_only, "--no-torch", "--only", "no_leaks",
                           "--sanitizer", "none"], CUDA_ROOT=os.path.join(driver_only, "none"))
    check.note("run", result.describe())
    check.eq("exit status", result.returncode, 1, result.describe())
    check.true("it names simcuda's runtime and the RUNPATH",
               re.search(r"would load simcuda's runtime \(\S+/libcudart\.so\.13\) through its "
                         r"RUNPATH", result.stderr), result.stderr)
    check.eq("no table", rows(result.stdout), {})


def scenario_torch(check):
    result = real_gpu(["--only", "accumulate_loss-segments", "--sanitizer", "none"],
                      TORCHSEAL_TORCH_ENV=os.environ.get("TORCHSEAL_TORCH_ENV", ""))
    check.note("run", result.describe())
    if "torch does not see the GPU" in result.stderr or "SKIP torch tier" in result.stderr:
        print("SKIP: torch cannot run here:\n" + result.stderr[-2000:])
        sys.exit(77)
    check.eq("exit status", result.returncode, 0, result.describe())
    row = rows(result.stdout).get("torch accumulate_loss-segments") or [""] * 5
    check.eq("torch row: torchseal column", row[2], "as expected")
    check.eq("torch row: agree? column", row[4], "yes")


def scenario_programs(check):
    want = {  # program: (torchseal cell, sanitizer cell), from their EXPECT lines
        "graph_memory_nodes": ("exit 0, 0 B in 0, 0 invalid frees", "exit 0, 0 B in 0"),
        "graph_footprint": ("exit 0, 75497472 B in 5, 0 invalid frees",
                            "exit 0, 75497472 B in 5"),
        "vmm_mapped_leak": ("exit 0, 2097152 B in 1, 0 invalid frees", "exit 0, 2097152 B in 1"),
    }
    with tempfile.TemporaryDirectory(prefix="tseal-programs-") as tmp:
        for name in want:
            os.symlink(os.path.join(BUILD, "examples", name), os.path.join(tmp, name))
        with open(os.path.join(tmp, "README"), "w") as f:
            f.write("not a program: not executable\n")
        result = real_gpu(["--programs", tmp, "--sanitizer", FAKE])
        check.note("run", result.describe())
        check.eq("exit status", result.returncode, 0, result.describe())
        table = rows(result.stdout)
        check.eq("one row per executable", sorted(table), sorted(want))
        for name, (ts, cs) in want.items():
            row = table.get(name) or [""] * 6
            check.eq("%s: bare" % name, row[1], "exit 0")
            check.eq("%s: hooks" % name, row[2], ts)
            check.eq("%s: cupti" % name, row[3], ts)
            check.eq("%s: compute-sanitizer" % name, row[4], cs)
            check.eq("%s: agree?" % name, row[5], "yes")
        dropped = real_gpu(["--programs", tmp, "--sanitizer", FAKE], FAKE_SANITIZER_DROP="1")
        check.note("run with one allocation dropped", dropped.describe())
        check.eq("exit status with a disagreement", dropped.returncode, 1, dropped.describe())
        row = rows(dropped.stdout).get("graph_footprint") or [""] * 6
        # The fake leaves out the one 64 MiB allocation of the largest leak.
        check.eq("graph_footprint: compute-sanitizer misses one", row[4],
                 "exit 0, 8388608 B in 4")
        check.eq("graph_footprint: agree?", row[5], "NO")


SCENARIOS = {
    "programs": scenario_programs,
    "parser": scenario_parser,
    "agree": lambda c: scenario_agree(c, "2025"),
    "agree-2024": lambda c: scenario_agree(c, "2024"),
    "disagree": scenario_disagree,
    "no-sanitizer": scenario_no_sanitizer,
    "no-gpu": scenario_no_gpu,
    "wrong-stack": scenario_wrong_stack,
    "torch": scenario_torch,
}


def main(argv):
    if len(argv) != 2 or argv[1] not in SCENARIOS:
        print(__doc__)
        return 2
    check = Checker("real-gpu " + argv[1])
    SCENARIOS[argv[1]](check)
    return check.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
