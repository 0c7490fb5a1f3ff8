"""Evaluation-scale results: per-line-up W/D/L counts plus a seeded sample of full replays.

Building a :class:`~arena.engine.records.MatchRecord` is Python work per match (a few
microseconds), so at a million matches per second the records, not the device, would
set the pace. :meth:`DeviceMatchEngine.summarize` therefore counts outcomes on the
device and brings back only the counts and the replays of a sample of matches.

The sample is a pure function of each match's seed (``splitmix64(seed ^ h(sample_seed))``
below a threshold), so the same matches are sampled whatever the batch size, device or
order, and a sampled replay equals the record the full-record mode writes for that
match (``tests/engine/test_device_engine.py`` checks both).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from agents.device_rng import splitmix64
from arena.engine.device_loop import DeviceResults
from arena.engine.records import TERMINATION_CODE, TERMINATIONS, MatchRecord

_FORFEIT = torch.tensor([t.is_forfeit for t in TERMINATIONS])


@dataclass
class LineupCounts:
    """Outcomes of every match one line-up played.

    Attributes:
        agents: Agent id per seat.
        matches: Matches played.
        wins: Wins per seat (a forfeit is a win for the other seat).
        draws: Drawn matches.
        terminations: Matches per termination value (``normal``, ``illegal_action``, ...).
        plies: Moves played in all these matches together.
    """

    agents: tuple[str, str]
    matches: int = 0
    wins: list[int] = field(default_factory=lambda: [0, 0])
    draws: int = 0
    terminations: dict[str, int] = field(default_factory=dict)
    plies: int = 0


@dataclass
class MatchSummary:
    """What :meth:`DeviceMatchEngine.summarize` returns.

    Attributes:
        env: Env id.
        seed: Master seed of the run (match ``i`` has seed ``derive_seed(seed, i)``).
        start: Index of the first match.
        matches: Matches played.
        lineups: Counts per line-up, in :func:`arena.engine.plan.pairings` order.
        replay_rate: Share of matches whose full record was kept.
        replays: The kept records, in match order.
    """

    env: str
    seed: int
    start: int
    matches: int
    lineups: list[LineupCounts]
    replay_rate: float
    replays: list[MatchRecord]

    def wdl(self, agent: str, opponent: str) -> tuple[int, int, int]:
        """``agent``'s wins, draws and losses against ``opponent``, both seatings together."""
        w = d = lost = 0
        for c in self.lineups:
            if set(c.agents) != {agent, opponent} or agent == opponent:
                continue
            me = c.agents.index(agent)
            w, d, lost = w + c.wins[me], d + c.draws, lost + c.wins[1 - me]
        return w, d, lost

    def to_dict(self) -> dict:
        """JSON-ready: counts, and the replays as record dicts."""
        out = asdict(self)
        out["replays"] = [asdict(r) for r in self.replays]
        return out


def sampled(seeds: torch.Tensor, rate: float, sample_seed: int) -> torch.Tensor:
    """``(n,)`` bool: which matches keep a full replay (a function of each seed alone)."""
    if rate <= 0:
        return torch.zeros(len(seeds), dtype=torch.bool, device=seeds.device)
    salt = splitmix64(torch.tensor(sample_seed, dtype=torch.int64)).to(seeds.device)
    bits = (splitmix64(seeds ^ salt) >> 11) & ((1 << 53) - 1)
    return bits < int(rate * (1 << 53))


class SummaryCounter:
    """Accumulates per-line-up counts on the device; one copy to the host at the end."""

    def __init__(self, lineups: int, device: torch.device) -> None:
        self.lineups = lineups
        self.outcomes = torch.zeros(lineups * 3, dtype=torch.int64, device=device)
        self.terms = torch.zeros(lineups * len(TERMINATIONS), dtype=torch.int64, device=device)
        self.plies = torch.zeros(lineups, dtype=torch.int64, device=device)

    def add(self, lineup: torch.Tensor, res: DeviceResults) -> None:
        """Count one batch: ``lineup`` ``(n,)`` is each match's line-up index."""
        forfeit = _FORFEIT.to(res.codes.device)[res.codes.long()]
        # The winning seat: the board's, or the other seat after a forfeit; -1 a draw.
        winner = torch.where(forfeit, 1 - res.forfeit_seat.long(), res.winner)
        self.outcomes += torch.bincount(lineup * 3 + winner + 1, minlength=self.lineups * 3)
        t = len(TERMINATIONS)
        self.terms += torch.bincount(lineup * t + res.codes.long(), minlength=self.lineups * t)
        self.plies.index_add_(0, lineup, res.plies)

    def counts(self, agents: list[tuple[str, str]]) -> list[LineupCounts]:
        outcomes = self.outcomes.view(-1, 3).cpu().numpy()
        terms = self.terms.view(-1, len(TERMINATIONS)).cpu().numpy()
        plies = self.plies.cpu().numpy()
        out = []
        for i, lineup in enumerate(agents):
            draws, w0, w1 = (int(x) for x in outcomes[i])
            ended = {t.value: int(terms[i, TERMINATION_CODE[t]]) for t in TERMINATIONS
                     if terms[i, TERMINATION_CODE[t]]}
            out.append(LineupCounts(tuple(lineup), int(outcomes[i].sum()), [w0, w1], draws,
                                    ended, int(plies[i])))
        return out


def lineup_array(n: int, start: int, lineups: int) -> np.ndarray:
    """Line-up index of matches ``start .. start + n - 1`` (cycled, as ``plan_matches``)."""
    return (np.arange(start, start + n) % lineups).astype(np.int64)
