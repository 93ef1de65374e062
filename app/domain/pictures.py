"""A catalog card's picture: the model's own output, one recorded matrix drawn small (a generated digit in ink on
paper, an attention map on the charts' diverging scale), served as `picture.svg` beside the manifest."""

import math
from html import escape

from .labs.fields import DeclarationError

SIDE = 160  # px: the card's picture
LARGEST = 64  # rows or columns: a matrix past this (a layer's 1,536 units) is no picture at a card's size
SMALLEST = 3
# The charts' diverging scale, as site.css's custom properties set it for the page (--chart-zero, --mint, --rust):
# a file has no stylesheet to read them from (tests/test_pictures.py holds the two equal).
ZERO, POSITIVE, NEGATIVE = "#f7f7f5", "#1f8a6b", "#b4532a"


def _drawable(matrix: dict) -> bool:
    rows = matrix.get("values") or []
    if not rows or not all(isinstance(row, list) and row for row in rows):
        return False
    return SMALLEST <= len(rows) <= LARGEST and SMALLEST <= len(rows[0]) <= LARGEST \
        and all(len(row) == len(rows[0]) for row in rows)


def chosen(manifest: dict, declared: dict | None) -> dict | None:
    """The matrix the card shows: the declared one ({case, item}; DeclarationError where the recording has no such
    matrix to draw), else the first case's first matrix of at least 3×3 and at most 64×64, else None."""
    cases = manifest["experiment"]["cases"]
    if declared is not None:
        case = next((c for c in cases if c["id"] == declared["case"]), None)
        matrix = next((m for m in (case or {}).get("matrices", []) if m.get("key") == declared["item"]), None)
        if matrix is None or not _drawable(matrix):
            raise DeclarationError(f"display.picture: the recording has no matrix {declared['item']!r} of 3×3 to 64×64 "
                                   f"in a case {declared['case']!r}")
        return matrix
    return next((m for m in (cases[0].get("matrices", []) if cases else []) if _drawable(m)), None)


def _mix(t: float, to: str) -> str:
    start = [int(ZERO[i:i + 2], 16) for i in (1, 3, 5)]
    end = [int(to[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(start, end, strict=True))


def colour(value: float | None, limit: float, ink: float | None) -> str:
    """A cell's colour: grey from paper (0) to full ink at `ink`, else the diverging scale at `limit`."""
    if value is None or not math.isfinite(value):
        return "#999999"
    if ink is not None:
        grey = round(255 * (1 - min(1.0, max(0.0, value) / ink)))
        return f"#{grey:02x}{grey:02x}{grey:02x}"
    return _mix(min(1.0, abs(value) / limit) if limit > 0 else 0.0, NEGATIVE if value < 0 else POSITIVE)


def picture_svg(matrix: dict, ink: float | None = None) -> bytes:
    """The matrix as a standalone SVG, its cells square, `SIDE` px on its longer side, its label as its title."""
    rows = matrix["values"]
    height, width = len(rows), len(rows[0])
    cell = SIDE / max(height, width)
    limit = max((abs(v) for row in rows for v in row if v is not None and math.isfinite(v)), default=0.0)
    cells = "".join(f'<rect x="{j * cell:.2f}" y="{i * cell:.2f}" width="{cell:.2f}" height="{cell:.2f}" '
                    f'fill="{colour(v, limit, ink)}"/>' for i, row in enumerate(rows) for j, v in enumerate(row))
    label = escape(matrix.get("label", ""))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width * cell:.2f} {height * cell:.2f}" '
            f'width="{width * cell:.0f}" height="{height * cell:.0f}" role="img" aria-label="{label}">'
            f'<title>{label}</title>{cells}</svg>').encode()
