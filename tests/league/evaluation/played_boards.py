"""Boards of real games for the evaluation tests: policies played through the match engine."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from agents.policy import MatchRng, Policy, derive_seed
from arena.engine import MatchJob, MatchRecord, play_matches
from league.evaluation.headtohead import Game


class Alias:
    """``policy`` playing under another agent id (one account, two behaviours)."""

    weights_hash = None
    bounded_runtime = True

    def __init__(self, agent_id: str, policy: Policy) -> None:
        self.agent_id, self.policy = agent_id, policy

    def act(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        return self.policy.act(obs, mask, rng)


def game_of(record: MatchRecord) -> Game:
    """The :class:`Game` of a two-player match record."""
    score = 0.5 if record.winner is None else 1.0 - record.winner
    return Game(record.seats[0], record.seats[1], score)


def play_pairs(env_id: str, policies: Mapping[str, Policy], pairs: list[tuple[str, str]],
               games_per_pair: int, seed: int) -> list[Game]:
    """``games_per_pair`` games of every pair, seats alternating, through the real engine."""
    jobs = []
    for a, b in pairs:
        for g in range(games_per_pair):
            jobs.append(MatchJob(seed=int(derive_seed(seed, len(jobs))), agents=(a, b) if g % 2 == 0 else (b, a)))
    return [game_of(r) for r in play_matches(env_id, jobs, dict(policies))]


def round_robin(env_id: str, policies: Mapping[str, Policy], games_per_pair: int, seed: int) -> list[Game]:
    """Every pair of ``policies`` plays ``games_per_pair`` games."""
    names = sorted(policies)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    return play_pairs(env_id, policies, pairs, games_per_pair, seed)
