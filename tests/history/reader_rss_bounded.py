#!/usr/bin/env python3
"""Reader memory follows the live state, not the file length.

Two histories from tseal_churn with the same stacks, symbols and live set,
one with 10x the events and steps of the other, go through `torchseal
report` and both exporters. Each command's peak RSS on the long history must
stay within 1.3x + 4 MiB of the short one's: per-event, per-pass or per-step
memory (or per-site memory that only a long run reaches, such as the growth
analysis) shows up as a difference far above that.

usage: reader_rss_bounded.py TSEAL_CHURN PEAK_RSS TORCHSEAL_CLI
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import run  # noqa: E402

SHORT = (100_000, 5)     # events, steps
LONG = (1_000_000, 50)
RATIO, SLACK_KIB = 1.3, 4096


def peak_rss_kib(peak_rss, cmd):
    """cmd's own peak RSS in KiB, measured by the peak_rss helper."""
    r = run([peak_rss] + cmd, None, timeout=None)
    if r.returncode not in (0, 1):  # report: 1 = leaks found (expected here)
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}: {r.stderr[-2000:]}")
    return int(r.stdout.split()[-1])


def main():
    churn, peak_rss, cli = sys.argv[1:4]
    tmp = tempfile.mkdtemp(prefix="tseal-rss-")
    try:
        files = {}
        for name, (events, steps) in (("short", SHORT), ("long", LONG)):
            files[name] = os.path.join(tmp, name + ".tseal")
            made = run([churn, files[name], str(events), str(steps)], None, timeout=None)
            if made.returncode != 0:
                sys.exit("FAIL: tseal_churn failed\n" + made.describe())
        out = os.path.join(tmp, "out")
        commands = {
            "report": lambda f: [cli, "report", f, "--format", "json"],
            "export --memory-viz": lambda f: [cli, "export", f, "--memory-viz", out],
            "export --perfetto": lambda f: [cli, "export", f, "--perfetto", out],
        }
        failed = []
        for what, cmd in commands.items():
            rss = {name: peak_rss_kib(peak_rss, cmd(path)) for name, path in files.items()}
            limit = RATIO * rss["short"] + SLACK_KIB
            verdict = "ok" if rss["long"] <= limit else "FAIL"
            print(f"{verdict}: {what}: peak RSS {rss['short']} KiB on {SHORT[0]} events, "
                  f"{rss['long']} KiB on {LONG[0]} events (limit {limit:.0f} KiB)")
            if verdict != "ok":
                failed.append(what)
            if os.path.exists(out):
                os.unlink(out)
        if failed:
            sys.exit("FAIL: reader memory grows with the history's length: " + ", ".join(failed))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
