#!/usr/bin/env python3
"""torchseal integration tests: run real programs under the shim, check reports.

One invocation runs one scenario (meson registers one test per scenario):

    run.py example NAME [--binary PATH] [--source FILE] [--backend hooks|cupti]
    run.py cli
    run.py inert
    run.py bad-config VAR VALUE
    run.py unwritable-output

Everything the tests need comes from the environment meson sets; nothing is
guessed. An empty value means "not built in this configuration":

    TSEAL_IT_SHIM         build/shim/libtorchseal.so
    TSEAL_IT_CLI          build/report/torchseal
    TSEAL_IT_SIMCUDA_DIR  directory holding simcuda's libcudart.so.13, libcuda.so.1, ...
    TSEAL_IT_EXAMPLES_SRC examples/ source directory (expectations live in the sources)
    TSEAL_IT_BIN_<name>   path of each example binary

What a report must contain is written next to each example program, as
`// EXPECT: ...` lines in its header and `// LEAK-SITE: name` markers on the
allocating lines (see examples/common.h). This script only interprets them.

Exit status: 0 pass, 1 fail, 77 skip (meson's convention).

Python 3 standard library only.
"""

import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import (Checker, Failed, clean_env, need, preload, run,  # noqa: E402,F401
                     skip, tail, with_simcuda)


# --------------------------------------------------------------------------
# Environment


def base_env(need_simcuda=True):
    """The caller's environment minus anything that would steer torchseal,
    with simcuda first on LD_LIBRARY_PATH. LD_PRELOAD holds only what a
    sanitizer run needs (harness.preload); the shim is added per run."""
    env = clean_env()
    if not need_simcuda:
        return env
    simcuda = need("TSEAL_IT_SIMCUDA_DIR", what="simcuda")
    for lib in ("libcudart.so.13", "libcuda.so.1"):
        if not os.path.exists(os.path.join(simcuda, lib)):
            skip("simcuda's %s is not built yet in %s" % (lib, simcuda))
    return with_simcuda(env, simcuda)


def as_int(value):
    """Addresses may be numbers or strings ("0x..."); normalise to int."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            try:
                return int(value, 16)
            except ValueError:
                return value
    return value


# --------------------------------------------------------------------------
# Expectations written in the example sources


SITE_RE = re.compile(r"//\s*(?:LEAK-|OOM-)?SITE:\s*([\w-]+)")
EXPECT_RE = re.compile(r"^\s*//\s*EXPECT:\s*(.*?)\s*$")
ENV_RE = re.compile(r"^\s*//\s*ENV:\s*([A-Za-z_][A-Za-z0-9_]*)=(.*?)\s*$")


class Expectations:
    def __init__(self, path):
        self.path = path
        self.basename = os.path.basename(path)
        self.sites = {}  # name -> line number
        self.counts = {}  # 'leaks'/'ooms'/'invalid_frees' -> int
        self.leaks = []
        self.ooms = []
        self.invalid_frees = []
        self.exit = 0
        self.events_from_stdout = False
        self.peak_from_stdout = False
        self.active_line = False
        self.env = {}
        self.static_runtime = False  # set for binaries linked with libcudart_static.a
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        for number, text in enumerate(lines, start=1):
            m = SITE_RE.search(text)
            if m and not EXPECT_RE.match(text):
                if m.group(1) in self.sites:
                    raise Failed("%s:%d: site %r marked twice" % (path, number, m.group(1)))
                self.sites[m.group(1)] = number
            m = ENV_RE.match(text)
            if m:
                self.env[m.group(1)] = m.group(2)
            m = EXPECT_RE.match(text)
            if m:
                self._directive(m.group(1), "%s:%d" % (path, number))
        if "leaks" not in self.counts:
            raise Failed("%s has no `// EXPECT: leaks N` line" % path)
        sites = sum(l.get("sites", 1) for l in self.leaks)
        if self.counts["leaks"] != sites and self.leaks:
            raise Failed("%s: `leaks %d` but %d site(s) in `leak` lines" % (
                path, self.counts["leaks"], sites))
        for item in self.leaks + self.ooms + self.invalid_frees:
            for key in ("site", "top_site"):
                if key in item and item[key] not in self.sites:
                    raise Failed("%s: no `// LEAK-SITE: %s` marker" % (path, item[key]))

    def _directive(self, text, where):
        words = text.split()
        head, rest = words[0], words[1:]
        if head in ("leaks", "ooms", "invalid_frees") and len(rest) == 1:
            self.counts[head] = int(rest[0])
        elif head in ("leak", "oom", "invalid_free"):
            fields = {}
            for w in rest:
                k, sep, v = w.partition("=")
                if not sep:
                    raise Failed("%s: bad field %r" % (where, w))
                fields[k] = int(v) if re.fullmatch(r"-?\d+", v) else v
            {"leak": self.leaks, "oom": self.ooms,
             "invalid_free": self.invalid_frees}[head].append(fields)
        elif head == "exit" and len(rest) == 1:
            self.exit = int(rest[0])
        elif head == "events-from-stdout":
            self.events_from_stdout = True
        elif head == "peak-from-stdout":
            self.peak_from_stdout = True
        elif head == "active-line":
            self.active_line = True
        else:
            raise Failed("%s: unknown EXPECT directive %r" % (where, text))

    @property
    def leaked_bytes(self):
        return sum(l["bytes"] for l in self.leaks)

    @property
    def leaked_allocations(self):
        return sum(l["allocations"] for l in self.leaks)


# --------------------------------------------------------------------------
# Report checks


def load_report(check, prefix, result):
    path = prefix + ".json"
    check.note("report", path)
    if not os.path.exists(path):
        raise Failed("no report written at %s\n%s\n  files in %s: %s" % (
            path, result.describe(), os.path.dirname(path),
            sorted(os.listdir(os.path.dirname(path)))))
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except ValueError as e:
        raise Failed("%s is not valid JSON: %s" % (path, e))


def frame0(entry):
    frames = entry.get("frames") or []
    return frames[0] if frames else {}


def frame_str(fr):
    if not fr:
        return "(no frames)"
    return "%s at %s:%s" % (fr.get("function"), fr.get("file"), fr.get("line"))


def short(entry):
    """One line describing a leak/oom/invalid-free entry, for messages."""
    keys = ("kind", "api", "bytes", "allocations", "requested_bytes", "address")
    fields = " ".join("%s=%s" % (k, entry[k]) for k in keys if k in entry)
    return "%s  frames[0]: %s" % (fields, frame_str(frame0(entry)))


def at_site(entry, exp, site):
    fr = frame0(entry)
    return (fr.get("line") == exp.sites[site]
            and isinstance(fr.get("file"), str) and fr["file"].endswith(exp.basename))


def check_frame(check, label, entry, exp, site, function=None):
    fr = frame0(entry)
    want_line = exp.sites[site]
    check.true("%s: frames[0].file ends with %s" % (label, exp.basename),
               isinstance(fr.get("file"), str) and fr["file"].endswith(exp.basename),
               "frames[0]: %s" % frame_str(fr))
    check.eq("%s: frames[0].line (the `SITE: %s` line)" % (label, site), fr.get("line"), want_line)
    # As compiled the path is ../examples/X.cpp; P.json gives it joined with
    # the compilation directory.
    path = fr.get("file") or ""
    check.true("%s: frames[0].file is absolute and normalised" % label,
               os.path.isabs(path) and os.path.normpath(path) == path,
               "frames[0]: %s" % frame_str(fr))
    if function is not None:
        check.true("%s: frames[0].function names %s" % (label, function),
                   isinstance(fr.get("function"), str)
                   and re.search(r"\b%s\b" % re.escape(function), fr["function"]),
                   "frames[0]: %s" % frame_str(fr))


def check_report(check, exp, report, result, pid, prefix):
    """Everything the example's EXPECT lines promise, plus the schema basics."""
    check.eq("format", report.get("format"), "torchseal-report")
    check.eq("version", report.get("version"), 1)
    check.eq("trigger", report.get("trigger"), "exit")
    proc = report.get("process") or {}
    if pid is not None:
        check.eq("process.pid", proc.get("pid"), pid)
    else:
        pid = proc.get("pid")

    leaks = report.get("leaks")
    ooms = report.get("ooms")
    frees = report.get("invalid_frees")
    summary = report.get("summary") or {}
    for key, value in (("leaks", leaks), ("ooms", ooms), ("invalid_frees", frees)):
        if not isinstance(value, list):
            check.fail("%s is a list" % key, type(value).__name__, "list")
    leaks, ooms, frees = leaks or [], ooms or [], frees or []

    # Leaks
    listing = "\n".join("leaks[%d]: %s" % (i, short(l)) for i, l in enumerate(leaks))
    check.eq("number of leak sites", len(leaks), exp.counts["leaks"], listing)
    sizes = [l.get("bytes", 0) for l in leaks]
    check.eq("leaks sorted by bytes, descending", sizes, sorted(sizes, reverse=True))
    shown_bytes = []  # what P.txt must mention
    for want in exp.leaks:
        label = "leak at site %r" % want["site"]
        found = [l for l in leaks if at_site(l, exp, want["site"])]
        if not found:
            check.fail("%s: no leak whose frames[0] is %s:%d" % (
                label, exp.basename, exp.sites[want["site"]]), detail=listing or "(no leaks)")
            continue
        # sites=N: one line reached by N different stacks (an OpenMP region
        # runs on the main thread and on the team's threads); the fields
        # hold for their sum.
        if len(found) != want.get("sites", 1):
            check.fail("%s: reported as %d separate sites (must be %d)" % (
                label, len(found), want.get("sites", 1)),
                detail="\n".join(short(l) for l in found))
        shown_bytes += [l.get("bytes") for l in found]
        leak = dict(found[0])
        for key in ("bytes", "allocations"):
            leak[key] = sum(l.get(key, 0) for l in found)
        for key in ("kind", "api", "bytes", "allocations"):
            # With a static runtime only the driver call is visible, so the
            # reported api may be the driver's (cuMemAlloc_v2 for cudaMalloc).
            if key == "api" and exp.static_runtime:
                continue
            if key in want:
                check.eq("%s: %s" % (label, key), leak.get(key), want[key], short(leak))
        check.eq("%s: detected_at" % label, leak.get("detected_at"),
                 want.get("detected_at", "exit"))
        check_frame(check, label, leak, exp, want["site"], want.get("function"))

    check.eq("summary.leaked_bytes", summary.get("leaked_bytes"), exp.leaked_bytes)
    check.eq("summary.leaked_allocations", summary.get("leaked_allocations"),
             exp.leaked_allocations)
    check.eq("summary.leak_sites", summary.get("leak_sites"), exp.counts["leaks"])

    # OOMs
    if "ooms" in exp.counts:
        check.eq("number of ooms", len(ooms), exp.counts["ooms"],
                 "\n".join(short(o) for o in ooms))
    for i, want in enumerate(exp.ooms):
        label = "ooms[%d]" % i
        if i >= len(ooms):
            check.fail("%s missing" % label)
            continue
        oom = ooms[i]
        for key in ("api", "requested_bytes"):
            if key == "api" and exp.static_runtime:
                continue
            if key in want:
                check.eq("%s.%s" % (label, key), oom.get(key), want[key], short(oom))
        if "site" in want:
            check_frame(check, label, oom, exp, want["site"])
        if "top_site" in want:
            tops = oom.get("top_sites") or []
            if not tops:
                check.fail("%s.top_sites is empty" % label)
            else:
                check_frame(check, label + ".top_sites[0]", tops[0], exp, want["top_site"])

    # Invalid frees
    if "invalid_frees" in exp.counts:
        check.eq("number of invalid_frees", len(frees), exp.counts["invalid_frees"],
                 "\n".join(short(f) for f in frees))
    for want in exp.invalid_frees:
        label = "invalid free at site %r" % want["site"]
        found = [f for f in frees if at_site(f, exp, want["site"])]
        if not found:
            check.fail("%s: no entry whose frames[0] is %s:%d" % (
                label, exp.basename, exp.sites[want["site"]]),
                detail="\n".join(short(f) for f in frees) or "(none)")
            continue
        if "api" in want:
            check.eq("%s: api" % label, found[0].get("api"), want["api"], short(found[0]))

    # Events: one per user-visible allocation or free call
    if exp.events_from_stdout:
        check.eq("summary.events == calls printed by the program",
                 summary.get("events"), result.value("calls", last=False))

    # The peak never contradicts the rest of the report (it once wrapped
    # around to 2^64 - 400000, and once sat below the bytes leaked).
    peak = summary.get("peak_bytes")
    check.true("summary.peak_bytes is a plausible byte count",
               isinstance(peak, int) and 0 <= peak < 2 ** 48, "peak_bytes=%r" % peak)
    if isinstance(peak, int):
        check.true("summary.peak_bytes >= summary.leaked_bytes",
                   peak >= (summary.get("leaked_bytes") or 0),
                   "peak_bytes=%r leaked_bytes=%r" % (peak, summary.get("leaked_bytes")))
    if exp.peak_from_stdout:
        check.eq("summary.peak_bytes == the peak printed by the program", peak,
                 result.value("peak", last=False))
    if exp.active_line:
        active = [l for l in result.ours() if re.match(r"torchseal: active in pid \d+ ", l)]
        check.eq("one `torchseal: active in pid` line on stderr", len(active), 1,
                 "\n".join(result.ours()))

    # P.txt, LeakSanitizer style
    txt_path = prefix + ".txt"
    if not os.path.exists(txt_path):
        check.fail("no text report at %s" % txt_path)
        return
    with open(txt_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    lines = [l for l in text.splitlines() if l.strip()]
    if not lines:
        check.fail("%s is empty" % txt_path)
        return
    check.true("P.txt first line starts with ==%s==torchseal: " % pid,
               lines[0].startswith("==%s==torchseal: " % pid), "first line: %r" % lines[0])
    check.eq("P.txt last line", lines[-1], summary_line(exp))
    for want in exp.leaks:
        if "function" in want:
            check.true("P.txt mentions %s" % want["function"], want["function"] in text)
    for nbytes in shown_bytes:
        check.true("P.txt mentions %d byte(s)" % nbytes, "%d byte(s)" % nbytes in text)


def summary_line(exp):
    return "SUMMARY: torchseal: %d byte(s) leaked in %d allocation(s)." % (
        exp.leaked_bytes, exp.leaked_allocations)


def check_exit(check, result, expected, why):
    if result.returncode != expected:
        check.fail("exit status %s" % why, result.returncode, expected, result.describe())


# --------------------------------------------------------------------------
# Scenarios


def example_paths(name, binary=None, source=None):
    binary = binary or need("TSEAL_IT_BIN_" + name, what="example " + name)
    if not os.path.exists(binary):
        skip("example binary not built: %s" % binary)
    src_dir = need("TSEAL_IT_EXAMPLES_SRC", what="examples source dir")
    source = source or os.path.join(src_dir, name + ".cpp")
    return binary, source


def scenario_example(args):
    """Run an example under LD_PRELOAD and check the report its source promises.

    Runs twice: without TORCHSEAL_EXIT_CODE (the program's own status) and with
    TORCHSEAL_EXIT_CODE=23 (23 iff the program leaks)."""
    name = args[0]
    opts = dict(zip(args[1::2], args[2::2]))
    binary, source = example_paths(opts.get("--source-name", name), opts.get("--binary"),
                                   opts.get("--source"))
    shim = need("TSEAL_IT_SHIM", what="shim (libtorchseal.so)")
    static = opts.get("--static") == "1"
    check = Checker("example " + name)
    exp = Expectations(source)
    exp.static_runtime = static
    check.note("binary", binary)
    check.note("source", source)

    with tempfile.TemporaryDirectory(prefix="tseal-it-") as tmp:
        for run_no, exit_code in enumerate((None, 23)):
            # The second run also checks the %p placeholder of TORCHSEAL_OUTPUT.
            template = os.path.join(tmp, "p0" if run_no == 0 else "p1-%p")
            env = base_env()
            env.update(exp.env)
            if "--backend" in opts:
                env["TORCHSEAL_BACKEND"] = opts["--backend"]
            env["LD_PRELOAD"] = preload(shim)
            env["TORCHSEAL_OUTPUT"] = template
            if exit_code is not None:
                env["TORCHSEAL_EXIT_CODE"] = str(exit_code)
            result = run([binary], env, cwd=tmp)
            prefix = template.replace("%p", str(result.pid))
            check.note("run %d" % run_no, "TORCHSEAL_EXIT_CODE=%s %s" % (
                exit_code, result.describe()))
            if exit_code is None:
                check_exit(check, result, exp.exit, "without TORCHSEAL_EXIT_CODE")
            else:
                want = exit_code if exp.counts["leaks"] else exp.exit
                check_exit(check, result, want, "with TORCHSEAL_EXIT_CODE=23 (%s)" % (
                    "leaks expected" if exp.counts["leaks"] else "no leaks expected"))
            if static and run_no == 0 and not os.path.exists(prefix + ".json"):
                skip("static cudart: no report written; the driver-level hooks or CUPTI "
                     "backend that see static-runtime allocations are not in the shim yet")
            report = load_report(check, prefix, result)
            if static and (report.get("summary") or {}).get("events", 0) == 0:
                skip("static cudart: the shim recorded no events; the driver-level hooks "
                     "or CUPTI backend are not in the shim yet")
            check_report(check, exp, report, result, result.pid, prefix)
            if opts.get("--replay") == "1" and run_no == 0:
                check_replay(check, report, prefix)
            if name == "vmm_mapped_leak" and run_no == 0:
                check_mapped_at(check, report, source)
            if name == "oom" and run_no == 0:
                check_oom_numbers(check, report, result)
            if name == "invalid_free" and run_no == 0:
                check_invalid_addresses(check, report, result)
            if check.failures:
                break  # the first run's failures are the interesting ones
    return check.finish()


def leak_set(report):
    return sorted((l["bytes"], l["allocations"], l["kind"], l["api"], l["detected_at"],
                   short(l)) for l in report.get("leaks", []))


def check_replay(check, report, prefix):
    """`torchseal report P.tseal` gives the in-process report's leak set and
    invalid frees: the shim and the replay apply the same live-state rules."""
    cli = need("TSEAL_IT_CLI", what="torchseal CLI")
    shown = run([cli, "report", prefix + ".tseal", "--format", "json"], base_env())
    check.note("replay", shown.describe())
    try:
        replayed = json.loads(shown.stdout)
    except ValueError:
        check.true("`torchseal report P.tseal --format json` prints JSON", False)
        return
    check.eq("replayed leak set", leak_set(replayed), leak_set(report))
    check.eq("replayed invalid frees", len(replayed.get("invalid_frees", [])),
             len(report.get("invalid_frees", [])))


def check_mapped_at(check, report, source):
    """A VMM leak that stayed mapped names its cuMemMap line too."""
    with open(source) as f:
        line = next(n for n, text in enumerate(f, 1) if "cuMemMap(" in text)
    leaks = report.get("leaks") or [{}]
    fr = frame0(leaks[0].get("mapped_at") or {})
    check.eq("mapped_at frames[0] line (the cuMemMap call)", fr.get("line"), line)
    check.eq("mapped_at frames[0] file", os.path.basename(fr.get("file") or ""),
             os.path.basename(source))


def check_oom_numbers(check, report, result):
    ooms = report.get("ooms") or []
    if not ooms:
        return
    live = result.value("live_bytes", last=False)
    check.eq("ooms[0].live_bytes (printed by the program)", ooms[0].get("live_bytes"), live)
    tops = ooms[0].get("top_sites") or []
    if tops:
        check.eq("ooms[0].top_sites[0].bytes", tops[0].get("bytes"), live)
        check.eq("ooms[0].top_sites[0].allocations", tops[0].get("allocations"),
                 result.value("chunks", last=False))


def check_invalid_addresses(check, report, result):
    printed = sorted(int(a, 16) for a in re.findall(r"^invalid=(?:0x)?([0-9a-fA-F]+)$",
                                                    result.stdout, re.M))
    seen = sorted(as_int(f.get("address")) for f in report.get("invalid_frees") or [])
    check.eq("invalid_frees addresses (printed by the program)",
             [hex(a) if isinstance(a, int) else a for a in seen], [hex(a) for a in printed])


def scenario_cli(args):
    """`torchseal run --output P --exit-code 23 -- planted_leaks`, then `torchseal report`."""
    cli = need("TSEAL_IT_CLI", what="torchseal CLI")
    need("TSEAL_IT_SHIM", what="shim (libtorchseal.so)")  # the CLI preloads it
    binary, source = example_paths("planted_leaks")
    exp = Expectations(source)
    check = Checker("cli")
    with tempfile.TemporaryDirectory(prefix="tseal-it-") as tmp:
        prefix = os.path.join(tmp, "cli")
        env = base_env()
        result = run([cli, "run", "--output", prefix, "--exit-code", "23", "--", binary],
                     env, cwd=tmp)
        check.note("run", result.describe())
        check_exit(check, result, 23, "of `torchseal run --exit-code 23` with leaks")
        report = load_report(check, prefix, result)
        check_report(check, exp, report, result, None, prefix)

        # Without --exit-code the program's own status passes through.
        prefix2 = os.path.join(tmp, "cli2")
        result2 = run([cli, "run", "--output", prefix2, "--", binary], env, cwd=tmp)
        check_exit(check, result2, exp.exit, "of `torchseal run` without --exit-code")
        check.true("second run wrote %s.json" % prefix2, os.path.exists(prefix2 + ".json"))

        # `torchseal report P.json` prints the text report.
        shown = run([cli, "report", prefix + ".json"], env, cwd=tmp)
        check.note("report", shown.describe())
        check.true("`torchseal report` was not killed by a signal", shown.returncode >= 0)
        lines = [l for l in shown.stdout.splitlines() if l.strip()]
        check.eq("`torchseal report` last line", lines[-1] if lines else None, summary_line(exp))
        for want in exp.leaks:
            check.true("`torchseal report` mentions %s" % want["function"],
                       want["function"] in shown.stdout)
            check.true("`torchseal report` mentions %s:%d" % (
                exp.basename, exp.sites[want["site"]]),
                "%s:%d" % (exp.basename, exp.sites[want["site"]]) in shown.stdout)
    return check.finish()


def scenario_inert(args):
    """Processes that never touch CUDA write nothing and say nothing."""
    shim = need("TSEAL_IT_SHIM", what="shim (libtorchseal.so)")
    check = Checker("inert")
    commands = [["sh", "-c", "true"],
                ["sh", "-c", "ls / >/dev/null && sh -c true"],
                [sys.executable, "-c", "pass"]]
    for with_output in (True, False):
        for argv in commands:
            with tempfile.TemporaryDirectory(prefix="tseal-it-") as tmp:
                env = base_env(need_simcuda=False)
                env["LD_PRELOAD"] = preload(shim)
                if with_output:
                    env["TORCHSEAL_OUTPUT"] = os.path.join(tmp, "x-%p")
                result = run(argv, env, cwd=tmp)
                label = "%s (%s)" % (" ".join(argv),
                                     "TORCHSEAL_OUTPUT=<tmp>/x-%p" if with_output
                                     else "default output in cwd")
                check_exit(check, result, 0, label)
                check.eq("%s: files written in <tmp>" % label, sorted(os.listdir(tmp)), [])
                noise = [l for l in result.stderr.splitlines() if "torchseal" in l]
                check.eq("%s: torchseal lines on stderr" % label, noise, [])
    return check.finish()


def scenario_bad_config(args):
    """A bad setting: exactly one `torchseal:` line naming it; the program is unharmed."""
    var, value = args[0], args[1]
    shim = need("TSEAL_IT_SHIM", what="shim (libtorchseal.so)")
    binary, source = example_paths("planted_leaks")
    exp = Expectations(source)
    check = Checker("bad-config %s=%s" % (var, value))
    with tempfile.TemporaryDirectory(prefix="tseal-it-") as tmp:
        env = base_env()
        env["LD_PRELOAD"] = preload(shim)
        env["TORCHSEAL_OUTPUT"] = os.path.join(tmp, "p")
        env[var] = value
        result = run([binary], env, cwd=tmp)
        check.note("run", result.describe())
        check_exit(check, result, exp.exit, "with %s=%s" % (var, value))
        check.true("the program ran to completion", "planted_leaks: done" in result.stdout)
        ours = [l for l in result.stderr.splitlines() if l.startswith("torchseal:")]
        naming = [l for l in ours if var in l]
        check.eq("stderr lines starting `torchseal:` that name %s" % var, len(naming), 1,
                 "torchseal lines: %r" % ours)
        check.eq("stderr lines mentioning %s" % var,
                 len([l for l in result.stderr.splitlines() if var in l]), 1)
    return check.finish()


def scenario_unwritable_output(args):
    """An output prefix that cannot be written: one message, the program is unharmed."""
    shim = need("TSEAL_IT_SHIM", what="shim (libtorchseal.so)")
    binary, source = example_paths("planted_leaks")
    exp = Expectations(source)
    check = Checker("unwritable-output")
    with tempfile.TemporaryDirectory(prefix="tseal-it-") as tmp:
        blocker = os.path.join(tmp, "not-a-dir")
        with open(blocker, "w") as f:
            f.write("a file where a directory should be\n")
        env = base_env()
        env["LD_PRELOAD"] = preload(shim)
        env["TORCHSEAL_OUTPUT"] = os.path.join(blocker, "p")  # even root cannot write here
        for exit_code in (None, "23"):
            if exit_code:
                env["TORCHSEAL_EXIT_CODE"] = exit_code
            result = run([binary], env, cwd=tmp)
            check.note("run (TORCHSEAL_EXIT_CODE=%s)" % exit_code, result.describe())
            check.true("the program ran to completion (exit code %s)" % exit_code,
                       "planted_leaks: done" in result.stdout)
            check.true("not killed by a signal (exit code %s)" % exit_code,
                       result.returncode >= 0)
            ours = [l for l in result.stderr.splitlines() if l.startswith("torchseal:")]
            check.true("a `torchseal:` line explains the failed write (exit code %s)" % exit_code,
                       len(ours) >= 1, "stderr: %s" % tail(result.stderr))
            if exit_code is None:
                check_exit(check, result, exp.exit, "when the report cannot be written")
        check.eq("files in <tmp>", sorted(os.listdir(tmp)), ["not-a-dir"])
    return check.finish()


SCENARIOS = {
    "example": scenario_example,
    "cli": scenario_cli,
    "inert": scenario_inert,
    "bad-config": scenario_bad_config,
    "unwritable-output": scenario_unwritable_output,
}


def main(argv):
    if len(argv) < 2 or argv[1] not in SCENARIOS:
        print(__doc__)
        return 2
    try:
        return SCENARIOS[argv[1]](argv[2:])
    except Failed as e:
        print("FAIL: %s" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
