"""Leak sets: {site: (bytes, allocations)}, a site being `file:line` of the
allocating call in the example's source (its `// LEAK-SITE:` line).

The expectations come from the example's `// EXPECT:` lines, parsed by
tests/integration/run.py (the same Expectations object its simcuda tests
check); torchseal's from its report; compute-sanitizer's from its parsed
leak blocks, each attributed to its first host frame in the example's source.
"""

import os


def expected(exp):
    return {"%s:%d" % (exp.basename, exp.sites[l["site"]]): (l["bytes"], l["allocations"])
            for l in exp.leaks}


def _add(sites, key, size, count):
    b, n = sites.get(key, (0, 0))
    sites[key] = (b + size, n + count)


def from_report(report):
    sites = {}
    for leak in report.get("leaks") or []:
        frames = leak.get("frames") or [{}]
        top = frames[0]
        key = "%s:%s" % (os.path.basename(top.get("file") or "?"), top.get("line"))
        _add(sites, key, leak.get("bytes", 0), leak.get("allocations", 0))
    return sites


def from_sanitizer(parsed, source_basename):
    """A leak whose backtrace never reaches the source is keyed by its first
    named frame, so it still shows (and disagrees) in the table."""
    sites = {}
    for leak in parsed.leaks:
        key = None
        for function, file, line, _module in leak.frames:
            if file and os.path.basename(file) == source_basename and line:
                key = "%s:%d" % (source_basename, line)
                break
        if key is None:
            named = [f[0] for f in leak.frames if f[0]]
            key = "%s (no %s frame)" % (named[-1] if named else "?", source_basename)
        _add(sites, key, leak.bytes, 1)
    return sites


def summary(sites):
    """One table cell: `3 sites, 1900544 B in 5`."""
    if not sites:
        return "none"
    size = sum(b for b, _ in sites.values())
    count = sum(n for _, n in sites.values())
    return "%d site%s, %d B in %d" % (len(sites), "" if len(sites) == 1 else "s", size, count)


def differences(want, got, who):
    """Lines naming each site where `got` differs from `want`."""
    lines = []
    for key in sorted(set(want) | set(got)):
        w, g = want.get(key), got.get(key)
        if w == g:
            continue
        show = lambda v: "%d B in %d" % v if v else "nothing"
        lines.append("%s: expected %s, %s reports %s" % (key, show(w), who, show(g)))
    return lines
