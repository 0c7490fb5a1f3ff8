"""Datasets from the match log: an env's recorded matches as offline-RL data (``arena export``).

The log stores seeds and actions; :mod:`~arena.datasets.resimulate` re-simulates what
every seat observed (the vectorized core for board games, many matches at once), checks
each match against its record, and the writers lay the result out as Parquet
(:mod:`~arena.datasets.parquet`: steps, matches, agents) or as a Minari dataset
(:mod:`~arena.datasets.minari_format`). The guide: ``docs/datasets.md``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import numpy as np

from arena.datasets.log import BoardAgents, LogChunk, read_agents, read_log
from arena.datasets.resimulate import Steps, resimulate_boards, resimulate_matches
from arena.storage.db.connection import Sessions
from envs.board_core import BoardCore
from envs.registry import get_spec, make_vector_core
from envs.spec import EnvSpec

__all__ = ["ExportReport", "export_board", "exported_seats"]

Format = Literal["parquet", "minari"]
FORMATS = ("parquet", "minari")


@dataclass
class ExportReport:
    """What an export wrote.

    Attributes:
        env_id: The env.
        roles: The exported roles.
        matches: Matches read from the log.
        exported: Matches whose steps were written.
        steps: Step rows written (decisions of the exported seats).
        skipped: Why the other matches were left out, with counts.
        episodes: Minari episodes written (``minari`` format).
        seconds: Wall time of the export.
        files: What was written.
    """

    env_id: str
    roles: list[str]
    matches: int = 0
    exported: int = 0
    steps: int = 0
    skipped: Counter = field(default_factory=Counter)
    episodes: int = 0
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)

    @property
    def matches_per_s(self) -> float:
        return self.matches / max(self.seconds, 1e-9)


def exported_seats(spec: EnvSpec, role: str | None) -> tuple[list[str], np.ndarray]:
    """The roles and the ``(seats,)`` bool mask of the seats an export writes.

    Raises:
        ValueError: An unknown role, or several roles observing different shapes (one
            steps table holds one observation shape: export them one role at a time).
    """
    if role:
        if role not in spec.roles:
            raise ValueError(f"{spec.env_id} has roles {', '.join(dict.fromkeys(spec.roles))}; got --role {role}")
        teams = [t for t, r in enumerate(spec.roles) if r == role]
    else:
        teams = list(range(spec.num_teams))
    shapes = {tuple(spec.team_obs_shape(t)) for t in teams}
    if len(shapes) > 1:
        raise ValueError(f"the roles of {spec.env_id} observe different shapes ({sorted(shapes)}); "
                         f"export one role at a time with --role ({', '.join(dict.fromkeys(spec.roles))})")
    keep = np.zeros(spec.num_seats, dtype=bool)
    for t in teams:
        keep[list(spec.teams[t])] = True
    return list(dict.fromkeys(spec.roles[t] for t in teams)), keep


def resimulate(spec: EnvSpec, core: BoardCore | None, chunk: LogChunk, keep: np.ndarray, space) -> Steps:
    """A chunk's steps: on the vectorized core where the env has one, else through its PettingZoo env."""
    if core is not None:
        return resimulate_boards(spec, core, chunk, keep)
    return resimulate_matches(spec, chunk, keep, tuple(space.shape), space.dtype)


def export_board(sessions: Sessions, env_id: str, out: str | Path, fmt: Format = "parquet",
                 role: str | None = None, chunk: int = 8192, limit: int | None = None, vectorized: bool = True,
                 on_progress: Callable[[ExportReport], None] | None = None) -> ExportReport:
    """Export the recorded matches of ``env_id`` (all of its log) to ``out``.

    Args:
        sessions: The Arena database.
        env_id: The env whose board to export.
        out: Output folder (created).
        fmt: ``parquet`` or ``minari`` (docs/datasets.md).
        role: Only this role's seats (default: every seat).
        chunk: Matches read and re-simulated at a time.
        limit: Only the first ``limit`` matches of the log.
        vectorized: Re-simulate board games on their vectorized core (``False``: one match
            at a time through the PettingZoo env, as for every other env; the benchmark's baseline).
        on_progress: Called after every chunk with the report so far.
    """
    from arena.gym.env import observation_space

    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    spec = get_spec(env_id)
    roles, keep = exported_seats(spec, role)
    space = observation_space(spec, spec.seat_team[int(np.flatnonzero(keep)[0])])
    core = make_vector_core(env_id) if vectorized else None
    agents = read_agents(sessions, env_id)
    report = ExportReport(env_id, roles)
    started = time.perf_counter()
    writers = _writers(Path(out), spec, fmt, roles, space, agents)
    for part in read_log(sessions, env_id, chunk, limit):
        steps = resimulate(spec, core if isinstance(core, BoardCore) else None, part, keep, space)
        for writer in writers:
            writer.add(part, steps)
        report.matches += len(part)
        report.exported += int(steps.valid.sum())
        report.steps += len(steps)
        report.skipped.update(r for r in steps.invalid_reason if r)
        report.seconds = time.perf_counter() - started
        if on_progress is not None:
            on_progress(report)
    _finish(writers, report, spec, space, Path(out))
    report.seconds = time.perf_counter() - started
    return report


def _writers(out: Path, spec: EnvSpec, fmt: str, roles: list[str], space, agents: BoardAgents) -> list:
    from arena.datasets.parquet import ParquetWriter

    parquet = ParquetWriter(out, spec, tuple(space.shape), space.dtype, agents)
    if fmt == "parquet":
        return [parquet]
    if len(roles) != 1:
        raise ValueError(f"a Minari dataset holds one role: pass --role ({', '.join(roles)})")
    from arena.datasets.minari_format import MinariWriter

    # Minari beside the Parquet tables: its episodes join them on match_seq and agent_id.
    return [parquet, MinariWriter(out, spec, roles[0], space, agents)]


def _finish(writers: list, report: ExportReport, spec: EnvSpec, space, out: Path) -> None:
    parquet, *minari = writers
    for writer in minari:
        report.episodes = writer.episodes
        report.skipped.update({"minari: illegal final action outside the action space": writer.left_out}
                              if writer.left_out else {})
        report.files.append(str(out / writer.id))
    description = {
        "format": "arena-dataset", "version": 1, "env": spec.env_id, "roles": report.roles,
        "seats": list(spec.seats), "teams": [list(t) for t in spec.teams], "team_roles": list(spec.roles),
        "obs_shape": list(space.shape), "obs_dtype": np.dtype(space.dtype).name, "num_actions": spec.num_actions,
        "matches": report.matches, "exported_matches": report.exported, "steps": report.steps,
        "skipped": dict(report.skipped), "minari_dataset": [w.id for w in minari],
        "exported_at": datetime.now(UTC).isoformat(),
    }
    parquet.close(description)
    report.files[:0] = [str(out / name) for name in ("steps.parquet", "matches.parquet", "agents.parquet",
                                                      "dataset.json")]
