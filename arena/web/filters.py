"""Jinja2 filters shared by the templates (the page scripts format the same way)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup

# CommonMark plus tables, raw HTML off (it is shown escaped, as text); markdown-it refuses
# javascript:, vbscript:, file: and data: links by itself. Remote images stay blocked by
# the pages' Content-Security-Policy (img-src 'self').
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")


def num(value: float | None, digits: int = 2) -> str:
    """A number with ``digits`` decimals; an em dash for missing values."""
    return "—" if value is None else f"{value:.{digits}f}"


def pct(value: float | None, digits: int = 1) -> str:
    """A fraction as a percentage (``0.625`` -> ``62.5%``)."""
    return "—" if value is None else f"{100 * value:.{digits}f}%"


def steps(value: int | None) -> str:
    """A step count, short: ``100000`` -> ``100k``, ``1500000`` -> ``1.5M``."""
    if value is None:
        return "—"
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    return f"{value / 1000:g}k" if value >= 1000 else str(value)


def probe_text(row: dict[str, Any]) -> str:
    """The exploitability column: ``85% [80–90%] @100k`` (an em dash without a probe)."""
    rate = row.get("probe_win_rate")
    if rate is None:
        return "—"
    return (f"{pct(rate, 0)} [{pct(row.get('probe_ci_low'), 0)}–{pct(row.get('probe_ci_high'), 0)}]"
            f" @{steps(row.get('probe_budget_env_steps'))}")


def rank_range(row: dict[str, Any]) -> str:
    """``3–5``: the ranks the 95% intervals allow; empty when the rank is certain."""
    lo, hi = row.get("rank_lo"), row.get("rank_hi")
    if lo is None or hi is None or lo == hi:
        return ""
    return f"{lo}–{hi}"


def when(iso: str | None) -> str:
    """An ISO timestamp as ``2024-05-01 12:00:03 UTC`` (scripts turn it into "3 s ago")."""
    if not iso:
        return "—"
    moment = datetime.fromisoformat(iso)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def heat(value: float | None) -> str:
    """Inline style of a win-rate cell: red (0) through neutral (0.5) to blue (1).

    Lightness stays in a band where dark text is readable, in light and dark themes.
    """
    if value is None:
        return "background: var(--surface-2); color: var(--muted)"
    v = min(max(value, 0.0), 1.0)
    hue = 8 if v < 0.5 else 212
    strength = abs(v - 0.5) * 2  # 0 at 0.5, 1 at the ends
    saturation = round(20 + 60 * strength)
    lightness = round(86 - 30 * strength)
    return f"background: hsl({hue} {saturation}% {lightness}%); color: #111"


def markdown(text: str | None) -> Markup:
    """Markdown written by a user (a competition's rules) as safe HTML: any HTML in it is escaped."""
    return Markup(_MARKDOWN.render(text or ""))


FILTERS: dict[str, Callable[..., str]] = {
    "num": num, "pct": pct, "rank_range": rank_range, "when": when, "heat": heat, "steps": steps,
    "probe_text": probe_text, "markdown": markdown,
}
