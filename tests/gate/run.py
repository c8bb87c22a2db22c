#!/usr/bin/env python3
"""CI-gate acceptance tests (suite 'gate'). Usage: run.py SCENARIO

Every path comes from meson (TSEAL_GATE_* environment). Exit 0 pass, 1 fail,
77 skip (with the reason on stdout)."""
import json
import os
import re
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import harness  # noqa: E402
from harness import Checker, Failed, clean_env, need, preload, skip, with_simcuda  # noqa: E402

CHECK = Checker("gate " + " ".join(sys.argv[1:]))

# Leak sites planted by examples/planted_leaks.cpp and _v2 (function names
# are the identity the tests look for, read from the sources' EXPECT lines).
PLANTED = ["leak_device_buffer", "leak_async_in_loop", "leak_pinned_staging"]
NEW_SITE = "leak_new_workspace"


CLI = need("TSEAL_GATE_CLI", "the torchseal CLI")
SHIM = need("TSEAL_GATE_SHIM", "libtorchseal.so")
SIMCUDA = need("TSEAL_GATE_SIMCUDA_DIR", "simcuda")


def binary(name):
    return need("TSEAL_GATE_BIN_" + name, "example " + name)


def base_env(extra=None):
    """Sanitizer runtimes only in LD_PRELOAD; the shim is added per run."""
    env = with_simcuda(clean_env(drop_prefixes=("TORCHSEAL_", "TSEAL_", "SIMCUDA_", "GITHUB_")),
                       SIMCUDA)
    env.update(extra or {})
    return env


def run(argv, env=None, timeout=120):
    return harness.run(argv, env or base_env(), timeout=timeout)


def ts(*args, env=None):
    return run([CLI] + list(args), env=env)


def record(tmp, example, prefix, extra_env=None):
    """Run an example under the shim; returns the P.json path."""
    env = base_env({"LD_PRELOAD": preload(SHIM), "TORCHSEAL_OUTPUT": os.path.join(tmp, prefix)})
    env.update(extra_env or {})
    p = run([binary(example)], env=env)
    if p.returncode != 0:
        print(p.stdout, p.stderr)
        sys.exit("%s exited %d under the shim" % (example, p.returncode))
    path = os.path.join(tmp, prefix + ".json")
    if not os.path.exists(path):
        sys.exit("%s wrote no report %s: %s" % (example, path, p.stderr))
    return path


def names_in(text):
    return {n for n in PLANTED + [NEW_SITE] if n in text}


def one_error_line(p, what):
    lines = p.stderr.strip().splitlines()
    CHECK.true("%s: exit 2" % what, p.returncode == 2, "got %d: %s" % (p.returncode, p.stderr))
    CHECK.true("%s: exactly one 'torchseal: error:' line" % what,
               len(lines) == 1 and lines[0].startswith("torchseal: error: "), p.stderr)


# ---------------------------------------------------------------- scenarios

def t_check(tmp):
    rep = record(tmp, "planted_leaks", "p")
    tseal = rep[:-5] + ".tseal"
    for path in (rep, tseal):
        p = ts("check", "--max-leaked-bytes", "0", path)
        CHECK.true("check --max-leaked-bytes 0 %s exits 1" % os.path.basename(path),
                   p.returncode == 1,
                   p.stdout + p.stderr)
        CHECK.true("FAIL output names the three planted sites", names_in(p.stdout) == set(PLANTED),
                   p.stdout)
        CHECK.true("first line says FAIL", "FAIL" in p.stdout.splitlines()[0], p.stdout)
        CHECK.true("a clean history is not called truncated (%s)" % os.path.basename(path),
                   "truncated" not in p.stdout, p.stdout)
    # The process killed before its end record: judged at its last event, and said so.
    cut = os.path.join(tmp, "cut.tseal")
    data = open(tseal, "rb").read()
    open(cut, "wb").write(data[:-1])
    p = ts("check", cut)
    CHECK.true("a truncated history's FAIL line says so",
               p.returncode == 1 and "from a truncated history" in p.stdout.splitlines()[0],
               p.stdout + p.stderr)
    total = json.load(open(rep))["summary"]["leaked_bytes"]
    p = ts("check", "--max-leaked-bytes", str(total), rep)
    CHECK.true("check at exactly the leaked total exits 0", p.returncode == 0, p.stdout + p.stderr)
    p = ts("check", "--max-leaked-bytes", str(total - 1), rep)
    CHECK.true("one byte under the total exits 1", p.returncode == 1, p.stdout)
    rep_clean = record(tmp, "no_leaks", "clean")
    p = ts("check", rep_clean)
    CHECK.true("check of a clean report exits 0", p.returncode == 0, p.stdout + p.stderr)
    p = ts("check", rep_clean, rep)
    CHECK.true("one failing report among several fails", p.returncode == 1, p.stdout)


def t_suppressions(tmp):
    supp = os.path.join(tmp, "two.supp")
    with open(supp, "w") as f:
        f.write("# suppress two of the three planted sites\n\n"
                "leak:leak_device_*\n"
                "leak:^leak_pinned_staging()$\n"  # demangled names carry their parameters

                "leak:this_matches_nothing\n")
    rep = record(tmp, "planted_leaks", "p")
    p = ts("check", "--suppressions", supp, rep)
    CHECK.true("check with two sites suppressed still exits 1", p.returncode == 1, p.stdout)
    CHECK.true("output names only the third site", names_in(p.stdout) == {"leak_async_in_loop"},
               p.stdout)
    # In-process: the shim reads TORCHSEAL_SUPPRESSIONS at report time.
    rep2 = record(tmp, "planted_leaks", "s", {"TORCHSEAL_SUPPRESSIONS": supp})
    j = json.load(open(rep2))
    CHECK.true("in-process: only the third site is a leak",
               [l["frames"][0]["function"].split("(")[0] for l in j["leaks"]]
               == ["leak_async_in_loop"],
               j["leaks"])
    CHECK.true("in-process: suppressed_bytes = 1 MiB + 64 KiB",
               j["summary"]["suppressed_bytes"] == (1 << 20) + (64 << 10), j["summary"])
    used = {u["pattern"]: (u["allocations"], u["bytes"]) for u in j.get("suppressions_used", [])}
    CHECK.true("in-process: suppressions_used credits each pattern",
               used == {"leak_device_*": (1, 1 << 20), "^leak_pinned_staging()$": (1, 64 << 10)},
               used)
    txt = open(rep2[:-5] + ".txt").read()
    CHECK.true("P.txt has the LSan 'Suppressions used' table",
               "Suppressions used:" in txt
               and re.search(r"^\s+1\s+1048576 leak_device_\*$", txt, re.M),
               txt[-600:])
    CHECK.true("P.txt still ends with SUMMARY",
               txt.rstrip("\n").splitlines()[-1].startswith("SUMMARY: torchseal: 786432 byte(s)"),
               txt[-200:])
    # The replayed history applies the same suppressions through `report`.
    p = ts("report", "--suppressions", supp, "--format", "json", rep[:-5] + ".tseal")
    CHECK.true("report --suppressions on P.tseal",
               p.returncode == 0 and json.loads(p.stdout)["summary"]["leaked_bytes"] == 786432,
               p.stdout[-400:] + p.stderr)
    # Growth at a suppressed site does not count either, whether the report
    # or the history is checked (the report's growth stayed before).
    steps = record(tmp, "nvtx_steps", "n", {"TORCHSEAL_STEP_RANGE": "train_step"})
    gsupp = os.path.join(tmp, "growth.supp")
    with open(gsupp, "w") as f:
        f.write("leak:train_step\n")
    for what, path in (("P.json", steps), ("P.tseal", steps[:-5] + ".tseal")):
        p = ts("check", "--max-growth-bytes-per-step", "1", path)
        CHECK.true("%s: the growing site fails the growth limit" % what, p.returncode == 1,
                   p.stdout + p.stderr)
        p = ts("check", "--max-growth-bytes-per-step", "1", "--suppressions", gsupp, path)
        CHECK.true("%s: suppressed, neither its leak nor its growth counts" % what,
                   p.returncode == 0, p.stdout + p.stderr)
    # A broken file in-process: one line, and the run goes on unsuppressed.
    bad = os.path.join(tmp, "bad.supp")
    with open(bad, "w") as f:
        f.write("leak:ok\nnot a suppression\n")
    env = base_env({"LD_PRELOAD": preload(SHIM), "TORCHSEAL_OUTPUT": os.path.join(tmp, "b"),
                    "TORCHSEAL_SUPPRESSIONS": bad})
    p = run([binary("planted_leaks")], env=env)
    errs = [l for l in p.stderr.splitlines() if "TORCHSEAL_SUPPRESSIONS" in l]
    CHECK.true("bad suppressions file: one error line naming file:line, program unaffected",
               p.returncode == 0 and len(errs) == 1 and "bad.supp:2" in errs[0], p.stderr)
    CHECK.true("bad suppressions file: report without suppressions",
               json.load(open(os.path.join(tmp, "b.json")))["summary"]["leak_sites"] == 3)


def t_baseline(tmp):
    v1 = record(tmp, "planted_leaks", "v1")
    v2 = record(tmp, "planted_leaks_v2", "v2")
    base = os.path.join(tmp, "baseline.json")
    p = ts("baseline", v1, "-o", base)
    CHECK.true("baseline exits 0", p.returncode == 0, p.stderr)
    b = json.load(open(base))
    CHECK.true("baseline format/version",
               b.get("format") == "torchseal-baseline" and b.get("version") == 1, b)
    CHECK.true("baseline has the 3 sites",
               len(b["sites"]) == 3 and all({"kind", "api", "frames", "python_frames"} <= set(s)
                                            for s in b["sites"]), b)
    p = ts("check", "--baseline", base, v1)
    CHECK.true("same run against its baseline exits 0", p.returncode == 0, p.stdout + p.stderr)
    for path in (v2, v2[:-5] + ".tseal"):
        p = ts("check", "--baseline", base, path)
        CHECK.true("new site after the change exits 1 (%s)" % path, p.returncode == 1, p.stdout)
        CHECK.true("output names only the new site", names_in(p.stdout) == {NEW_SITE}, p.stdout)
    # A rebuild in another place: paths and addresses change, names do not.
    moved = json.load(open(v1))
    for leak in moved["leaks"]:
        for fr in leak["frames"]:
            fr["address"] = hex(int(fr["address"], 16) + 0x1000)
            if fr["file"]:
                fr["file"] = "/elsewhere/checkout/" + os.path.basename(fr["file"])
            if fr["line"] and fr is leak["frames"][0]:
                fr["line"] += 3  # code inserted above the call
    mpath = os.path.join(tmp, "moved.json")
    json.dump(moved, open(mpath, "w"))
    p = ts("check", "--baseline", base, mpath)
    CHECK.true("baseline survives moved files, addresses and a 3-line shift", p.returncode == 0,
               p.stdout + p.stderr)

    # Sizes: the same run against a baseline that recorded a quarter of one
    # site's bytes (as if that leak had grown 4x since).
    small = json.load(open(base))
    site = max(small["sites"], key=lambda x: x["bytes"])
    full = site["bytes"]
    site["bytes"] = full // 4
    spath = os.path.join(tmp, "small-baseline.json")
    json.dump(small, open(spath, "w"))
    fn = site["frames"][0]["function"].split("(")[0]
    p = ts("check", "--baseline", spath, v1)
    notes = [l for l in p.stdout.splitlines() if l.lstrip().startswith("note: known site")]
    CHECK.true("a known site over its baseline bytes passes without a ratio",
               p.returncode == 0 and "1 known site(s) leaked more than their baseline bytes"
               in p.stdout, p.stdout + p.stderr)
    CHECK.true("... with a note giving both sizes, and its stack",
               len(notes) == 1 and "leaked %d byte(s), baseline %d (4.0x)" % (full, full // 4)
               in notes[0] and fn in p.stdout, p.stdout)
    p = ts("check", "--baseline", spath, v1, env=base_env({"GITHUB_ACTIONS": "true"}))
    CHECK.true("... and a ::warning annotation under GitHub Actions",
               len([l for l in p.stdout.splitlines() if l.startswith("::warning")]) == 1
               and not any(l.startswith("::error") for l in p.stdout.splitlines()), p.stdout)
    p = ts("check", "--baseline", spath, "--baseline-max-ratio", "5", v1)
    CHECK.true("4x is within --baseline-max-ratio 5", p.returncode == 0, p.stdout + p.stderr)
    p = ts("check", "--baseline", spath, "--baseline-max-ratio", "2", v1)
    CHECK.true("4x fails --baseline-max-ratio 2, naming the site",
               p.returncode == 1 and "1 known site(s) leaked more than 2 times their baseline "
               "bytes" in p.stdout and names_in(p.stdout) == {fn}, p.stdout + p.stderr)
    p = ts("check", "--baseline-max-ratio", "2", v1)
    CHECK.true("--baseline-max-ratio without --baseline: usage error (exit 2)",
               p.returncode == 2 and p.stderr.strip(), p.stdout + p.stderr)
    p = ts("check", "--baseline", spath, "--baseline-max-ratio", "0.5", v1)
    CHECK.true("--baseline-max-ratio below 1: usage error (exit 2)", p.returncode == 2,
               p.stdout + p.stderr)


def t_diff(tmp):
    v1 = record(tmp, "planted_leaks", "v1")
    v2 = record(tmp, "planted_leaks_v2", "v2")
    p = ts("diff", v1, v2)
    CHECK.true("diff exits 0", p.returncode == 0, p.stderr)
    changed = [l for l in p.stdout.splitlines() if re.match(r"\s+(new|gone|grown|shrunk)\s", l)]
    CHECK.true("text diff shows exactly the new site",
               len(changed) == 1 and changed[0].split()[0] == "new" and NEW_SITE in changed[0]
               and "+2097152" in changed[0], p.stdout)
    p = ts("diff", "--format", "json", v1[:-5] + ".tseal", v2[:-5] + ".tseal")
    d = json.loads(p.stdout)
    CHECK.true("json diff: exactly the new site",
               len(d["leaks"]) == 1 and d["leaks"][0]["status"] == "new"
               and d["leaks"][0]["frames"][0]["function"].startswith(NEW_SITE)
               and d["leaks"][0]["bytes_delta"] == 2 << 20, d["leaks"])
    CHECK.true("json diff: 3 unchanged sites", d["unchanged"]["leak_sites"] == 3, d["unchanged"])
    p = ts("diff", "--format", "json", v2, v1)
    d = json.loads(p.stdout)
    CHECK.true("reverse diff: the site is gone",
               [x["status"] for x in d["leaks"]] == ["gone"],
               d["leaks"])


def t_junit(tmp):
    bad = record(tmp, "planted_leaks", "bad")
    good = record(tmp, "no_leaks", "good")
    out = os.path.join(tmp, "junit.xml")
    p = ts("check", "--junit", out, good, bad)
    CHECK.true("check with one failing report exits 1", p.returncode == 1, p.stdout)
    root = ET.parse(out).getroot()  # raises on invalid XML
    cases = root.findall(".//testcase")
    CHECK.true("one testcase per report", len(cases) == 2, ET.tostring(root)[:400])
    by_name = {c.get("name"): c for c in cases}
    CHECK.true("passing report has no failure",
               by_name.get(good) is not None and by_name[good].find("failure") is None)
    fail = by_name.get(bad).find("failure") if by_name.get(bad) is not None else None
    CHECK.true("failing report has a failure with stacks",
               fail is not None and "leaked" in fail.get("message", "")
               and "leak_device_buffer" in (fail.text or ""))
    CHECK.true("suite counts one failure", root.find("testsuite").get("failures") == "1")


def t_github(tmp):
    rep = record(tmp, "planted_leaks", "p")
    src = os.path.join(os.path.dirname(binary("planted_leaks")), "..", "..")
    p = ts("check", rep, env=base_env({"GITHUB_ACTIONS": "true"}))
    ann = [l for l in p.stdout.splitlines() if l.startswith("::error")]
    CHECK.true("three ::error annotations", len(ann) == 3, p.stdout)
    for l in ann:
        m = re.match(r"^::error file=([^,:]+),line=(\d+)(,title=[^:]*)?::(.+)$", l)
        CHECK.true("annotation format ::error file=F,line=L::msg at the user frame",
                   m is not None and m.group(1).endswith("planted_leaks.cpp"), l)
    lines = {int(re.search(r"line=(\d+)", l).group(1)) for l in ann}
    # The annotated lines are the LEAK-SITE lines of the source.
    srcfile = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "planted_leaks.cpp")).read().splitlines()
    marked = {i + 1 for i, t in enumerate(srcfile) if "// LEAK-SITE:" in t}
    CHECK.true("annotations point at the LEAK-SITE lines", lines == marked, (lines, marked))
    p = ts("check", rep)
    CHECK.true("no annotations without GITHUB_ACTIONS=true",
               not any(l.startswith("::") for l in p.stdout.splitlines()))
    del src


def t_run_fail_on_leak(tmp):
    os.chdir(tmp)
    env = base_env()
    p = run([CLI, "run", "--fail-on-leak", "--", binary("planted_leaks")], env=env)
    CHECK.true("leaking command -> 1", p.returncode == 1, p.stdout + p.stderr)
    CHECK.true("run --fail-on-leak prints the sites", names_in(p.stdout) == set(PLANTED), p.stdout)
    p = run([CLI, "run", "--fail-on-leak", "--", binary("no_leaks")], env=env)
    CHECK.true("clean command -> 0", p.returncode == 0, p.stdout + p.stderr)
    # A process that works in another directory writes where the check
    # looks: the reports' prefix is absolute (a relative one went elsewhere).
    elsewhere = os.path.join(tmp, "elsewhere")
    os.makedirs(elsewhere)
    p = run([CLI, "run", "--fail-on-leak", "--", "sh", "-c",
             "cd %s && exec %s" % (elsewhere, binary("planted_leaks"))], env=env)
    CHECK.true("a leaking command run from another directory -> 1", p.returncode == 1,
               p.stdout + p.stderr)
    CHECK.eq("and nothing was written where it ran", os.listdir(elsewhere), [])
    os.makedirs(os.path.join(tmp, "rel"))
    p = run([CLI, "run", "--fail-on-leak", "-o", "rel/r-%p", "--", "sh", "-c",
             "cd %s && exec %s" % (elsewhere, binary("planted_leaks"))], env=env)
    CHECK.true("the same with a relative --output -> 1", p.returncode == 1, p.stdout + p.stderr)
    CHECK.true("its report is under the relative path from the CLI's directory",
               any(f.endswith(".json") for f in os.listdir(os.path.join(tmp, "rel"))),
               os.listdir(os.path.join(tmp, "rel")))
    CHECK.true("the warnings end in a newline, not a literal \\n",
               "\\n" not in p.stderr, p.stderr)
    # A process killed (or ended by _exit) writes no exit report: said, not
    # passed over in silence.
    p = run([CLI, "run", "--fail-on-leak", "--", "sh", "-c",
             "timeout -s KILL 3 %s 100000000 >/dev/null; exit 0" % binary("nvtx_steps")],
            env=env)
    CHECK.true("a process killed before its exit report: one warning naming its history",
               p.returncode == 0 and len(re.findall(
                   r"ended without its exit report .*; its leaks were not checked: \S+\.tseal\n",
                   p.stderr)) == 1 and "no CUDA activity" not in p.stderr, p.stderr)
    p = run([CLI, "run", "--fail-on-leak", "--", "sh", "-c", "exit 3"], env=env)
    CHECK.true("failing command's status passes through", p.returncode == 3, p.returncode)
    p = run([CLI, "run", "--fail-on-leak", "--", "sh", "-c",
             binary("planted_leaks") + " >/dev/null; exit 5"], env=env)
    CHECK.true("failing command that also leaks -> its own status", p.returncode == 5, p.returncode)
    p = run([CLI, "run", "--fail-on-leak", "--", os.path.join(tmp, "no-such-program")], env=env)
    CHECK.true("missing command -> 127", p.returncode == 127, p.returncode)
    # Children: every process writes its own report and all are checked.
    script = "%s >/dev/null && %s >/dev/null" % (binary("no_leaks"), binary("planted_leaks"))
    out = os.path.join(tmp, "kids", "k-%p")
    os.makedirs(os.path.dirname(out))
    p = run([CLI, "run", "--fail-on-leak", "-o", out, "--", "sh", "-c", script], env=env)
    checked = [l for l in p.stdout.splitlines() if l.startswith("torchseal check:")]
    CHECK.true("two child processes, both checked, -> 1", p.returncode == 1 and len(checked) == 2,
               p.stdout + p.stderr)
    base = os.path.join(tmp, "b.json")
    ts("baseline", *sorted(os.path.join(tmp, "kids", f) for f in os.listdir(os.path.join(tmp, "kids"))
                           if f.endswith(".json")), "-o", base)
    shutil.rmtree(os.path.join(tmp, "kids"))
    os.makedirs(os.path.join(tmp, "kids"))
    p = run([CLI, "run", "--fail-on-leak", "--baseline", base, "-o", out, "--", "sh", "-c", script],
            env=env)
    CHECK.true("same children against their baseline -> 0", p.returncode == 0, p.stdout + p.stderr)
    p = run([CLI, "run", "--fail-on-leak", "-o", os.path.join(tmp, "nopid"), "--", "true"], env=env)
    one_error_line(p, "--fail-on-leak with an output lacking %p")


def t_bad_inputs(tmp):
    garbage = os.path.join(tmp, "garbage.json")
    open(garbage, "w").write("{ not json")
    rep = record(tmp, "planted_leaks", "p")
    notreport = os.path.join(tmp, "other.json")
    json.dump({"format": "something-else"}, open(notreport, "w"))
    for args, what in [
        (["check", os.path.join(tmp, "missing.json")], "check missing file"),
        (["check", garbage], "check garbage"),
        (["check", notreport], "check non-report JSON"),
        (["check", "--baseline", garbage, rep], "check bad baseline"),
        (["check", "--baseline", rep, rep], "check report given as baseline"),
        (["check", "--suppressions", garbage, rep], "check bad suppressions"),
        (["check", "--max-leaked-bytes", "-5", rep], "check negative limit"),
        (["check", "--junit", os.path.join(tmp, "no", "dir", "j.xml"), rep], "unwritable junit"),
        (["diff", rep, garbage], "diff garbage"),
        (["merge", garbage, "-o", os.path.join(tmp, "m.json")], "merge garbage"),
        (["baseline", os.path.join(tmp, "missing.tseal"), "-o", os.path.join(tmp, "b.json")],
         "baseline missing"),
        (["frobnicate", rep], "unknown subcommand"),
    ]:
        one_error_line(ts(*args), what)


def t_mpi_merge(tmp):
    mpirun = shutil.which("mpirun")
    if not mpirun:
        skip("!!! mpirun not found: install openmpi-bin (scripts/deps) to test multi-rank merge !!!")
    outdir = os.path.join(tmp, "ranks")
    os.makedirs(outdir)
    env = base_env({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                    "OMPI_MCA_plm_rsh_agent": ""})
    argv = [mpirun, "-np", "4", "--oversubscribe"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    # torchseal run under mpirun: each rank preloads the shim; %r from
    # OMPI_COMM_WORLD_RANK.
    argv += ["-x", "LD_LIBRARY_PATH", CLI, "run", "-o", os.path.join(outdir, "r%r-%p"), "--",
             binary("rank_leaks")]
    p = run(argv, env=env, timeout=180)
    if p.returncode != 0 and ("not enough slots" in p.stderr or "orted" in p.stderr
                              or "ORTE" in p.stderr or "PRTE" in p.stderr):
        skip("!!! mpirun could not start 4 ranks here: %s !!!" % p.stderr.strip()[:300])
    CHECK.true("mpirun -np 4 exits 0", p.returncode == 0, p.stdout + p.stderr)
    reports = sorted(os.path.join(outdir, f) for f in os.listdir(outdir) if f.endswith(".json"))
    CHECK.true("four rank reports", len(reports) == 4, os.listdir(outdir))
    ranks = sorted(json.load(open(r))["process"]["rank"] for r in reports)
    CHECK.true("process.rank 0..3", ranks == [0, 1, 2, 3], ranks)
    merged = os.path.join(tmp, "merged.json")
    p = ts("merge", *reports, "-o", merged)
    CHECK.true("merge exits 0", p.returncode == 0, p.stderr)
    m = json.load(open(merged))
    CHECK.true("merged keeps the schema", m["format"] == "torchseal-report" and m["version"] == 1)
    by_fn = {l["frames"][0]["function"].split("(")[0]: l for l in m["leaks"]}
    CHECK.true("two merged sites",
               set(by_fn) == {"leak_on_every_rank", "leak_on_rank_two_only"},
               by_fn.keys())
    every, two = by_fn.get("leak_on_every_rank"), by_fn.get("leak_on_rank_two_only")
    if every and two:
        CHECK.true("common site: all four ranks, uniform",
                   sorted(every["ranks"]) == ["0", "1", "2", "3"] and every["uniform"] is True
                   and every["bytes"] == 4 << 20, every["ranks"])
        CHECK.true("extra site attributed to rank 2 only",
                   list(two["ranks"]) == ["2"] and two["uniform"] is False
                   and two["ranks"]["2"] == {"bytes": 512 << 10, "allocations": 1}, two["ranks"])
    CHECK.true("merge notes the non-uniform site",
               "not uniform" in p.stderr and "leak_on_rank_two_only" in p.stderr
               and " on 2" in p.stderr,
               p.stderr)
    CHECK.true("summed leaked_bytes",
               m["summary"]["leaked_bytes"] == (4 << 20) + (512 << 10),
               m["summary"])
    p = ts("report", merged)
    CHECK.true("merged.json reads back as a report", p.returncode == 0, p.stderr)


SCENARIOS = {
    "check": t_check, "suppressions": t_suppressions, "baseline": t_baseline, "diff": t_diff,
    "junit": t_junit, "github": t_github, "run-fail-on-leak": t_run_fail_on_leak,
    "bad-inputs": t_bad_inputs, "mpi-merge": t_mpi_merge,
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        sys.exit("usage: run.py {%s}" % "|".join(SCENARIOS))
    with tempfile.TemporaryDirectory(prefix="tseal-gate-") as tmp:
        try:
            SCENARIOS[sys.argv[1]](tmp)
        except Failed as e:
            CHECK.fail(str(e))
    sys.exit(CHECK.finish())


if __name__ == "__main__":
    main()
