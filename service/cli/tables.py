"""Tables on the terminal: a header row and columns padded to their widest cell, so a person can read them
(a script reads `--json` or `subscribers export`)."""

from collections.abc import Sequence


def aligned(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """The lines of the table: the header, then each row; an empty cell is shown as `-`; the last column is
    not padded."""
    cells = [list(header), *([str(c) if str(c) else "-" for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=False)) + "  " * (len(row) > 1) + row[-1]
        for row in cells
    ]
