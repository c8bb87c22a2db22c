#!/usr/bin/env python3
"""CI-gate acceptance tests (suite 'gate'). Usage: run.py SCENARIO

Every path comes from meson (TSEAL_GATE_* environment). Exit 0 pass, 1 fail,
77 skip (with the reason on stdout)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from preload import preload  # noqa: E402

SKIP = 77
failures = []

# Leak sites planted by examples/planted_leaks.cpp and _v2 (function names
# are the identity the tests look for, read from the sources' EXPECT lines).
PLANTED = ["leak_device_buffer", "leak_async_in_loop", "leak_pinned_staging"]
NEW_SITE = "leak_new_workspace"


def skip(why):
    print("SKIP:", why)
    sys.exit(SKIP)


def check(cond, what, detail=""):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
        if detail:
            print("      " + str(detail).replace("\n", "\n      "))


def need(name, what):
    value = os.environ.get(name, "")
    if not value:
        skip("%s is not built in this configuration (%s is empty)" % (what, name))
    if not os.path.exists(value):
        skip("%s does not exist yet: %s" % (what, value))
    return value


CLI = need("TSEAL_GATE_CLI", "the torchseal CLI")
SHIM = need("TSEAL_GATE_SHIM", "libtorchseal.so")
SIMCUDA = need("TSEAL_GATE_SIMCUDA_DIR", "simcuda")


def binary(name):
    return need("TSEAL_GATE_BIN_" + name, "example " + name)


def base_env(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCHSEAL_", "TSEAL_", "SIMCUDA_", "GITHUB_"))
           and k != "LD_PRELOAD"}
    if preload():  # sanitizer runtimes (tests/preload.py); the shim is added per run
        env["LD_PRELOAD"] = preload()
    old = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = SIMCUDA + (":" + old if old else "")
    env.update(extra or {})
    return env


def run(argv, env=None, timeout=120):
    p = subprocess.run(argv, capture_output=True, text=True, env=env or base_env(),
                       timeout=timeout)
    return p


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
    check(p.returncode == 2, "%s: exit 2" % what, "got %d: %s" % (p.returncode, p.stderr))
    check(len(lines) == 1 and lines[0].startswith("torchseal: error: "),
          "%s: exactly one 'torchseal: error:' line" % what, p.stderr)


# ---------------------------------------------------------------- scenarios

def t_check(tmp):
    rep = record(tmp, "planted_leaks", "p")
    tseal = rep[:-5] + ".tseal"
    for path in (rep, tseal):
        p = ts("check", "--max-leaked-bytes", "0", path)
        check(p.returncode == 1, "check --max-leaked-bytes 0 %s exits 1" % os.path.basename(path),
              p.stdout + p.stderr)
        check(names_in(p.stdout) == set(PLANTED), "FAIL output names the three planted sites",
              p.stdout)
        check("FAIL" in p.stdout.splitlines()[0], "first line says FAIL", p.stdout)
    total = json.load(open(rep))["summary"]["leaked_bytes"]
    p = ts("check", "--max-leaked-bytes", str(total), rep)
    check(p.returncode == 0, "check at exactly the leaked total exits 0", p.stdout + p.stderr)
    p = ts("check", "--max-leaked-bytes", str(total - 1), rep)
    check(p.returncode == 1, "one byte under the total exits 1", p.stdout)
    rep_clean = record(tmp, "no_leaks", "clean")
    p = ts("check", rep_clean)
    check(p.returncode == 0, "check of a clean report exits 0", p.stdout + p.stderr)
    p = ts("check", rep_clean, rep)
    check(p.returncode == 1, "one failing report among several fails", p.stdout)


def t_suppressions(tmp):
    supp = os.path.join(tmp, "two.supp")
    with open(supp, "w") as f:
        f.write("# suppress two of the three planted sites\n\n"
                "leak:leak_device_*\n"
                "leak:^leak_pinned_staging()$\n"  # demangled names carry their parameters

                "leak:this_matches_nothing\n")
    rep = record(tmp, "planted_leaks", "p")
    p = ts("check", "--suppressions", supp, rep)
    check(p.returncode == 1, "check with two sites suppressed still exits 1", p.stdout)
    check(names_in(p.stdout) == {"leak_async_in_loop"}, "output names only the third site",
          p.stdout)
    # In-process: the shim reads TORCHSEAL_SUPPRESSIONS at report time.
    rep2 = record(tmp, "planted_leaks", "s", {"TORCHSEAL_SUPPRESSIONS": supp})
    j = json.load(open(rep2))
    check([l["frames"][0]["function"].split("(")[0] for l in j["leaks"]] == ["leak_async_in_loop"],
          "in-process: only the third site is a leak", j["leaks"])
    check(j["summary"]["suppressed_bytes"] == (1 << 20) + (64 << 10),
          "in-process: suppressed_bytes = 1 MiB + 64 KiB", j["summary"])
    used = {u["pattern"]: (u["allocations"], u["bytes"]) for u in j.get("suppressions_used", [])}
    check(used == {"leak_device_*": (1, 1 << 20), "^leak_pinned_staging()$": (1, 64 << 10)},
          "in-process: suppressions_used credits each pattern", used)
    txt = open(rep2[:-5] + ".txt").read()
    check("Suppressions used:" in txt and re.search(r"^\s+1\s+1048576 leak_device_\*$", txt, re.M),
          "P.txt has the LSan 'Suppressions used' table", txt[-600:])
    check(txt.rstrip("\n").splitlines()[-1].startswith("SUMMARY: torchseal: 786432 byte(s)"),
          "P.txt still ends with SUMMARY", txt[-200:])
    # The replayed history applies the same suppressions through `report`.
    p = ts("report", "--suppressions", supp, "--format", "json", rep[:-5] + ".tseal")
    check(p.returncode == 0 and json.loads(p.stdout)["summary"]["leaked_bytes"] == 786432,
          "report --suppressions on P.tseal", p.stdout[-400:] + p.stderr)
    # A broken file in-process: one line, and the run goes on unsuppressed.
    bad = os.path.join(tmp, "bad.supp")
    with open(bad, "w") as f:
        f.write("leak:ok\nnot a suppression\n")
    env = base_env({"LD_PRELOAD": preload(SHIM), "TORCHSEAL_OUTPUT": os.path.join(tmp, "b"),
                    "TORCHSEAL_SUPPRESSIONS": bad})
    p = run([binary("planted_leaks")], env=env)
    errs = [l for l in p.stderr.splitlines() if "TORCHSEAL_SUPPRESSIONS" in l]
    check(p.returncode == 0 and len(errs) == 1 and "bad.supp:2" in errs[0],
          "bad suppressions file: one error line naming file:line, program unaffected", p.stderr)
    check(json.load(open(os.path.join(tmp, "b.json")))["summary"]["leak_sites"] == 3,
          "bad suppressions file: report without suppressions")


def t_baseline(tmp):
    v1 = record(tmp, "planted_leaks", "v1")
    v2 = record(tmp, "planted_leaks_v2", "v2")
    base = os.path.join(tmp, "baseline.json")
    p = ts("baseline", v1, "-o", base)
    check(p.returncode == 0, "baseline exits 0", p.stderr)
    b = json.load(open(base))
    check(b.get("format") == "torchseal-baseline" and b.get("version") == 1,
          "baseline format/version", b)
    check(len(b["sites"]) == 3 and all({"kind", "api", "frames", "python_frames"} <= set(s)
                                       for s in b["sites"]), "baseline has the 3 sites", b)
    p = ts("check", "--baseline", base, v1)
    check(p.returncode == 0, "same run against its baseline exits 0", p.stdout + p.stderr)
    for path in (v2, v2[:-5] + ".tseal"):
        p = ts("check", "--baseline", base, path)
        check(p.returncode == 1, "new site after the change exits 1 (%s)" % path, p.stdout)
        check(names_in(p.stdout) == {NEW_SITE}, "output names only the new site", p.stdout)
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
    check(p.returncode == 0, "baseline survives moved files, addresses and a 3-line shift",
          p.stdout + p.stderr)


def t_diff(tmp):
    v1 = record(tmp, "planted_leaks", "v1")
    v2 = record(tmp, "planted_leaks_v2", "v2")
    p = ts("diff", v1, v2)
    check(p.returncode == 0, "diff exits 0", p.stderr)
    changed = [l for l in p.stdout.splitlines() if re.match(r"\s+(new|gone|grown|shrunk)\s", l)]
    check(len(changed) == 1 and changed[0].split()[0] == "new" and NEW_SITE in changed[0]
          and "+2097152" in changed[0], "text diff shows exactly the new site", p.stdout)
    p = ts("diff", "--format", "json", v1[:-5] + ".tseal", v2[:-5] + ".tseal")
    d = json.loads(p.stdout)
    check(len(d["leaks"]) == 1 and d["leaks"][0]["status"] == "new"
          and d["leaks"][0]["frames"][0]["function"].startswith(NEW_SITE)
          and d["leaks"][0]["bytes_delta"] == 2 << 20, "json diff: exactly the new site", d["leaks"])
    check(d["unchanged"]["leak_sites"] == 3, "json diff: 3 unchanged sites", d["unchanged"])
    p = ts("diff", "--format", "json", v2, v1)
    d = json.loads(p.stdout)
    check([x["status"] for x in d["leaks"]] == ["gone"], "reverse diff: the site is gone", d["leaks"])


def t_junit(tmp):
    bad = record(tmp, "planted_leaks", "bad")
    good = record(tmp, "no_leaks", "good")
    out = os.path.join(tmp, "junit.xml")
    p = ts("check", "--junit", out, good, bad)
    check(p.returncode == 1, "check with one failing report exits 1", p.stdout)
    root = ET.parse(out).getroot()  # raises on invalid XML
    cases = root.findall(".//testcase")
    check(len(cases) == 2, "one testcase per report", ET.tostring(root)[:400])
    by_name = {c.get("name"): c for c in cases}
    check(by_name.get(good) is not None and by_name[good].find("failure") is None,
          "passing report has no failure")
    fail = by_name.get(bad).find("failure") if by_name.get(bad) is not None else None
    check(fail is not None and "leaked" in fail.get("message", "")
          and "leak_device_buffer" in (fail.text or ""), "failing report has a failure with stacks")
    check(root.find("testsuite").get("failures") == "1", "suite counts one failure")


def t_github(tmp):
    rep = record(tmp, "planted_leaks", "p")
    src = os.path.join(os.path.dirname(binary("planted_leaks")), "..", "..")
    p = ts("check", rep, env=base_env({"GITHUB_ACTIONS": "true"}))
    ann = [l for l in p.stdout.splitlines() if l.startswith("::error")]
    check(len(ann) == 3, "three ::error annotations", p.stdout)
    for l in ann:
        m = re.match(r"^::error file=([^,:]+),line=(\d+)(,title=[^:]*)?::(.+)$", l)
        check(m is not None and m.group(1).endswith("planted_leaks.cpp"),
              "annotation format ::error file=F,line=L::msg at the user frame", l)
    lines = {int(re.search(r"line=(\d+)", l).group(1)) for l in ann}
    # The annotated lines are the LEAK-SITE lines of the source.
    srcfile = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "planted_leaks.cpp")).read().splitlines()
    marked = {i + 1 for i, t in enumerate(srcfile) if "// LEAK-SITE:" in t}
    check(lines == marked, "annotations point at the LEAK-SITE lines", (lines, marked))
    p = ts("check", rep)
    check(not any(l.startswith("::") for l in p.stdout.splitlines()),
          "no annotations without GITHUB_ACTIONS=true")
    del src


def t_run_fail_on_leak(tmp):
    os.chdir(tmp)
    env = base_env()
    p = run([CLI, "run", "--fail-on-leak", "--", binary("planted_leaks")], env=env)
    check(p.returncode == 1, "leaking command -> 1", p.stdout + p.stderr)
    check(names_in(p.stdout) == set(PLANTED), "run --fail-on-leak prints the sites", p.stdout)
    p = run([CLI, "run", "--fail-on-leak", "--", binary("no_leaks")], env=env)
    check(p.returncode == 0, "clean command -> 0", p.stdout + p.stderr)
    p = run([CLI, "run", "--fail-on-leak", "--", "sh", "-c", "exit 3"], env=env)
    check(p.returncode == 3, "failing command's status passes through", p.returncode)
    p = run([CLI, "run", "--fail-on-leak", "--", "sh", "-c",
             binary("planted_leaks") + " >/dev/null; exit 5"], env=env)
    check(p.returncode == 5, "failing command that also leaks -> its own status", p.returncode)
    p = run([CLI, "run", "--fail-on-leak", "--", os.path.join(tmp, "no-such-program")], env=env)
    check(p.returncode == 127, "missing command -> 127", p.returncode)
    # Children: every process writes its own report and all are checked.
    script = "%s >/dev/null && %s >/dev/null" % (binary("no_leaks"), binary("planted_leaks"))
    out = os.path.join(tmp, "kids", "k-%p")
    os.makedirs(os.path.dirname(out))
    p = run([CLI, "run", "--fail-on-leak", "-o", out, "--", "sh", "-c", script], env=env)
    checked = [l for l in p.stdout.splitlines() if l.startswith("torchseal check:")]
    check(p.returncode == 1 and len(checked) == 2, "two child processes, both checked, -> 1",
          p.stdout + p.stderr)
    base = os.path.join(tmp, "b.json")
    ts("baseline", *sorted(os.path.join(tmp, "kids", f) for f in os.listdir(os.path.join(tmp, "kids"))
                           if f.endswith(".json")), "-o", base)
    shutil.rmtree(os.path.join(tmp, "kids"))
    os.makedirs(os.path.join(tmp, "kids"))
    p = run([CLI, "run", "--fail-on-leak", "--baseline", base, "-o", out, "--", "sh", "-c", script],
            env=env)
    check(p.returncode == 0, "same children against their baseline -> 0", p.stdout + p.stderr)
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
    check(p.returncode == 0, "mpirun -np 4 exits 0", p.stdout + p.stderr)
    reports = sorted(os.path.join(outdir, f) for f in os.listdir(outdir) if f.endswith(".json"))
    check(len(reports) == 4, "four rank reports", os.listdir(outdir))
    ranks = sorted(json.load(open(r))["process"]["rank"] for r in reports)
    check(ranks == [0, 1, 2, 3], "process.rank 0..3", ranks)
    merged = os.path.join(tmp, "merged.json")
    p = ts("merge", *reports, "-o", merged)
    check(p.returncode == 0, "merge exits 0", p.stderr)
    m = json.load(open(merged))
    check(m["format"] == "torchseal-report" and m["version"] == 1, "merged keeps the schema")
    by_fn = {l["frames"][0]["function"].split("(")[0]: l for l in m["leaks"]}
    check(set(by_fn) == {"leak_on_every_rank", "leak_on_rank_two_only"}, "two merged sites", by_fn.keys())
    every, two = by_fn.get("leak_on_every_rank"), by_fn.get("leak_on_rank_two_only")
    if every and two:
        check(sorted(every["ranks"]) == ["0", "1", "2", "3"] and every["uniform"] is True
              and every["bytes"] == 4 << 20, "common site: all four ranks, uniform", every["ranks"])
        check(list(two["ranks"]) == ["2"] and two["uniform"] is False
              and two["ranks"]["2"] == {"bytes": 512 << 10, "allocations": 1},
              "extra site attributed to rank 2 only", two["ranks"])
    check("not uniform" in p.stderr and "leak_on_rank_two_only" in p.stderr and " on 2" in p.stderr,
          "merge notes the non-uniform site", p.stderr)
    check(m["summary"]["leaked_bytes"] == (4 << 20) + (512 << 10), "summed leaked_bytes", m["summary"])
    p = ts("report", merged)
    check(p.returncode == 0, "merged.json reads back as a report", p.stderr)


SCENARIOS = {
    "check": t_check, "suppressions": t_suppressions, "baseline": t_baseline, "diff": t_diff,
    "junit": t_junit, "github": t_github, "run-fail-on-leak": t_run_fail_on_leak,
    "bad-inputs": t_bad_inputs, "mpi-merge": t_mpi_merge,
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        sys.exit("usage: run.py {%s}" % "|".join(SCENARIOS))
    with tempfile.TemporaryDirectory(prefix="tseal-gate-") as tmp:
        SCENARIOS[sys.argv[1]](tmp)
    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
