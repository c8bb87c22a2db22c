#!/usr/bin/env python3
"""Golden reports: the whole P.txt / P.json of a few examples, compared exactly.

    run.py CASE            run CASE, compare with tests/golden/CASE.*
    run.py --update CASE   run CASE, rewrite its golden files

(TORCHSEAL_UPDATE_GOLDEN=1 does the same as --update; scripts/update-golden
regenerates every case.) The integration tests check what each example
promises; these files pin everything else a report says (order, wording,
sizes, frames, hints), so any change of output shows up as a diff to review.

Each case writes up to three files next to this script:

    CASE.txt          P.txt written by the shim at exit
    CASE.json         P.json written by the shim at exit
    CASE.replay.txt   `torchseal report P.tseal` (the replay path), if listed

Only what varies between runs or between machines of the same kind is
normalised (the rules are listed above normalise_text). Sizes, counts, kinds,
APIs, the project's own frames, hints and ordering stay exact.

Paths come from meson's environment: TSEAL_GOLDEN_CLI, TSEAL_GOLDEN_SIMCUDA_DIR,
TSEAL_GOLDEN_SOURCE_ROOT, TSEAL_GOLDEN_BIN_<name>. Exit status: 0 pass,
1 fail, 77 skip. Python 3 standard library only.
"""

import difflib
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Failed, clean_env, need, run, with_simcuda  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> how to run it. `binary` is a TSEAL_GOLDEN_BIN_ key, `python` a script
# under examples/python; `cli` extra `torchseal run` flags; `env` the
# example's own ENV lines (repeated here: the golden output depends on them).
CASES = {
    "planted_leaks": {"binary": "planted_leaks", "replay": True},
    "pinned_managed_leaks": {"binary": "pinned_managed_leaks"},
    "vmm_leaks": {"binary": "vmm_leaks"},
    "oom": {"binary": "oom", "env": {"SIMCUDA_MEMORY_BYTES": "67108864"}},
    "invalid_free": {"binary": "invalid_free"},
    "nvtx_steps": {"binary": "nvtx_steps", "env": {"TORCHSEAL_STEP_RANGE": "train_step"},
                   "replay": True},
    "accumulate_loss": {"python": "accumulate_loss.py", "cli": ["--tensors"]},
}


# --------------------------------------------------------------------------
# Normalisation: one rule per thing that differs between two runs, or
# between two machines of the same kind.
#
#   ==PID==, "pid": PID          process ids
#   0xADDR                       addresses (ASLR)
#   TIME, HOST, SECONDS          wall-clock times, host name, time spent in torchseal
#   <tmp> <src> <build> <python> the run's directory, the source and build trees,
#                                the interpreter (its version: PYVER)
#   ... system frames            a run of native frames in modules outside the
#                                source and build trees (libc, libffi, the Python
#                                interpreter): their files, lines and count
#                                depend on how the system was built
#
# Everything else (sizes, counts, kinds, APIs, frames in the project's own
# modules with functions, files and lines, ordering, hints) is exact.

HEX_RE = re.compile(r"0x[0-9a-fA-F]+")
TEXT_FRAME_RE = re.compile(r"^(\s*)#\d+ 0xADDR in .* \(([^()]*)\)$")
SYSTEM_FRAMES = "... system frames"


def normalise_text(text, ctx):
    text = replace_paths(text, ctx)
    text = re.sub(r"==\d+==", "==PID==", text)
    text = HEX_RE.sub("0xADDR", text)
    out = []
    for line in text.splitlines(True):
        m = TEXT_FRAME_RE.match(line.rstrip("\n"))
        if m and is_system_module(m.group(2)):
            marker = m.group(1) + SYSTEM_FRAMES + "\n"
            if not out or out[-1] != marker:
                out.append(marker)
            continue
        out.append(line)
    return "".join(out)


# JSON keys whose values vary between runs (matched by key name anywhere).
VOLATILE_KEYS = {
    "pid": "PID", "hostname": "HOST", "start_time": "TIME", "end_time": "TIME",
    "seconds_in_torchseal": "SECONDS", "address": "0xADDR", "python": "PYVER",
}


def normalise_json(value, ctx, key=None):
    if key in VOLATILE_KEYS and isinstance(value, (str, int, float)) \
            and not isinstance(value, bool):
        return VOLATILE_KEYS[key]
    if key == "frames" and isinstance(value, list):
        return collapse_system_frames([normalise_json(v, ctx) for v in value])
    if isinstance(value, dict):
        return {k: normalise_json(v, ctx, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise_json(v, ctx) for v in value]
    if isinstance(value, str):
        return HEX_RE.sub("0xADDR", replace_paths(value, ctx))
    return value


def collapse_system_frames(frames):
    out = []
    for f in frames:
        if isinstance(f, dict) and is_system_module(f.get("module")):
            if not out or out[-1] != SYSTEM_FRAMES:
                out.append(SYSTEM_FRAMES)
            continue
        out.append(f)
    return out


def is_system_module(module):
    """Called after replace_paths: the project's modules are <build>/..."""
    return isinstance(module, str) and (module.startswith("/") or module == "<python>")


def replace_paths(text, ctx):
    """The run's directory, the trees and the interpreter by name; longest
    first, realpath'd too, so a symlinked /tmp cannot leak through."""
    pairs = []
    for path, name in ((ctx["tmp"], "<tmp>"), (ctx["source_root"], "<src>"),
                       (ctx["build_root"], "<build>"), (sys.executable, "<python>")):
        for p in {path, os.path.realpath(path)}:
            pairs.append((p.rstrip("/"), name))
    for p, name in sorted(pairs, key=lambda x: -len(x[0])):
        text = text.replace(p, name)
    return text


# --------------------------------------------------------------------------


def produce(name, case):
    """Run the case; return {suffix: normalised text}."""
    cli = need("TSEAL_GOLDEN_CLI", "torchseal CLI")
    simcuda = need("TSEAL_GOLDEN_SIMCUDA_DIR", "simcuda")
    source_root = need("TSEAL_GOLDEN_SOURCE_ROOT", "source tree")
    env = with_simcuda(clean_env(), simcuda)
    env.update(case.get("env", {}))
    if "python" in case:
        script = os.path.join(source_root, "examples", "python", case["python"])
        env["TOYTORCH_CUDART"] = os.path.join(simcuda, "libcudart.so.13")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        target = [sys.executable, script]
    else:
        target = [need("TSEAL_GOLDEN_BIN_" + case["binary"], "example " + case["binary"])]
    out = {}
    with tempfile.TemporaryDirectory(prefix="tseal-golden-") as tmp:
        ctx = {"tmp": tmp, "source_root": source_root,
               "build_root": os.path.dirname(os.path.dirname(cli))}
        prefix = os.path.join(tmp, "P")
        result = run([cli, "run", "--output", prefix] + case.get("cli", []) + ["--"] + target,
                     env, cwd=tmp)
        if result.returncode != 0:
            raise Failed("the run failed\n" + result.describe())
        for suffix in ("txt", "json"):
            path = prefix + "." + suffix
            if not os.path.exists(path):
                raise Failed("no %s written\n%s" % (path, result.describe()))
            with open(path, encoding="utf-8") as f:
                raw = f.read()
            if suffix == "json":
                doc = normalise_json(json.loads(raw), ctx)
                out[suffix] = json.dumps(doc, indent=2, sort_keys=False) + "\n"
            else:
                out[suffix] = normalise_text(raw, ctx)
        if case.get("replay"):
            shown = run([cli, "report", prefix + ".tseal"], env, cwd=tmp)
            if shown.returncode != 0:
                raise Failed("`torchseal report P.tseal` failed\n" + shown.describe())
            out["replay.txt"] = normalise_text(shown.stdout, ctx)
    return out


def main(argv):
    update = os.environ.get("TORCHSEAL_UPDATE_GOLDEN") == "1"
    if argv and argv[0] == "--update":
        update, argv = True, argv[1:]
    if len(argv) != 1 or argv[0] not in CASES:
        print(__doc__)
        return 2
    name = argv[0]
    try:
        produced = produce(name, CASES[name])
    except Failed as e:
        print("FAIL: %s" % e)
        return 1
    failures = 0
    for suffix, text in produced.items():
        golden = os.path.join(HERE, "%s.%s" % (name, suffix))
        if update:
            with open(golden, "w", encoding="utf-8") as f:
                f.write(text)
            print("wrote %s" % golden)
            continue
        try:
            with open(golden, encoding="utf-8") as f:
                want = f.read()
        except OSError:
            want = ""
        if text == want:
            print("PASS: %s.%s" % (name, suffix))
            continue
        failures += 1
        print("FAIL: %s.%s differs from the golden file (- golden, + this run):" % (name, suffix))
        sys.stdout.writelines(difflib.unified_diff(
            want.splitlines(True), text.splitlines(True),
            "tests/golden/%s.%s" % (name, suffix), "this run"))
    if failures:
        print("\nIf the change is intended, regenerate and review the diff:\n"
              "    scripts/update-golden %s   (or TORCHSEAL_UPDATE_GOLDEN=1 meson test "
              "golden_%s)" % (name, name))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
