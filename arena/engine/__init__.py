"""The match engine: plays many matches concurrently in one process.

``play_matches`` is the small pure kernel everything plays through (ladder, leagues,
training evaluation, challenges): jobs and policies in, records out. Built-in board
games run on their vectorized cores; any other registered env runs through real
PettingZoo instances with batched policy calls.
"""

from __future__ import annotations

from typing import Self

from agents.policy import Policy
from arena.engine.board import play_board_matches
from arena.engine.envpool import InlineEnvs, ProcessEnvs
from arena.engine.generic import play_generic_matches
from arena.engine.guard import PolicyCaller
from arena.engine.records import MatchJob, MatchRecord, Termination
from envs.errors import UnknownAgent
from envs.registry import get_spec, make_vector_core

__all__ = ["MatchEngine", "MatchJob", "MatchRecord", "Termination", "play_matches"]

DEFAULT_TIME_BUDGET_S = 10.0


class MatchEngine:
    """A long-lived engine: keeps env instances and the policy-call thread between calls.

    Workers (and benchmarks) hold one engine and call :meth:`play` repeatedly; env
    instances of generic envs are reset and reused rather than rebuilt (building an
    MPE world costs more than playing a few of its steps).

    Args:
        time_budget_s: Wall-clock budget of one batched ``act`` call; an overrun
            forfeits the matches in that call with ``timeout``. ``None`` disables it.
        vectorized: Use an env's vectorized core when it has one.
        env_workers: Step generic (non-vectorized) envs in this many worker
            processes; ``0`` steps them in this process.
    """

    def __init__(
        self,
        time_budget_s: float | None = DEFAULT_TIME_BUDGET_S,
        vectorized: bool = True,
        env_workers: int = 0,
    ) -> None:
        self.vectorized = vectorized
        self._caller = PolicyCaller(time_budget_s)
        self._envs = ProcessEnvs(env_workers) if env_workers > 0 else InlineEnvs()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._caller.close()
        self._envs.close()

    def play(self, env_id: str, jobs: list[MatchJob], policies: dict[str, Policy]) -> list[MatchRecord]:
        """Play every job concurrently; one record per job, in job order.

        Args:
            env_id: Registered env id.
            jobs: Matches to play; ``job.agents`` has one agent id per team.
            policies: Every agent id used by ``jobs`` mapped to its policy.
        """
        spec = get_spec(env_id)
        for job in jobs:
            if len(job.agents) != spec.num_teams:
                raise ValueError(f"{env_id} needs {spec.num_teams} agents per match, got {job.agents}")
            missing = [a for a in job.agents if a not in policies]
            if missing:
                raise UnknownAgent(f"no policy given for agent(s) {missing}")
        if not jobs:
            return []
        used = {id(p): p for p in policies.values()}.values()
        for policy in used:  # policies that must know the matches (connected agents)
            bind = getattr(policy, "bind_matches", None)
            if bind is not None:
                bind(jobs)
        core = make_vector_core(env_id) if self.vectorized else None
        if core is not None:
            records = play_board_matches(spec, core, jobs, policies, self._caller)
        else:
            records = play_generic_matches(spec, jobs, policies, self._caller, self._envs)
        for policy in used:
            finish = getattr(policy, "finish_matches", None)
            if finish is not None:
                finish(records)
        return records


def play_matches(
    env_id: str,
    jobs: list[MatchJob],
    policies: dict[str, Policy],
    *,
    time_budget_s: float | None = DEFAULT_TIME_BUDGET_S,
    vectorized: bool = True,
) -> list[MatchRecord]:
    """Play ``jobs`` once with a throw-away :class:`MatchEngine` (see its ``play``)."""
    with MatchEngine(time_budget_s, vectorized) as engine:
        return engine.play(env_id, jobs, policies)
