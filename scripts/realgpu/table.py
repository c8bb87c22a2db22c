"""The comparison table: one row per program."""

HEADER = ("program", "expected", "torchseal", "compute-sanitizer", "agree?", "unwinder",
          "lines?")


def render(rows, header=HEADER):
    """rows: tuples of strings, one per column of `header`. Returns the table's lines."""
    table = [header] + [tuple(r) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = []
    for n, r in enumerate(table):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines
