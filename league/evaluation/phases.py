"""Strategy phases of a league, generation by generation: rates, ratings, first occurrences.

Hide and seek's emergent strategies (running and chasing, fort building, ramp use, ramp
defense, ...) are detected per episode by the env as *phase values*: a number in
``[0, 1]`` per phase (``1.0``/``0.0`` for yes/no detectors such as ``fort``, a share for
``chasing``). A :class:`PhaseTimeline` aggregates them per generation:

* the **rate** of a phase in a generation is the mean of its per-episode values;
* a phase **happened** in an episode when its value reached :data:`HAPPENED` (0.5);
  the first recorded match (one with a match id, so that it can be replayed) in which
  a phase happened is kept as its :class:`FirstOccurrence`;
* next to the rates each generation keeps the TrueSkill ``[mu, sigma]`` of its
  snapshots per env role (``hider``, ``seeker``);
* apart from the mains, a league with exploiters (trained only against the current main of
  the other role) keeps each generation's :class:`ExploiterEntry` per exploiter: its score
  against that main, its edge over its own main, and whether it was frozen or reset.

Phase names are plain strings: an env with more detectors (``hide_and_seek-v1``'s
ramps) simply brings more names. :data:`PHASE_ORDER` only fixes the display order of
the known ones. Pure: no I/O, JSON in and out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Display order of the phases hide and seek is known for (OpenAI's sequence); unknown
# names follow in alphabetical order.
PHASE_ORDER = ("chasing", "fort", "ramp_use", "ramp_defense", "box_surfing", "surf_defense")
HAPPENED = 0.5
"""A phase value at or above this counts as "the phase happened in this episode"."""


def order_phases(names: Iterable[str]) -> list[str]:
    """``names`` in display order: :data:`PHASE_ORDER` first, the rest sorted."""
    names = set(names)
    known = [p for p in PHASE_ORDER if p in names]
    return known + sorted(names - set(known))


@dataclass(frozen=True)
class ExploiterEntry:
    """What one generation did with one exploiter (apart from the main teams)."""

    role: str
    index: int
    score: float
    """its score against the other role's main (a win 1, a draw 1/2)"""
    edge: float
    """that score less its own main's score in self-play"""
    snapshot: str | None = None
    """the opponent key it was frozen into its role's pool as (``x0``, ...); ``None``: not frozen"""
    reset: bool = False
    """it started again from its main's weights after this generation"""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExploiterEntry:
        """From a mapping with at least these fields (others, such as a trainer's extras, are dropped)."""
        return cls(str(data["role"]), int(data["index"]), float(data["score"]), float(data["edge"]),
                   str(data["snapshot"]) if data.get("snapshot") else None, bool(data.get("reset", False)))

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "index": self.index, "score": self.score, "edge": self.edge,
                "snapshot": self.snapshot, "reset": self.reset}


@dataclass
class GenerationRecord:
    """Phase sums and ratings of one generation, and its exploiters' entries."""

    generation: int
    episodes: int = 0
    sums: dict[str, float] = field(default_factory=dict)
    ratings: dict[str, list[float]] = field(default_factory=dict)
    """env role -> ``[mu, sigma]`` of the generation's snapshot in that role"""
    exploiters: list[ExploiterEntry] = field(default_factory=list)
    """the generation's exploiters, by role then index (empty: a league without exploiters)"""

    @property
    def rates(self) -> dict[str, float]:
        """Phase -> mean per-episode value (empty before any episode)."""
        if not self.episodes:
            return {}
        return {p: s / self.episodes for p, s in self.sums.items()}


@dataclass(frozen=True)
class FirstOccurrence:
    """The first recorded match in which a phase happened."""

    phase: str
    generation: int
    match_id: str
    value: float


@dataclass
class PhaseTimeline:
    """Per-generation phase rates and ratings, and where each phase first happened."""

    generations: dict[int, GenerationRecord] = field(default_factory=dict)
    firsts: dict[str, FirstOccurrence] = field(default_factory=dict)

    def record(self, generation: int) -> GenerationRecord:
        """The record of ``generation`` (created empty if new)."""
        if generation < 0:
            raise ValueError(f"generation must be >= 0, got {generation}")
        return self.generations.setdefault(generation, GenerationRecord(generation))

    def add_episode(self, generation: int, values: Mapping[str, float], match_id: str | None = None) -> None:
        """Count one episode of ``generation`` with its per-phase ``values``.

        Args:
            generation: The generation whose policies played the episode.
            values: Phase -> value in ``[0, 1]``.
            match_id: The recorded match of this episode, if it was recorded; the
                earliest one in which a phase happened becomes its first occurrence.
        """
        rec = self.record(generation)
        rec.episodes += 1
        for phase, value in values.items():
            value = float(value)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"phase {phase!r} value {value} is outside [0, 1]")
            rec.sums[phase] = rec.sums.get(phase, 0.0) + value
            if match_id is not None and value >= HAPPENED:
                self._note_first(FirstOccurrence(phase, generation, match_id, value))

    def add_rates(self, generation: int, rates: Mapping[str, float], episodes: int) -> None:
        """Merge rates a trainer aggregated itself over ``episodes`` episodes (no match ids)."""
        if episodes <= 0:
            raise ValueError(f"episodes must be > 0, got {episodes}")
        rec = self.record(generation)
        rec.episodes += episodes
        for phase, rate in rates.items():
            if not 0.0 <= float(rate) <= 1.0:
                raise ValueError(f"phase {phase!r} rate {rate} is outside [0, 1]")
            rec.sums[phase] = rec.sums.get(phase, 0.0) + float(rate) * episodes

    def set_rating(self, generation: int, role: str, mu: float, sigma: float) -> None:
        """The TrueSkill rating of the generation's snapshot playing ``role``."""
        self.record(generation).ratings[role] = [float(mu), float(sigma)]

    def set_exploiters(self, generation: int, entries: Iterable[ExploiterEntry | Mapping[str, Any]]) -> None:
        """The generation's exploiter entries (mappings are read by :meth:`ExploiterEntry.from_json`)."""
        self.record(generation).exploiters = [
            e if isinstance(e, ExploiterEntry) else ExploiterEntry.from_json(e) for e in entries]

    def _note_first(self, occ: FirstOccurrence) -> None:
        old = self.firsts.get(occ.phase)
        if old is None or occ.generation < old.generation:
            self.firsts[occ.phase] = occ

    @property
    def phases(self) -> list[str]:
        """Every phase seen in any generation, in display order."""
        return order_phases(p for rec in self.generations.values() for p in rec.sums)

    def rows(self) -> list[GenerationRecord]:
        """Generation records in generation order."""
        return [self.generations[g] for g in sorted(self.generations)]

    def to_json(self) -> dict[str, Any]:
        return {
            "generations": [
                {"generation": r.generation, "episodes": r.episodes, "sums": r.sums, "ratings": r.ratings,
                 "exploiters": [e.to_json() for e in r.exploiters]}
                for r in self.rows()
            ],
            "firsts": [vars(f) for f in self.firsts.values()],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> PhaseTimeline:
        out = cls()
        for g in (data or {}).get("generations", []):
            out.generations[int(g["generation"])] = GenerationRecord(
                int(g["generation"]), int(g["episodes"]), {k: float(v) for k, v in g["sums"].items()},
                {k: [float(x) for x in v] for k, v in g.get("ratings", {}).items()},
                [ExploiterEntry.from_json(e) for e in g.get("exploiters", [])])  # absent before exploiters
        for f in (data or {}).get("firsts", []):
            out.firsts[f["phase"]] = FirstOccurrence(f["phase"], int(f["generation"]), f["match_id"], float(f["value"]))
        return out
