"""Read model of a training league's page: its strategy timeline, drawn as inline SVG.

The timeline (``league_generations``, written by :mod:`arena.training.phases`) has,
per generation, the rate of each strategy phase and the ratings of the generation's
snapshots per role. The page shows it as two charts sharing the generation axis
(phase rates in ``[0, 1]``; TrueSkill mu per role with +-sigma bars), a table with a
bar per rate, and for each phase a link to the first recorded match where it happened.
A league with exploiters also gets, apart from the mains, each exploiter's entries per
generation: its score against the other role's main, its edge over its own main, and
whether it was frozen into the pools (as which snapshot) or reset.
Chart geometry is computed here, so the page is plain server-rendered SVG: no script.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from arena.storage.db import repositories as repo
from envs.errors import UnknownEnv
from envs.registry import get_spec
from league.evaluation.phases import order_phases

# Chart box in SVG user units; the plot area leaves room for the axes' labels.
WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 12, 30
PAD = 10  # keeps the first and last generation's dots off the plot's edges


def league_page_data(session: Session, league_id: int) -> dict[str, Any] | None:
    """Everything the league page shows, or ``None`` if there is no such league."""
    league = repo.get_league(session, league_id)
    if league is None:
        return None
    rows = repo.league_generations(session, league_id)
    phases = order_phases(p for r in rows for p in r.phase_rates)
    try:
        spec_roles = list(dict.fromkeys(get_spec(league.env_id).roles))
    except UnknownEnv:
        spec_roles = []
    rated = {role for r in rows for role in r.ratings}
    roles = [r for r in spec_roles if r in rated] + sorted(rated - set(spec_roles))
    firsts = {}
    for r in rows:
        for phase, match_id in r.first_matches.items():
            firsts[phase] = {"generation": r.generation, "match_id": match_id}
    generations = [r.generation for r in rows]
    exploiters = [{"generation": r.generation, **e} for r in rows for e in r.exploiters]
    return {
        "id": league.id, "name": league.name, "env_id": league.env_id, "created_at": league.created_at,
        "phases": phases, "roles": roles,
        "rows": [{"generation": r.generation, "episodes": r.episodes, "rates": r.phase_rates,
                  "ratings": r.ratings, "firsts": sorted(r.first_matches)} for r in rows],
        "firsts": [{"phase": p, **firsts[p]} for p in phases if p in firsts],
        "rate_chart": rate_chart(generations, {p: [r.phase_rates.get(p) for r in rows] for p in phases}),
        "rating_chart": rating_chart(generations, {role: [r.ratings.get(role) for r in rows] for role in roles}),
        "exploiters": exploiters,
        "exploiter_table": exploiter_table(exploiters, spec_roles),
    }


def exploiter_table(entries: list[dict[str, Any]], spec_roles: list[str]) -> dict[str, Any]:
    """The exploiters' entries as a table: a column per exploiter (role in the env's order, then
    index), a row per generation that has entries; a cell is the entry or ``None``."""
    order = {r: i for i, r in enumerate(spec_roles)}
    columns = sorted({(e["role"], e["index"]) for e in entries},
                     key=lambda c: (order.get(c[0], len(order)), c[0], c[1]))
    cells: dict[int, dict[tuple[str, int], dict[str, Any]]] = {}
    for e in entries:
        cells.setdefault(e["generation"], {})[(e["role"], e["index"])] = e
    return {"columns": [{"role": role, "index": index} for role, index in columns],
            "rows": [{"generation": g, "cells": [cells[g].get(c) for c in columns]} for g in sorted(cells)]}


def leagues_of(session: Session, env_id: str) -> list[dict[str, Any]]:
    """The env's leagues (for links from its leaderboard page)."""
    return [{"id": x.id, "name": x.name} for x in repo.list_leagues(session, env_id)]


def _x_scale(generations: list[int]) -> Any:
    lo, hi = (min(generations), max(generations)) if generations else (0, 1)
    span = max(hi - lo, 1)
    return lambda g: round(LEFT + PAD + (g - lo) / span * (WIDTH - LEFT - RIGHT - 2 * PAD), 1)


def _y_scale(lo: float, hi: float) -> Any:
    span = (hi - lo) or 1.0
    return lambda v: round(TOP + (hi - v) / span * (HEIGHT - TOP - BOTTOM), 1)


def _x_ticks(generations: list[int], x: Any) -> list[dict[str, Any]]:
    step = max(1, len(generations) // 10)
    return [{"x": x(g), "label": str(g)} for g in generations[::step]]


def rate_chart(generations: list[int], series: dict[str, list[float | None]]) -> dict[str, Any]:
    """Polylines of each phase's rate per generation, on a ``[0, 1]`` axis."""
    x, y = _x_scale(generations), _y_scale(0.0, 1.0)
    lines = []
    for i, (phase, values) in enumerate(series.items()):
        pts = [(g, v) for g, v in zip(generations, values) if v is not None]
        lines.append({"name": phase, "color": i % 6, "points": " ".join(f"{x(g)},{y(v)}" for g, v in pts),
                      "dots": [{"x": x(g), "y": y(v), "g": g, "v": v} for g, v in pts]})
    return {"width": WIDTH, "height": HEIGHT, "lines": lines, "x_ticks": _x_ticks(generations, x),
            "y_ticks": [{"y": y(v), "label": f"{v:g}"} for v in (0.0, 0.25, 0.5, 0.75, 1.0)],
            "plot": {"x0": LEFT, "x1": WIDTH - RIGHT, "y0": TOP, "y1": HEIGHT - BOTTOM}}


def rating_chart(generations: list[int], series: dict[str, list[list[float] | None]]) -> dict[str, Any]:
    """Polylines of each role's mu per generation, with +-sigma bars."""
    values = [v for vs in series.values() for v in vs if v is not None]
    lo = min((m - s for m, s in values), default=0.0)
    hi = max((m + s for m, s in values), default=1.0)
    lo, hi = (lo - 1.0, hi + 1.0) if hi - lo < 2.0 else (lo, hi)
    x, y = _x_scale(generations), _y_scale(lo, hi)
    lines = []
    for i, (role, vals) in enumerate(series.items()):
        pts = [(g, v) for g, v in zip(generations, vals) if v is not None]
        lines.append({"name": role, "color": i % 6,
                      "points": " ".join(f"{x(g)},{y(m)}" for g, (m, _) in pts),
                      "bars": [{"x": x(g), "y0": y(m - s), "y1": y(m + s), "y": y(m), "g": g, "mu": m, "sigma": s}
                               for g, (m, s) in pts]})
    ticks = [lo + (hi - lo) * k / 4 for k in range(5)]
    return {"width": WIDTH, "height": HEIGHT, "lines": lines, "x_ticks": _x_ticks(generations, x),
            "y_ticks": [{"y": y(v), "label": f"{v:.1f}"} for v in ticks],
            "plot": {"x0": LEFT, "x1": WIDTH - RIGHT, "y0": TOP, "y1": HEIGHT - BOTTOM}}
