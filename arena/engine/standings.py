"""Win/draw/loss tallies per agent, and forfeits by reason, from match records."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from arena.engine.records import MatchRecord, Termination
from envs.spec import EnvSpec
from league.results import count_result


@dataclass
class AgentTally:
    wins: int = 0
    draws: int = 0
    losses: int = 0
    forfeits: Counter = field(default_factory=Counter)

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        """Points per game: win 1, draw 0.5."""
        return (self.wins + 0.5 * self.draws) / self.games if self.games else 0.0


class Standings:
    """Accumulates records; one tally per agent (a team counts once per match)."""

    def __init__(self, spec: EnvSpec) -> None:
        self.spec = spec
        self.tallies: dict[str, AgentTally] = defaultdict(AgentTally)
        self.terminations: Counter = Counter()

    def add(self, records: list[MatchRecord]) -> None:
        spec = self.spec
        for rec in records:
            self.terminations[rec.termination] += 1
            team_agents = [rec.seats[team[0]] for team in spec.teams]
            for t, agent in enumerate(team_agents):
                count_result(self.tallies[agent], rec.winner, t)
            if rec.forfeit_seat is not None and Termination(rec.termination).is_forfeit:
                self.tallies[rec.seats[rec.forfeit_seat]].forfeits[rec.termination] += 1

    def ranked(self) -> list[tuple[str, AgentTally]]:
        return sorted(self.tallies.items(), key=lambda kv: (-kv[1].score, kv[0]))
