"""Headline: matches until a 50-agent board is ranked, information-first vs uniform pairs.

Board: 50 scripted Connect Four agents of known graded strength
(:mod:`benchmarks.support.graded_connect_four`, levels evenly spaced from 0 "anti" to 3
"threat"; neighbours about 0.2 logits apart, 55% head to head); the true rank is the
order of the level (``--verify`` checks it against a round-robin). ``--board
epsilon`` uses ``heuristic:epsilon=x`` for 50 evenly spaced x instead (3.5 logits in
all: too narrow for any scheduler to gain much, see docs/scheduling.md).

Both schedulers start from an empty :class:`~league.ratings.book.RatingBook` and play
batches of ``--batch`` matches on one :class:`~arena.engine.MatchEngine` (runs are
played in lockstep, their batches side by side in one engine call; every match's
result depends only on its own seed). After every batch the board is *resolved* when
every agent's rank range (:func:`league.ratings.ranking.rank_ranges` of the 95% intervals
``mu +- 1.96 sigma``) lies within +-2 of its true rank; the count of matches played
by then is the score (lower is better).

* **uniform**: every match a uniformly random pair of distinct agents, random seats.
* **ours**: :func:`league.scheduling.scheduler.information_lineups`: greedy expected-variance
  reduction with simulated shrinkage, agents whose rank range spans more than 4 ranks
  weighted first.

Ratings: TrueSkill with the live constants except ``tau = 0`` and a 1% draw
probability (Connect Four draws about 1% here). The live tau (sigma / 100) puts a
floor near 0.8 under sigma; telling agents three ranks apart needs about 0.3.

Run: ``python benchmarks/scheduling.py [--seeds 3] [--batch 256] [--smoke]``; the last line
is JSON: ``ours_matches``, ``uniform_matches``, ``ratio``, ``kendall_tau``,
``ours_per_seed``, ``uniform_per_seed``, ``all_resolved``, ``board``, ``agents``,
``batch``, ``seeds``, ``wall_s``. ``--smoke``: 6 agents, one seed, batches of 64, at
most 1,024 matches a run (the suite's check that it runs).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy.stats import kendalltau

# Lets the script run from a checkout without installing the project.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.catalog import make_policy
from agents.policy import Policy, derive_seed
from arena.engine import MatchEngine, MatchJob
from benchmarks.support.graded_connect_four import GradedConnectFour
from league.ratings.book import RatingBook
from league.ratings.ranking import interval_bounds, rank_ranges
from league.ratings.rating import RatingEnv
from league.scheduling.scheduler import SchedulerConfig, information_lineups

ENV_ID = "connect_four-v3"
ROLES = ("player", "player")
TOLERANCE = 2
RATING_ENV = RatingEnv(tau=0.0, draw_probability=0.01)
OURS = SchedulerConfig(target_sigma=math.inf, rank_span=4, min_relative_gain=0.0)


def build_board(kind: str, n: int) -> tuple[dict[str, Policy], list[str]]:
    """Policies by agent key, and the keys from strongest (true rank 1) to weakest."""
    if kind == "graded":
        policies = [GradedConnectFour(level) for level in np.linspace(3.0, 0.0, n)]
    else:
        policies = [make_policy(f"heuristic:epsilon={x:.4f}", ENV_ID) for x in np.linspace(0, 1, n)]
    return {p.agent_id: p for p in policies}, [p.agent_id for p in policies]


def resolved(book: RatingBook, keys: list[str], tolerance: int = TOLERANCE) -> bool:
    """Every agent's rank range lies within +-``tolerance`` of its true rank (list order)."""
    ratings = [book.rating((k, "player")) for k in keys]
    lo, hi = rank_ranges(*interval_bounds([r.mu for r in ratings], [r.sigma for r in ratings]))
    true = np.arange(1, len(keys) + 1)
    return bool(((lo >= true - tolerance) & (hi <= true + tolerance)).all())


@dataclass
class Run:
    """One scheduler on one seed, advanced batch by batch."""

    scheduler: str
    seed: int
    keys: list[str]
    book: RatingBook = field(default_factory=lambda: RatingBook(RATING_ENV))
    played: int = 0
    done: bool = False

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng([self.seed, self.scheduler == "ours"])

    def next_batch(self, n: int) -> list[MatchJob]:
        if self.scheduler == "ours":
            lineups = information_lineups(self.keys, ROLES, self.book, n, self.rng, env=RATING_ENV,
                                          config=OURS)
        else:
            i = self.rng.integers(len(self.keys), size=n)
            j = (i + self.rng.integers(1, len(self.keys), size=n)) % len(self.keys)
            lineups = [(self.keys[a], self.keys[b]) for a, b in zip(i.tolist(), j.tolist())]
        master = self.seed * 2 + (self.scheduler == "ours")
        seeds = derive_seed(master, np.arange(self.played, self.played + n)).tolist()
        return [MatchJob(seed=s, agents=tuple(lineup)) for s, lineup in zip(seeds, lineups)]

    def record(self, records: list, true_order: list[str]) -> None:
        for r in records:
            self.book.apply(r.seats, ROLES, r.winner)
        self.played += len(records)
        self.done = resolved(self.book, true_order)

    def kendall_tau(self, true_order: list[str]) -> float:
        mu = [self.book.rating((k, "player")).mu for k in true_order]
        return float(kendalltau(-np.arange(len(mu)), mu).statistic)


def play_lockstep(runs: list[Run], engine: MatchEngine, policies: dict[str, Policy],
                  true_order: list[str], batch: int, cap: int, console: Console) -> float:
    """Advance every unfinished run by one batch per engine call until all are done."""
    start, calls = time.perf_counter(), 0
    while live := [r for r in runs if not r.done and r.played < cap]:
        jobs = [r.next_batch(batch) for r in live]
        records = engine.play(ENV_ID, [j for js in jobs for j in js], policies)
        for r, js in zip(live, jobs):
            r.record(records[:len(js)], true_order)
            records = records[len(js):]
        calls += 1
        if calls % 20 == 0:
            console.log(", ".join(f"{r.scheduler}/{r.seed}: {r.played}{' done' if r.done else ''}"
                                  for r in runs))
    return time.perf_counter() - start


def verify(policies: dict[str, Policy], true_order: list[str], games: int, engine: MatchEngine) -> dict:
    """Round-robin check that the true order is the strength order (Kendall tau, worst miss)."""
    from scipy.optimize import minimize

    n = len(true_order)
    i, j = np.triu_indices(n, k=1)
    pairs = np.repeat(np.stack([i, j], axis=1), games, axis=0)
    pairs[1::2] = pairs[1::2, ::-1]  # alternate seats
    wins = np.zeros((n, n))
    for lo in range(0, len(pairs), 8192):
        chunk = pairs[lo:lo + 8192]
        jobs = [MatchJob(seed=lo + k, agents=(true_order[a], true_order[b])) for k, (a, b) in enumerate(chunk)]
        for (a, b), r in zip(chunk, engine.play(ENV_ID, jobs, policies)):
            if r.winner is None:
                wins[a, b] += 0.5
                wins[b, a] += 0.5
            else:
                wins[(a, b)[r.winner], (b, a)[r.winner]] += 1

    def nll(x: np.ndarray) -> float:  # Bradley-Terry, lightly regularized
        return float((wins * np.logaddexp(0, x[None, :] - x[:, None])).sum() + 1e-3 * (x * x).sum())

    strength = minimize(nll, np.zeros(n), method="L-BFGS-B").x
    rank = np.empty(n, dtype=int)
    rank[np.argsort(-strength)] = np.arange(1, n + 1)
    tau = float(kendalltau(-np.arange(n), strength).statistic)
    return {"verify_kendall_tau": round(tau, 4), "verify_max_rank_miss": int(np.abs(rank - np.arange(1, n + 1)).max()),
            "verify_logit_span": round(float(strength.max() - strength.min()), 2), "verify_games_per_pair": games}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", choices=("graded", "epsilon"), default="graded")
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--cap", type=int, default=400_000, help="give up a run after this many matches")
    parser.add_argument("--verify", type=int, default=0, metavar="GAMES",
                        help="first check the true order with a round-robin of GAMES per pair")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that it runs")
    args = parser.parse_args()
    if args.smoke:
        args.agents, args.seeds, args.batch, args.cap = 6, 1, 64, 1024
    console = Console(stderr=True)
    policies, true_order = build_board(args.board, args.agents)
    extra: dict = {}
    with MatchEngine(time_budget_s=None) as engine:
        if args.verify:
            extra = verify(policies, true_order, args.verify, engine)
            console.log(f"true order check: {extra}")
        runs = [Run(s, seed, true_order) for seed in range(args.seeds) for s in ("ours", "uniform")]
        wall = play_lockstep(runs, engine, policies, true_order, args.batch, args.cap, console)

    table = Table(title=f"Matches until every rank range is within +-{TOLERANCE} of the true rank "
                        f"({args.agents} agents, {args.board} board, batches of {args.batch})")
    for col in ("scheduler", "seed", "matches", "resolved", "Kendall tau", "median sigma"):
        table.add_column(col, justify="right")
    for r in runs:
        sigma = np.median([r.book.rating((k, "player")).sigma for k in true_order])
        table.add_row(r.scheduler, str(r.seed), str(r.played), "yes" if r.done else "no (cap)",
                      f"{r.kendall_tau(true_order):.3f}", f"{sigma:.3f}")
    mean = {s: float(np.mean([r.played for r in runs if r.scheduler == s])) for s in ("ours", "uniform")}
    ratio = mean["uniform"] / mean["ours"]
    table.add_row("uniform / ours", "", f"{ratio:.2f}x", "", "", "")
    Console().print(table)
    print(json.dumps({
        "ours_matches": round(mean["ours"]),
        "uniform_matches": round(mean["uniform"]),
        "ratio": round(ratio, 3),
        "kendall_tau": round(float(np.mean([r.kendall_tau(true_order) for r in runs if r.scheduler == "ours"])), 4),
        "ours_per_seed": [r.played for r in runs if r.scheduler == "ours"],
        "uniform_per_seed": [r.played for r in runs if r.scheduler == "uniform"],
        "all_resolved": all(r.done for r in runs),
        "board": args.board, "agents": args.agents, "batch": args.batch, "seeds": args.seeds,
        "wall_s": round(wall, 1), **extra,
    }))


if __name__ == "__main__":
    main()
