#!/usr/bin/env python3
"""The layering check (docs/architecture.md, "Layers"): every `#include "..."`
in the product's C and C++ sources must name a file in its own room or in a
room that room may use. Exits 1 naming each include that crosses the layers,
with the rule it breaks; 0 when none does.

    check.py [SOURCE_ROOT]

Rooms are folders. A sub-folder belongs to its room unless it is a room of
its own (shim/core/python and shim/core/unwind are shim/core's). Tests,
examples and benchmarks may include anything and are not checked.
"""
import os
import re
import sys

COMMON = ["common/util", "common/settings", "common/model", "common/format", "common/symbols",
          "common/live"]
REPORT = ["report/model", "report/input", "report/replay", "report/analysis", "report/render",
          "report/compare", "report/cli"]

# Room -> the rooms it may include besides itself, bottom to top.
MAY_USE = {
    "include": [],
    "common/util": [],
    "common/settings": ["common/util"],
    "common/model": ["common/util"],
    "common/format": ["common/util", "common/model"],
    "common/symbols": ["common/util", "common/model"],
    "common/live": ["common/util", "common/model", "common/format"],
}
# The report library: each stage uses the common contracts and the stages
# before it (model -> input -> replay -> analysis -> render -> compare -> cli).
for i, room in enumerate(REPORT):
    MAY_USE[room] = COMMON + REPORT[:i]
# The shim: the core uses only the contracts; the hooks (shim/intercept) and
# the sink (which drains the core's buffers and tables into the history) use
# the core; the CUPTI backend also uses the hooks' symbol resolution; the
# runtime starts and stops all of them and writes reports through the report
# library (never the CLI).
MAY_USE["shim/core"] = COMMON + ["include"]
MAY_USE["shim/intercept"] = COMMON + ["shim/core"]
MAY_USE["cupti_backend"] = COMMON + ["shim/core", "shim/intercept"]
MAY_USE["shim/sink"] = COMMON + ["shim/core"]
MAY_USE["shim/runtime"] = (COMMON + ["include", "shim/core", "shim/intercept", "shim/sink",
                                     "cupti_backend"] + REPORT[:-1])
MAY_USE["shim/bundled"] = COMMON

ROOMS = sorted(MAY_USE, key=len, reverse=True)
CHECKED = ("common", "report", "shim", "cupti_backend", "include")
SOURCE = (".h", ".hpp", ".c", ".cc", ".cpp", ".def", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def room_of(path):
    for room in ROOMS:
        if path == room or path.startswith(room + "/"):
            return room
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "..", ".."))
    bad, files = [], 0
    for top in CHECKED:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(SOURCE):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                room = room_of(path)
                files += 1
                if room is None:
                    bad.append(f"{path}: in no room of the layering (add it to tests/layering/check.py "
                               "and docs/architecture.md)")
                    continue
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or "/" not in m.group(1):
                            continue  # a system header, or one beside the file
                        target = m.group(1)
                        if not os.path.exists(os.path.join(root, target)):
                            continue  # generated (install_layout.h) or a system header
                        to = room_of(target)
                        if to == room or to in MAY_USE[room]:
                            continue
                        bad.append(f"{path}:{lineno}: includes {target}: {room} may use only "
                                   f"{', '.join(MAY_USE[room]) or 'itself'}")
    for b in bad:
        print("layering: " + b)
    print(f"layering: {files} files, {len(bad)} include(s) across the layers")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
