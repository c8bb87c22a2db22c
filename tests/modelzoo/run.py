#!/usr/bin/env python3
"""The model-zoo tier: real models (torchvision, Hugging Face transformers)
on simcuda's CUDA stack, math libraries included, under torchseal.

    run.py PROGRAM-MODE      PROGRAM in PROGRAMS, MODE in segments, tensors, expandable
    run.py replay            the in-process report and `torchseal report P.tseal` agree,
                             library_held included; TORCHSEAL_LIBRARY_HELD=off folds it back

The torch tier's plumbing (tests/torch/run.py: the environment, simgpu, the
skips) is reused; paths come from the same TSEAL_TORCH_* variables. Exit 0
pass, 1 fail, 77 skip (with a loud reason).
"""
import ast
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
sys.path.insert(0, os.path.join(HERE, ".."))
import harness  # noqa: E402
import run as torch_tier  # noqa: E402  (tests/torch/run.py)

PROGRAMS_DIR = os.path.join(torch_tier.SRC, "examples", "python", "modelzoo")
CLI = torch_tier.CLI
CHECK = harness.Checker("modelzoo " + " ".join(sys.argv[1:]), verbose=True)
torch_tier.CHECK = CHECK  # its helpers report into this run's checker

# PROGRAM: the functions a leaky twin's growth must point into (its Python
# frames), and the CUDA libraries whose handle memory its fixed twin must
# show as library_held in every mode (cuDNN's pinned buffer is not device
# memory, so segments mode shows it too; the device workspaces are cache
# there).
PROGRAMS = {
    "resnet18": {"funcs": ["train"], "libraries": {"cuDNN"}},
    "vit": {"funcs": ["train", "collect"], "libraries": {"cuDNN"}},
    "gpt2": {"funcs": ["train"], "libraries": set()},
    "bert": {"funcs": ["train"], "libraries": set()},
    "dataloader": {"funcs": ["train"], "libraries": set()},
}
# Tensors mode: every cuBLAS handle's own workspaces are library_held.
TENSORS_LIBRARIES = {"cuBLAS"}
MODES = ("segments", "tensors", "expandable")


def function_ranges(path):
    tree = ast.parse(open(path).read())
    return {n.name: (n.lineno, n.end_lineno) for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef)}


def lines_in(entry, script, ranges, funcs):
    return sorted({f["line"] for f in entry.get("python_frames") or []
                   if f.get("file") == script
                   for fn in funcs if fn in ranges and ranges[fn][0] <= f["line"] <= ranges[fn][1]})


def describe(e):
    pf = e.get("python_frames") or []
    top = ", ".join(f"{os.path.basename(f['file'])}:{f['line']}" for f in pf[:3])
    return (f"{e.get('library', '')} {e.get('api')} {e.get('kind')} "
            f"{e.get('bytes_per_step', e.get('bytes'))} B [{top}]")


def run_program(py, tmp, name, variant, mode, extra=None):
    out = os.path.join(tmp, f"{name}-{variant}-{mode}")
    args = [os.path.join(PROGRAMS_DIR, name + ".py")] + (["--fixed"] if variant == "fixed" else [])
    env = dict({"TORCHSEAL_EXIT_CODE": "23"}, **(extra or {}))
    p = torch_tier.run(py, args, shim=True, mode=mode, output=out, extra=env, timeout=600)
    CHECK.true(f"{name} {variant}: no unsimulated CUDA call ({mode})",
               "not simulated" not in p.stdout,
               "\n".join(l for l in p.stdout.splitlines() if "not simulated" in l))
    report = None
    if CHECK.true(f"{name} {variant} wrote {out}.json ({mode})", os.path.exists(out + ".json")):
        report = torch_tier.load(out + ".json")
    return p, out, report


def libraries(report):
    return {e.get("library") for e in report.get("library_held") or []}


def scenario_program(name, mode):
    py = torch_tier.prerequisites()
    spec = PROGRAMS[name]
    script = os.path.join(PROGRAMS_DIR, name + ".py")
    ranges = function_ranges(script)
    with tempfile.TemporaryDirectory(prefix="tseal-zoo-") as tmp:
        p, out, r = run_program(py, tmp, name, "fixed", mode)
        CHECK.true(f"{name} fixed exits 0 under TORCHSEAL_EXIT_CODE=23 ({mode}), got "
                   f"{p.returncode}", p.returncode == 0)
        if r:
            CHECK.true(f"{name} fixed: nothing leaked ({mode}): "
                       f"{[describe(l) for l in (r.get('leaks') or [])[:5]]}",
                       not r.get("leaks") and r["summary"].get("leaked_bytes", 0) == 0)
            bad = [g for g in r.get("growth") or [] if lines_in(g, script, ranges, spec["funcs"])]
            CHECK.true(f"{name} fixed: no growth in its training loop ({mode})"
                       + (f": {[describe(g) for g in bad]}" if bad else ""), not bad)
            want = set(spec["libraries"]) | (TENSORS_LIBRARIES if mode == "tensors" else set())
            held = libraries(r)
            CHECK.true(f"{name} fixed: library_held names {sorted(want)} ({mode}), got "
                       f"{sorted(held)}", want <= held)
            total = sum(e.get("bytes", 0) for e in r.get("library_held") or [])
            CHECK.eq(f"{name} fixed: summary.library_held_bytes is library_held's total ({mode})",
                     r["summary"].get("library_held_bytes", 0), total)
            for e in r.get("library_held") or []:
                print(f"  library_held: {describe(e)}")
            # Memory by role at the exit scan (docs/roles.md): it adds up, and
            # its CUDA libraries are library_held's.
            roles = r.get("roles")
            if CHECK.true(f"{name} fixed: roles in P.json ({mode})", bool(roles)):
                print("  roles: " + ", ".join(f"{k} {v['bytes']}" for k, v in roles.items()))
                CHECK.eq(f"{name} fixed: the roles add up to the live total ({mode})",
                         sum(v["bytes"] for v in roles.values()), r["roles_scan"]["live_bytes"])
                lib = roles["library_held"]["bytes"]
                want_lib = r["summary"].get("library_held_bytes", 0)
                CHECK.true(f"{name} fixed: the library_held role {lib} is library_held's {want_lib} "
                           f"within 1% ({mode})", abs(lib - want_lib) <= want_lib / 100)
                mods = roles["parameters"].get("modules") or []
                CHECK.true(f"{name} fixed: parameters, if any, name a top-level module: {mods}",
                           roles["parameters"]["bytes"] == 0 or
                           (mods and mods[0]["module"] != "(no module)"))

        p, out, r = run_program(py, tmp, name, "leaky", mode)
        CHECK.true(f"{name} leaky ran ({mode}), got {p.returncode}", p.returncode in (0, 23))
        if r:
            flagged = [e for e in (r.get("growth") or []) + (r.get("leaks") or [])
                       if lines_in(e, script, ranges, spec["funcs"])]
            for g in r.get("growth") or []:
                print(f"  leaky growth: {describe(g)}")
            CHECK.true(f"{name} leaky: growth or a leak flagged in {spec['funcs']} of "
                       f"{name}.py ({mode})", bool(flagged),
                       f"growth: {[describe(g) for g in r.get('growth') or []]}; "
                       f"leaks: {[describe(l) for l in (r.get('leaks') or [])[:5]]}")
            if flagged:
                print(f"  flagged at {name}.py lines "
                      f"{sorted({l for e in flagged for l in lines_in(e, script, ranges, spec['funcs'])})}")
    torch_tier.done()


def verdict(report):
    def entries(key):
        return sorted((x.get("library"), x.get("api"), x.get("kind"), x.get("bytes"),
                       x.get("allocations"),
                       tuple((f.get("file"), f.get("line")) for f in x.get("python_frames") or []))
                      for x in report.get(key) or [])
    s = report.get("summary") or {}
    return {k: entries(k) for k in ("leaks", "library_held")} | {
        k: s.get(k) for k in ("leaked_bytes", "library_held_bytes", "cached_bytes")}


def report_of(tseal, extra=None):
    env = dict(os.environ, **(extra or {}))
    e = harness.run([CLI, "report", tseal, "--format", "json"], env)
    CHECK.true(f"torchseal report {os.path.basename(tseal)} ran {extra or ''}", e.returncode == 0,
               e.stderr)
    return json.loads(e.stdout) if e.returncode == 0 else {}


def scenario_replay():
    """The same analysis in the process and from its history: library_held
    (cuBLAS and cuDNN handles in tensors mode) is identical, and
    TORCHSEAL_LIBRARY_HELD=off folds it back into leaks, in the process and in
    `torchseal report`."""
    py = torch_tier.prerequisites()
    with tempfile.TemporaryDirectory(prefix="tseal-zoo-") as tmp:
        p, out, r = run_program(py, tmp, "resnet18", "fixed", "tensors")
        if r:
            live, replay = verdict(r), verdict(report_of(out + ".tseal"))
            for k in live:
                CHECK.true(f"{k}: in-process {live[k]} == replayed {replay.get(k)}",
                           live[k] == replay.get(k))
            CHECK.true("the report has library_held entries", bool(live["library_held"]))
            off = report_of(out + ".tseal", {"TORCHSEAL_LIBRARY_HELD": "off"})
            CHECK.true("TORCHSEAL_LIBRARY_HELD=off: no library_held in the replay",
                       not off.get("library_held"))
            CHECK.eq("TORCHSEAL_LIBRARY_HELD=off: the library's bytes are leaks",
                     (off.get("summary") or {}).get("leaked_bytes"),
                     r["summary"].get("leaked_bytes", 0) + r["summary"].get("library_held_bytes", 0))
        p, out, r = run_program(py, tmp, "resnet18", "fixed", "segments",
                                extra={"TORCHSEAL_LIBRARY_HELD": "off"})
        CHECK.true(f"TORCHSEAL_LIBRARY_HELD=off in the process: cuDNN's pinned buffers fail "
                   f"--exit-code (exit {p.returncode})", p.returncode == 23)
        if r:
            CHECK.true("TORCHSEAL_LIBRARY_HELD=off in the process: they are leaks of "
                       "cuMemHostAlloc", any(l.get("api") == "cuMemHostAlloc"
                                             for l in r.get("leaks") or []))
    torch_tier.done()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    s = sys.argv[1]
    if s == "replay":
        scenario_replay()
    name, _, mode = s.rpartition("-")
    if name in PROGRAMS and mode in MODES:
        scenario_program(name, mode)
    sys.exit(f"unknown scenario {s!r}\n{__doc__}")


if __name__ == "__main__":
    main()
