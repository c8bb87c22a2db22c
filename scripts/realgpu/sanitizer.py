"""compute-sanitizer: find it, run `--leak-check full`, parse its leak list.

Its leak report (memcheck, the default tool) is one block per leaked
allocation, every line prefixed `========= `:

    ========= Leaked 1,048,576 bytes at 0x7f566f200000
    =========     Saved host backtrace up to driver entry point at allocation time
    then the host frames, in one of two layouts:
      before 2025:  =========     Host Frame:planted_leaks.cpp:47:leak_device_buffer() [0x1a2b]
                    =========                in /path/planted_leaks
      2025 on:      =========         Host Frame: leak_device_buffer() in planted_leaks.cpp:47 [0x1a2b] in planted_leaks
    ...
    ========= LEAK SUMMARY: 1900544 bytes leaked in 5 allocations
    ========= ERROR SUMMARY: 5 errors

Byte counts may carry thousands separators. A frame without line
information has no `file:line`. ERROR SUMMARY ends every complete run; LEAK
SUMMARY, when printed, must add up with the blocks.
"""

import os
import re
import shutil

PREFIX = re.compile(r"^=========(?: (.*))?$")
LEAKED = re.compile(r"^Leaked ([\d,]+) bytes at (0x[0-9a-fA-F]+)")
SUMMARY = re.compile(r"^LEAK SUMMARY: ([\d,]+) bytes leaked in ([\d,]+) allocations")
ERRORS = re.compile(r"^ERROR SUMMARY: ")
# 2025 layout: `Host Frame: FUNC in FILE:LINE [0xOFF] in MODULE`, `in FILE:LINE` optional.
FRAME_NEW = re.compile(r"^Host Frame: ?(.*?)(?: in (\S+):(\d+))? ?\[0x[0-9a-fA-F]+\] in (.+)$")
# Older layout: `Host Frame:FILE:LINE:FUNC [0xOFF]` or `Host Frame:FUNC [0xOFF]`,
# the module on the next line (`in MODULE`).
FRAME_OLD = re.compile(r"^Host Frame:(?:([^\s:]+):(\d+):)?(.*?) ?\[0x[0-9a-fA-F]+\]$")


def find(explicit, cuda_root):
    """The compute-sanitizer to use: --sanitizer PATH, else PATH, else the
    toolkit's bin/. None when there is none (or --sanitizer none)."""
    if explicit == "none":
        return None
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise SystemExit("real-gpu: --sanitizer %s is not an executable file" % explicit)
        return os.path.abspath(explicit)
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for d in (os.path.join(cuda_root, "bin"), os.path.join(cuda_root, "compute-sanitizer")):
        path = os.path.join(d, "compute-sanitizer")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def command(sanitizer, argv):
    return [sanitizer, "--leak-check", "full"] + argv


class Leak:
    def __init__(self, size, address):
        self.bytes = size
        self.address = address
        self.frames = []  # (function, file or None, line or None, module or None)


class Parsed:
    def __init__(self):
        self.leaks = []
        self.summary = None  # (bytes, allocations) from LEAK SUMMARY
        self.banner = False  # the run printed `========= COMPUTE-SANITIZER`
        self.finished = False  # ... and its last line, ERROR SUMMARY

    def problem(self):
        """Why this output is not a complete leak list, or None."""
        if not self.banner:
            return "no compute-sanitizer output (the tool did not run)"
        if not self.finished:
            return "no ERROR SUMMARY line (compute-sanitizer did not finish)"
        got = (sum(l.bytes for l in self.leaks), len(self.leaks))
        if self.summary is not None and got != self.summary:
            return ("the listed leaks (%d B in %d) differ from LEAK SUMMARY (%d B in %d): "
                    "output truncated or not understood" % (got + self.summary))
        return None


def _number(text):
    return int(text.replace(",", ""))


def parse(text):
    """The leaks compute-sanitizer printed in `text` (stdout and stderr of
    its run, the program's own lines mixed in)."""
    out = Parsed()
    leak = None
    for raw in text.splitlines():
        m = PREFIX.match(raw)
        if not m:
            continue
        line = (m.group(1) or "").strip()
        if line == "COMPUTE-SANITIZER":
            out.banner = True
            continue
        if not line:
            leak = None  # a bare prefix ends a block
            continue
        m = LEAKED.match(line)
        if m:
            leak = Leak(_number(m.group(1)), int(m.group(2), 16))
            out.leaks.append(leak)
            continue
        m = SUMMARY.match(line)
        if m:
            out.summary = (_number(m.group(1)), _number(m.group(2)))
            leak = None
            continue
        if ERRORS.match(line):
            out.finished = True
            leak = None
            continue
        if leak is None or line.startswith("Saved host backtrace"):
            continue
        m = FRAME_NEW.match(line)
        if m:
            leak.frames.append((m.group(1).strip(), m.group(2),
                                int(m.group(3)) if m.group(3) else None, m.group(4).strip()))
            continue
        m = FRAME_OLD.match(line)
        if m:
            leak.frames.append((m.group(3).strip(), m.group(1),
                                int(m.group(2)) if m.group(2) else None, None))
            continue
        if line.startswith("in ") and leak.frames and leak.frames[-1][3] is None:
            f = leak.frames[-1]
            leak.frames[-1] = (f[0], f[1], f[2], line[3:].strip())
        else:
            leak = None  # another report (an API error) began without a separator
    return out
