"""The HTML report of a 1M-event history: how long `torchseal report --html`
takes, how large the page is, and how soon Chromium paints it (first
contentful paint, and the moment the page's script has drawn the timeline),
median of RUNS loads. Timings are measured here, never asserted in tests.

usage: html_paint.py TORCHSEAL_CLI TSEAL_FIXTURE [RUNS] [EVENTS]
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "html"))
from cdp import Browser  # noqa: E402


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    cli, fixture = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    events = sys.argv[4] if len(sys.argv) > 4 else "1000000"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("chromium is not installed", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="tseal-html-paint-")
    try:
        hist, page = os.path.join(tmp, "big.tseal"), os.path.join(tmp, "big.html")
        subprocess.run([fixture, hist, "--events", events], check=True, stdout=subprocess.DEVNULL)
        t = time.monotonic()
        subprocess.run([cli, "report", hist, "--html", page], check=True)
        gen = time.monotonic() - t
        fcp, ready = [], []
        for i in range(runs):
            b = Browser(chromium, os.path.join(tmp, "profile%d" % i))
            try:
                b.navigate("file://" + page)
                fcp.append(b.eval("performance.getEntriesByName('first-contentful-paint')[0]"
                                  ".startTime"))
                ready.append(b.eval("window.tsReadyMs"))
                if b.console:
                    print("console output: %s" % b.console[:5], file=sys.stderr)
                    return 1
            finally:
                b.close()
        print("%s events: history %.1f MB, page %.2f MB, written in %.2f s; "
              "first contentful paint %.0f ms, timeline drawn at %.0f ms (median of %d)" % (
                  events, os.path.getsize(hist) / 1e6, os.path.getsize(page) / 1e6, gen,
                  statistics.median(fcp), statistics.median(ready), runs))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
