#!/usr/bin/env python3
"""Self-test of run.py's report checker: a correct report for
examples/planted_leaks.cpp must pass, and each kind of wrong report must fail
with a message naming the difference. This keeps the integration tests honest:
they cannot silently pass a broken report.

    selftest.py EXAMPLES_SRC_DIR
"""

import copy
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402
from harness import Result  # noqa: E402  (run.py put tests/ on the path)


def main(argv):
    source = os.path.normpath(os.path.abspath(os.path.join(argv[1], "planted_leaks.cpp")))
    exp = R.Expectations(source)
    pid = 4242

    def frame(fn, site):
        return {"function": fn + "()", "file": source,
                "line": exp.sites[site], "module": "planted_leaks", "address": "0x1"}

    def leak(kind, api, nbytes, allocs, fn, site):
        return {"kind": kind, "api": api, "device": 0, "bytes": nbytes,
                "allocations": allocs, "detected_at": "exit",
                "frames": [frame(fn, site)], "python_frames": []}

    good = {
        "format": "torchseal-report", "version": 1, "trigger": "exit",
        "process": {"pid": pid},
        "summary": {"leaked_bytes": 1900544, "leaked_allocations": 5, "leak_sites": 3,
                    "events": 18, "peak_bytes": 1933312},
        "leaks": [leak("device", "cudaMalloc", 1048576, 1, "leak_device_buffer", "device"),
                  leak("stream-ordered", "cudaMallocAsync", 786432, 3,
                       "leak_async_in_loop", "async"),
                  leak("host-pinned", "cudaMallocHost", 65536, 1,
                       "leak_pinned_staging", "pinned")],
        "ooms": [{"api": "cudaMalloc", "requested_bytes": 1125899906842624, "device": 0,
                  "live_bytes": 1900544, "frames": [frame("request_one_pebibyte", "pebibyte")],
                  "top_sites": []}],
        "invalid_frees": [],
    }
    good_txt = ("==%d==torchseal: detected memory leaks\n"
                "Direct leak of 1048576 byte(s) in leak_device_buffer()\n"
                "Direct leak of 786432 byte(s) in leak_async_in_loop()\n"
                "Direct leak of 65536 byte(s) in leak_pinned_staging()\n\n"
                "SUMMARY: torchseal: 1900544 byte(s) leaked in 5 allocation(s).\n" % pid)

    def failures(report, txt=good_txt, stdout="calls=18\n"):
        with tempfile.TemporaryDirectory(prefix="tseal-selftest-") as tmp:
            prefix = os.path.join(tmp, "p")
            with open(prefix + ".json", "w") as f:
                json.dump(report, f)
            with open(prefix + ".txt", "w") as f:
                f.write(txt)
            check = R.Checker("selftest")
            result = Result(["planted_leaks"], pid, 0, stdout, "", 0.0)
            R.check_report(check, exp, report, result, pid, prefix)
            return check.failures

    def mutate(fn):
        m = copy.deepcopy(good)
        fn(m)
        return m

    def drop_oom(m):
        m["ooms"] = []

    def extra_leak(m):
        extra = copy.deepcopy(m["leaks"][2])
        extra["frames"][0]["line"] = 1
        m["leaks"].append(extra)

    def split_site(m):
        # the loop's three allocations reported as two sites
        a = m["leaks"][1]
        b = copy.deepcopy(a)
        a["bytes"], a["allocations"] = 524288, 2
        b["bytes"], b["allocations"] = 262144, 1
        m["leaks"].insert(2, b)

    cases = [
        ("allocations", mutate(lambda m: m["leaks"][1].update(allocations=1))),
        ("bytes", mutate(lambda m: m["leaks"][0].update(bytes=1048577))),
        ("kind", mutate(lambda m: m["leaks"][2].update(kind="device"))),
        ("api", mutate(lambda m: m["leaks"][1].update(api="cudaMalloc"))),
        ("line", mutate(lambda m: m["leaks"][0]["frames"][0].update(
            line=m["leaks"][0]["frames"][0]["line"] + 1))),
        ("file", mutate(lambda m: m["leaks"][0]["frames"][0].update(file="other.cpp"))),
        ("file as compiled", mutate(lambda m: m["leaks"][0]["frames"][0].update(
            file="../examples/planted_leaks.cpp"))),
        ("file not normalised", mutate(lambda m: m["leaks"][0]["frames"][0].update(
            file=os.path.join(os.path.dirname(source), "..", "examples",
                              "planted_leaks.cpp")))),
        ("function", mutate(lambda m: m["leaks"][0]["frames"][0].update(
            function="cudaMalloc"))),
        ("no frames", mutate(lambda m: m["leaks"][0].update(frames=[]))),
        ("detected_at", mutate(lambda m: m["leaks"][0].update(detected_at="context-teardown"))),
        ("extra leak", mutate(extra_leak)),
        ("split site", mutate(split_site)),
        ("order", mutate(lambda m: m["leaks"].reverse())),
        ("summary bytes", mutate(lambda m: m["summary"].update(leaked_bytes=0))),
        ("summary allocations", mutate(lambda m: m["summary"].update(leaked_allocations=3))),
        ("summary events", mutate(lambda m: m["summary"].update(events=17))),
        ("peak wrapped", mutate(lambda m: m["summary"].update(peak_bytes=2 ** 64 - 400000))),
        ("peak below leaks", mutate(lambda m: m["summary"].update(peak_bytes=32768))),
        ("missing oom", mutate(drop_oom)),
        ("oom size", mutate(lambda m: m["ooms"][0].update(requested_bytes=1 << 40))),
        ("oom line", mutate(lambda m: m["ooms"][0]["frames"][0].update(line=1))),
        ("invalid free", mutate(lambda m: m["invalid_frees"].append(
            {"api": "cudaFree", "address": "0x1", "frames": []}))),
        ("pid", mutate(lambda m: m["process"].update(pid=1))),
        ("format", mutate(lambda m: m.update(format="other"))),
        ("trigger", mutate(lambda m: m.update(trigger="signal"))),
    ]

    problems = []
    got = failures(good)
    if got:
        problems.append("a correct report was rejected:\n  " + "\n  ".join(got))
    for name, report in cases:
        if not failures(report):
            problems.append("wrong report accepted: %s" % name)
    txt_cases = [
        ("txt last line", good_txt.replace("1900544 byte(s) leaked", "0 byte(s) leaked")),
        ("txt pid", good_txt.replace("==%d==" % pid, "==1==")),
        ("txt missing function", good_txt.replace("leak_pinned_staging()", "?")),
        ("txt empty", ""),
    ]
    for name, txt in txt_cases:
        if not failures(good, txt=txt):
            problems.append("wrong P.txt accepted: %s" % name)
    if not failures(good, stdout="calls=19\n"):
        problems.append("events mismatch with the program's calls= line accepted")

    total = 1 + len(cases) + len(txt_cases) + 1
    if problems:
        print("\n".join("FAIL: " + p for p in problems))
        print("%d of %d checker self-tests failed" % (len(problems), total))
        return 1
    print("PASS: %d checker self-tests" % total)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
