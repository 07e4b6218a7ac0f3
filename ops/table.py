"""Plain-text tables for terminal and CI logs (no dependency)."""

from collections.abc import Sequence


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces, one header line and a rule."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    return "\n".join(lines)


def ms(seconds: float | None) -> str:
    """Seconds as whole milliseconds, or '-' when not measured."""
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"
