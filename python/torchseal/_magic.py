"""IPython: ``%load_ext torchseal``, then ``%%torchseal`` on a cell.

The cell runs inside a torchseal interval (torchseal.start/stop), and its
report is shown under the cell as HTML: growing sites with their hint and
holders, unrecovered OOMs, what the cell leaked, and what it left held by
Python objects. The cell's source is saved as a file, so report lines and
hints point into it (``cell-3.py:5`` is line 5 of that cell).

    %%torchseal [--output DIR] [--text]
"""

import argparse
import html
import os
import shlex
import tempfile

from torchseal import _tracker

_counter = 0


def _parse(line):
    p = argparse.ArgumentParser(prog="%%torchseal", add_help=False)
    p.add_argument("--output", default=None,
                   help="directory for the cells' sources and reports")
    p.add_argument("--text", action="store_true", help="show the text report instead")
    return p.parse_args(shlex.split(line))


def _output_dir(chosen):
    d = chosen or os.path.join(tempfile.gettempdir(), f"torchseal-cells-{os.getpid()}")
    os.makedirs(d, exist_ok=True)
    return d


def _size(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _where(entry):
    """The user's line first: the innermost Python frame outside torch and
    the standard library, else the innermost native frame."""
    py = entry.get("python_frames") or []
    for f in py:
        path = f.get("file") or ""
        if "/torch/" not in path and "/lib/python3" not in path:
            return f"{f.get('function', '?')} at {os.path.basename(path)}:{f.get('line', 0)}"
    if py:
        f = py[0]
        return f"{f.get('function', '?')} at {os.path.basename(f.get('file') or '?')}:{f.get('line', 0)}"
    for f in entry.get("frames") or []:
        if f.get("function"):
            loc = f" at {os.path.basename(f['file'])}:{f.get('line', 0)}" if f.get("file") else ""
            return f["function"] + loc
    return "?"


def _holders(entry):
    rows = []
    for h in (entry.get("holders") or [])[:3]:
        chain = " \u2192 ".join(h.get("chain") or [])
        rows.append(f"<li><code>{html.escape(chain)}</code> ({_size(h.get('bytes', 0))})</li>")
    return f"<ul style='margin:2px 0'>{''.join(rows)}</ul>" if rows else ""


def _hint(entry):
    h = entry.get("hint")
    if not h:
        return ""
    where = f" ({os.path.basename(h.get('file') or '')}:{h.get('line', 0)})" if h.get("file") else ""
    return f"<div><b>hint</b>: {html.escape(h.get('message', ''))}{html.escape(where)}</div>"


def _table(title, entries, amount):
    if not entries:
        return ""
    rows = "".join(
        f"<tr><td style='text-align:right'>{html.escape(amount(e))}</td>"
        f"<td><code>{html.escape(_where(e))}</code>{_hint(e)}{_holders(e)}</td></tr>"
        for e in entries)
    return f"<h4 style='margin:8px 0 2px'>{html.escape(title)}</h4><table>{rows}</table>"


def render_html(report, cell_name):
    """The cell's report (a parsed P.json) as an HTML fragment."""
    s = report.get("summary", {})
    growth = report.get("growth") or []
    ooms = [o for o in report.get("ooms") or [] if not o.get("recovered")]
    leaks = report.get("leaks") or []
    reachable = report.get("reachable") or []
    verdict = ("growing memory" if growth else "out of memory" if ooms
               else "leaked memory" if leaks else "no leaks")
    color = "#2e7d32" if verdict == "no leaks" else "#c62828"
    head = (f"<div style='font-weight:bold;color:{color}'>torchseal: {verdict} in "
            f"{html.escape(cell_name)}</div><div>leaked {_size(s.get('leaked_bytes', 0))}, "
            f"held by Python objects {_size(s.get('reachable_bytes', 0))}, "
            f"cached by PyTorch {_size(s.get('cached_bytes', 0))}, "
            f"pre-existing frees {s.get('preexisting_frees', 0)}</div>")
    body = (
        _table("Growing sites", growth,
               lambda e: f"+{_size(e.get('bytes_per_step', 0))}/step")
        + _table("Out of memory", ooms, lambda e: _size(e.get("requested_bytes", 0)))
        + _table("Leaked (no Python object holds it)", leaks, lambda e: _size(e.get("bytes", 0)))
        + _table("Held by Python objects", reachable, lambda e: _size(e.get("bytes", 0))))
    return f"<div class='torchseal-report' style='font-size:13px'>{head}{body}</div>"


def torchseal_cell(line, cell):
    """%%torchseal: run the cell under torchseal and show its report."""
    global _counter
    from IPython import get_ipython
    from IPython.display import HTML, Pretty, display

    args = _parse(line)
    shell = get_ipython()
    out = _output_dir(args.output)
    _counter += 1
    name = f"cell-{_counter}"
    source = os.path.join(out, name + ".py")
    with open(source, "w", encoding="utf-8") as f:
        f.write(cell)
    code = compile(cell, source, "exec")
    _tracker.start(os.path.join(out, name))
    try:
        exec(code, shell.user_ns)  # noqa: S102 - the user's own cell
    finally:
        result = _tracker.stop()
        if args.text:
            display(Pretty(result.text))
        else:
            display(HTML(render_html(result.report, name + ".py")))


def load_ipython_extension(ipython):
    ipython.register_magic_function(torchseal_cell, magic_kind="cell", magic_name="torchseal")
