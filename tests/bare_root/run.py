#!/usr/bin/env python3
"""The Meson install on a machine like NVIDIA's CUDA images: `meson install`
into a scratch folder, then, in a bare root (harness/bare_root.py: no
libunwind, no libdw, no -dev packages), its `torchseal run` on
planted_leaks and on a Python program must show the fast unwinder and
file:line (checks.py). Also:
  * corrupt bundled copies: one `torchseal: degraded:` line at start, the
    same in P.json's process.degraded and P.txt's header, and
    `torchseal check --fail-on-degraded` fails on it;
  * a host that opens libunwind and libdw itself gets its own copies, not
    the bundled ones the shim loaded.
Paths come from meson.build (TSEAL_BR_*). Exit 0 pass, 1 fail, 77 skip.
"""
import glob
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import checks  # noqa: E402
import harness  # noqa: E402
from harness import Checker, bare_root, clean_env, need, with_simcuda  # noqa: E402

CHECK = Checker("bare_root", verbose=True)
BUILD = need("TSEAL_BR_BUILD")
WORK = need("TSEAL_BR_WORK")
SIMCUDA = need("TSEAL_BR_SIMCUDA_DIR")
PLANTED = need("TSEAL_BR_PLANTED")
PLANTED_SRC = need("TSEAL_BR_PLANTED_SRC")
NO_LEAKS = need("TSEAL_BR_NO_LEAKS")
NATIVE_LIB = need("TSEAL_BR_NATIVE_LIB")
HOST_OWN = need("TSEAL_BR_HOST_OWN")
SHIM = need("TSEAL_BR_SHIM")


def env():
    return with_simcuda(clean_env(), SIMCUDA)


def install():
    """`meson install` into WORK/root; returns its torchseal executable."""
    root = os.path.join(WORK, "root")
    shutil.rmtree(root, ignore_errors=True)
    p = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet",
                        "--destdir", root], capture_output=True, text=True)
    if p.returncode != 0:
        raise harness.Failed("meson install failed:\n" + p.stdout[-2000:] + p.stderr[-2000:])
    clis = [f for f in glob.glob(os.path.join(root, "**", "bin", "torchseal"), recursive=True)
            if os.path.isfile(f)]
    if len(clis) != 1:
        raise harness.Failed("meson install made %r, expected one bin/torchseal" % clis)
    shims = glob.glob(os.path.join(root, "**", "libtorchseal.so"), recursive=True)
    CHECK.eq("one installed shim", len(shims), 1, shims)
    bundled = sorted(os.path.basename(f) for f in
                     glob.glob(os.path.join(os.path.dirname(shims[0]), "bundled", "*")))
    CHECK.true("the install bundles libunwind and libdw beside the shim",
               "libunwind-torchseal.so.8" in bundled and "libdw-torchseal.so.1" in bundled,
               bundled)
    return clis[0], root


def check_degraded(root):
    """A copy of the install whose bundled libraries are damaged."""
    broken = os.path.join(WORK, "broken")
    shutil.rmtree(broken, ignore_errors=True)
    shutil.copytree(root, broken, symlinks=True)
    for name in ("libunwind-torchseal.so.8", "libdw-torchseal.so.1"):
        for f in glob.glob(os.path.join(broken, "**", "bundled", name), recursive=True):
            with open(f, "r+b") as fh:
                fh.truncate(100)
    cli = glob.glob(os.path.join(broken, "**", "bin", "torchseal"), recursive=True)[0]
    out = os.path.join(WORK, "out-broken")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    p = checks.run_in_bare_root([cli, "run", "--output", os.path.join(out, "P"), "--", PLANTED],
                                env(), out)
    CHECK.note("degraded run", p.describe())
    CHECK.eq("planted_leaks still runs", p.returncode, 0)
    lines = [l for l in p.stderr.splitlines() if l.startswith("torchseal: degraded:")]
    CHECK.eq("one degraded line at start", len(lines), 1, p.stderr[-2000:])
    if lines:
        CHECK.true("it names both costs and the damaged copy",
                   "no line numbers" in lines[0] and "short native stacks" in lines[0]
                   and "libunwind-torchseal.so.8" in lines[0], lines[0])
    report = CHECK.read_json(os.path.join(out, "P.json"))
    if report is not None:
        CHECK.eq("process.degraded lists both", sorted(report["process"].get("degraded") or []),
                 ["no line numbers: libdw unavailable",
                  "short native stacks: libunwind unavailable, frame pointers only"])
        firsts = sorted(l["frames"][0].get("function") or "" for l in report["leaks"])
        CHECK.eq("frame-pointer stacks still name the leaking functions", firsts,
                 sorted(["leak_device_buffer()", "leak_async_in_loop(CUstream_st*)",
                         "leak_pinned_staging()"]))
        lines_seen = [f.get("line") for l in report["leaks"] for f in l["frames"] if f.get("line")]
        CHECK.eq("and no line numbers", lines_seen, [])
    text = open(os.path.join(out, "P.txt")).read() if os.path.exists(
        os.path.join(out, "P.txt")) else ""
    CHECK.true("P.txt's header says so", "torchseal: degraded: no line numbers" in
               "\n".join(text.splitlines()[:4]), text[:600])
    # The gate: a clean program's report passes, unless degradation fails it.
    out2 = os.path.join(WORK, "out-broken-clean")
    shutil.rmtree(out2, ignore_errors=True)
    os.makedirs(out2)
    p = checks.run_in_bare_root([cli, "run", "--output", os.path.join(out2, "P"), "--", NO_LEAKS],
                                env(), out2)
    CHECK.eq("no_leaks runs", p.returncode, 0, p.describe())
    rep = os.path.join(out2, "P.json")
    plain = harness.run([cli, "check", rep], env())
    CHECK.eq("check passes a clean report", plain.returncode, 0, plain.describe())
    strict = harness.run([cli, "check", "--fail-on-degraded", rep], env())
    CHECK.eq("check --fail-on-degraded fails it", strict.returncode, 1, strict.describe())
    CHECK.true("and says why", "degraded: short native stacks" in strict.stdout + strict.stderr,
               strict.describe())


def check_host_keeps_its_own():
    e = env()
    e["LD_PRELOAD"] = SHIM + (":" + e["LD_PRELOAD"] if e.get("LD_PRELOAD") else "")
    e["TORCHSEAL_OUTPUT"] = os.path.join(WORK, "host-own", "P")
    os.makedirs(os.path.join(WORK, "host-own"), exist_ok=True)
    p = harness.run([HOST_OWN], e)
    CHECK.note("host_own_libs", p.describe())
    CHECK.eq("host_own_libs exits 0", p.returncode, 0)
    got = dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)
    CHECK.eq("the shim loaded its bundled copies", got.get("bundled_mapped"), "1")
    for soname in ("libunwind.so.8", "libdw.so.1"):
        where = got.get(soname, "")
        CHECK.true("the host's dlopen(%s) gets the system's copy" % soname,
                   where.startswith("/") and "-torchseal" not in where, where)


def main():
    why = bare_root.unavailable()
    if why:
        bar = "!" * 78
        print("%s\nSKIP bare_root: %s\n%s" % (bar, why, bar))
        harness.skip(why)
    try:
        cli, root = install()
        checks.check_planted(CHECK, cli, env(), os.path.join(WORK, "out-planted"), PLANTED,
                             PLANTED_SRC, "meson install")
        checks.check_python(CHECK, cli, env(), os.path.join(WORK, "out-python"), "python3",
                            NATIVE_LIB, "meson install")
        check_degraded(root)
        check_host_keeps_its_own()
    except harness.Failed as e:
        CHECK.fail(str(e))
    sys.exit(CHECK.finish())


if __name__ == "__main__":
    main()
