"""A machine like NVIDIA's CUDA images, made here: the same root with
libunwind, elfutils (libdw, libelf) and their -dev packages hidden in a
private mount namespace (`unshare -m`, then an empty file bound over each of
their shared objects). dlopen of any of them then fails, as it does on a
machine without the packages, and nothing outside the namespace changes.

    reason = unavailable()     None, or why no bare root can be made here
    argv = wrap(["cmd", ...])  the command, run inside a fresh bare root
"""

import os
import shlex
import subprocess

# Debian's packages for what GPU images lack (the runtime libraries and the
# -dev packages that would bring them back).
PACKAGES = ("libunwind8", "libunwind-dev", "libdw1", "libdw-dev", "libelf1", "libelf-dev")
# Probed inside the namespace: each must fail to load there.
SONAMES = ("libunwind.so.8", "libdw.so.1", "libelf.so.1")


def hidden_files():
    """Every shared object those packages installed (symlinks resolved)."""
    files = set()
    for pkg in PACKAGES:
        p = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True)
        if p.returncode != 0:
            continue
        for f in p.stdout.split():
            base = os.path.basename(f)
            if ".so" in base and (os.path.isfile(f) or os.path.islink(f)):
                files.add(os.path.realpath(f))
    return sorted(files)


def _script():
    binds = " && ".join("mount --bind /dev/null %s" % shlex.quote(f) for f in hidden_files())
    return (binds + " && " if binds else "") + 'exec "$@"'


def wrap(argv):
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", _script(), "sh"] + list(argv)


def unavailable():
    if os.geteuid() != 0:
        return "a mount namespace needs root (run as root, as CI does)"
    probe = ("import ctypes, sys\n"
             "ok = []\n"
             "for n in %r:\n"
             "    try:\n"
             "        ctypes.CDLL(n); ok.append(n)\n"
             "    except OSError:\n"
             "        pass\n"
             "sys.exit('still loadable: ' + ' '.join(ok) if ok else 0)\n" % (SONAMES,))
    p = subprocess.run(wrap(["python3", "-c", probe]), capture_output=True, text=True)
    if p.returncode != 0:
        return "cannot hide the libraries: %s" % (p.stderr.strip() or p.stdout.strip())
    return None
