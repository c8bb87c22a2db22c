"""The CUDA stack the programs run on.

By default the machine's own: the driver the dynamic loader finds
(libcuda.so.1) and the toolkit's runtime. With --cuda-libs, the libraries in
the directories named there (a test points them at simcuda). The example
binaries carry a RUNPATH to simcuda's build directory, so LD_LIBRARY_PATH
must name the real runtime's directory, and the runtime they resolve is
checked before anything runs.
"""

import json
import os
import re
import subprocess
import sys


class NoGpu(Exception):
    """No usable driver or device: the one-line reason."""


class WrongStack(Exception):
    """The programs would not load the stack we mean to test."""


# Run as `python3 -c PROBE LIBCUDA`: prints one JSON line, the driver's path,
# CUDA version and device count, and the threads the driver started at cuInit
# and with device 0's primary context current (NVIDIA documents none; simcuda
# starts none, bench/RESULTS.md), or the one-line reason there is no GPU.
PROBE = r"""
import ctypes, json, os, sys
def say(**kw):
    print(json.dumps(kw))
    sys.exit(0)
def error_name(cuda, rc):
    name = ctypes.c_char_p()
    if cuda.cuGetErrorName(rc, ctypes.byref(name)) == 0 and name.value:
        return name.value.decode()
    return "unknown error"
try:
    cuda = ctypes.CDLL(sys.argv[1])
except OSError as e:
    say(error="no CUDA driver: %s" % e)
path = sys.argv[1]
with open("/proc/self/maps") as maps:
    for line in maps:
        mapped = line.split(None, 5)[-1].strip()
        if os.path.basename(mapped).startswith("libcuda.so"):
            path = mapped
            break
def threads():
    return len(os.listdir("/proc/self/task"))
before = threads()
rc = cuda.cuInit(0)
at_init = threads() - before
if rc != 0:
    say(error="the CUDA driver %s does not start: cuInit returned %d (%s)"
        % (path, rc, error_name(cuda, rc)))
count, version = ctypes.c_int(0), ctypes.c_int(0)
rc = cuda.cuDeviceGetCount(ctypes.byref(count))
if rc != 0 or count.value == 0:
    say(error="the CUDA driver %s sees no GPU (cuDeviceGetCount: %d devices, error %d)"
        % (path, count.value, rc))
v = "%d.%d" % (version.value // 1000, version.value % 1000 // 10) \
    if cuda.cuDriverGetVersion(ctypes.byref(version)) == 0 else None
dev, ctx = ctypes.c_int(0), ctypes.c_void_p()
with_context = None
if cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0 and \
        cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and \
        cuda.cuCtxSetCurrent(ctx) == 0:
    with_context = threads() - before
say(driver=path, version=v, devices=count.value, threads_at_init=at_init,
    threads_with_context=with_context)
"""


class Stack:
    def __init__(self, lib_dirs, cuda_root):
        self.lib_dirs = [os.path.abspath(d) for d in lib_dirs]
        # The libraries torch links but a C++ example never uses (cuBLAS,
        # cuDNN, ...) come from the toolkit, after the named directories.
        self.toolkit = [d for d in (os.path.join(cuda_root, "lib64"),
                                    os.path.join(cuda_root, "targets", "x86_64-linux", "lib"))
                        if os.path.isdir(d)]
        self.driver = None
        self.driver_version = None
        self.devices = 0
        self.threads = (None, None)

    def env(self, env):
        """`env` with this stack's directories first on LD_LIBRARY_PATH."""
        dirs = self.lib_dirs + self.toolkit
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = ":".join(dirs + ([old] if old else []))
        return env

    def probe(self, env):
        """Ask the driver for devices, in a child process with `env` (a
        sanitizer build's runtimes must load first); NoGpu if it cannot."""
        if self.lib_dirs:
            found = [os.path.join(d, "libcuda.so.1") for d in self.lib_dirs
                     if os.path.exists(os.path.join(d, "libcuda.so.1"))]
            if not found:
                raise NoGpu("no CUDA driver: libcuda.so.1 is in none of %s"
                            % ":".join(self.lib_dirs))
            name = found[0]
        else:
            name = "libcuda.so.1"
        p = subprocess.run([sys.executable, "-c", PROBE, name], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        try:
            answer = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise NoGpu("the CUDA driver %s could not be asked (exit %d): %s"
                        % (name, p.returncode, p.stderr.strip()[-300:]))
        if "error" in answer:
            raise NoGpu(answer["error"])
        self.driver, self.devices = answer["driver"], answer["devices"]
        self.driver_version = answer["version"]
        self.threads = (answer.get("threads_at_init"), answer.get("threads_with_context"))

    def runtime_of(self, binary, env, forbidden):
        """The libcudart a binary loads under `env` (None if it links none).
        WrongStack if that is in `forbidden` (simcuda's build directory)
        while --cuda-libs does not name it."""
        p = subprocess.run(["ldd", binary], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        m = re.search(r"^\s*libcudart\.so\S*\s+=>\s+(\S+)", p.stdout, re.M)
        if not m:
            if "libcudart" in p.stdout:
                raise WrongStack("%s: libcudart is not found on this stack:\n%s"
                                 % (binary, p.stdout.strip()))
            return None
        path = os.path.realpath(m.group(1))
        where = os.path.realpath(forbidden)
        named = any(os.path.realpath(d) == where for d in self.lib_dirs)
        if path.startswith(where + os.sep) and not named:
            raise WrongStack("%s would load simcuda's runtime (%s) through its RUNPATH: no "
                             "libcudart.so.13 on this stack; install the CUDA 13 runtime "
                             "or name its directory with --cuda-libs" % (binary, path))
        return path

    def describe(self):
        version = " (CUDA %s)" % self.driver_version if self.driver_version else ""
        at_init, with_context = ("?" if t is None else "+%d" % t for t in self.threads)
        return "driver %s%s, %d device(s), driver threads %s at cuInit, %s with a context" % (
            self.driver, version, self.devices, at_init, with_context)
