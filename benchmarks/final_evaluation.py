"""Headline: games until the top-10 order of 50 agents is certified at 95%: Arena vs equal games vs round robin.

Pool: the 50 graded Connect Four agents of the scheduling benchmark
(:mod:`benchmarks.support.graded_connect_four`, levels 3 down to 0; the known order is the
level order). Results are drawn from their *measured* win-probability model
(:mod:`benchmarks.support.graded_strengths`: a 300-games-per-pair round robin played by the
real engine, fitted by Bradley-Terry with a first-move term, plus the measured draw
share), not played: a round robin until certified takes millions of games per seed, more
than two shared CPUs play in a benchmark run. Neighbours are 0.16-0.6 logits apart
at the top (54-65%).

Every schedule is judged by the same rule, :mod:`league.competitions.certification`
(K = 10, 95%, tie margin 0.03, TrueSkill from the prior), checked after every batch, and
runs until certified; the score is the games played by then (lower is better).

* **arena**: :func:`league.competitions.final_schedule.final_pairings` (the floor of
  ``--floor`` games per entry, then only the open tested pairs), batches of ``--batch``.
* **equal games** (Kaggle-style): every entry plays the same number of games, against
  its neighbour in the current rating order, the pairs alternating ``(1-2, 3-4, ...)``
  and ``(2-3, 4-5, ..., 50-1)`` from round to round, so every adjacent pair meets every
  second round: the most a rating-proximity schedule can give adjacent pairs while
  keeping counts equal. Batches of ``--batch // 50`` rounds.
* **round robin**: every pair plays one unit (two games, seats swapped) per round, in a
  shuffled order, repeated until certified; checked after every round.

Every pairing is two games with seats swapped (the certificate's units). ``certified_pairs``
and ``wrong_pairs`` (separated in the order opposite to the known strengths, or tied
although the model's expected score is outside 1/2 +- margin) are totals over every
schedule's final certificate on every seed; the match counts are medians over seeds.

Run: ``python benchmarks/final_evaluation.py [--seeds 5] [--smoke]``; the last line is JSON.
``--smoke``: 8 of the agents (every seventh), K = 3, one seed: seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.support import graded_strengths
from league.competitions.certification import Certificate, CertificationConfig, FinalEvaluation, PairStatus
from league.competitions.final_schedule import final_pairings
from league.evaluation.headtohead import Game

SCHEDULES = ("arena", "equal_games", "round_robin")


class Model:
    """The measured pool: ``p(first i beats second j)`` from strengths, a first-move term and draws."""

    def __init__(self, strengths: np.ndarray, first_move: float, draw_rate: float) -> None:
        self.s, self.h, self.d = strengths, first_move, draw_rate
        self.ids = [f"graded-{k:02d}" for k in range(len(strengths))]  # k = true rank - 1

    def play(self, first: np.ndarray, second: np.ndarray, rng: np.random.Generator) -> list[Game]:
        gap = self.s[first] - self.s[second] + self.h
        win = (1.0 - self.d) / (1.0 + np.exp(-gap))
        u = rng.random(first.size)
        score = np.where(u < win, 1.0, np.where(u < win + self.d, 0.5, 0.0))
        return [Game(self.ids[a], self.ids[b], x) for a, b, x in zip(first.tolist(), second.tolist(), score.tolist())]

    def expected_score(self, i: int, j: int) -> float:
        """``i``'s expected score against ``j``, seats averaged."""
        g = self.s[i] - self.s[j]
        decisive = 0.5 * (1 / (1 + np.exp(-(g + self.h))) + 1 / (1 + np.exp(-(g - self.h))))
        return float((1.0 - self.d) * decisive + 0.5 * self.d)


def units(pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """First and second seats of the games of ``pairs``, each played twice with seats swapped."""
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    return np.stack([a, b], axis=1).ravel(), np.stack([b, a], axis=1).ravel()


def next_batch(schedule: str, cert: Certificate, model: Model, batch: int, rounds: int,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Seat arrays of the schedule's next batch of games."""
    index = {e: k for k, e in enumerate(model.ids)}
    n = len(model.ids)
    if schedule == "arena":
        games = final_pairings(cert, batch, rng)
        return (np.array([index[g.first] for g in games]), np.array([index[g.second] for g in games]))
    order = [index[s.entry] for s in cert.standings]
    if schedule == "equal_games":
        pairs = []
        for r in range(rounds):
            shifted = order if (rounds_played(cert, n) + r) % 2 == 0 else order[1:] + order[:1]
            pairs += list(zip(shifted[0::2], shifted[1::2]))
        return units(pairs)
    i, j = np.triu_indices(n, k=1)
    perm = rng.permutation(i.size)
    flip = rng.random(i.size) < 0.5
    a, b = np.where(flip, j, i)[perm], np.where(flip, i, j)[perm]
    return units(list(zip(a.tolist(), b.tolist())))


def rounds_played(cert: Certificate, n: int) -> int:
    """Equal-games rounds so far (every entry plays two games a round)."""
    return sum(s.games for s in cert.standings) // (2 * n)


def run(schedule: str, seed: int, model: Model, config: CertificationConfig, batch: int, cap: int) -> dict:
    """Play one schedule on one seed until certified (or ``cap`` games)."""
    rng = np.random.default_rng([seed, SCHEDULES.index(schedule)])
    evaluation = FinalEvaluation(model.ids, config)
    cert, played, checks = evaluation.certificate(), 0, 0
    rounds = max(1, batch // len(model.ids))
    while not cert.certified and played < cap:
        first, second = next_batch(schedule, cert, model, batch, rounds, rng)
        evaluation.add(model.play(first, second, rng))
        played += first.size
        cert, checks = evaluation.certificate(), checks + 1
    return {"schedule": schedule, "seed": seed, "games": played, "certified": cert.certified, "checks": checks,
            **judge(cert, model, config)}


def judge(cert: Certificate, model: Model, config: CertificationConfig) -> dict:
    """Certified pairs, and those wrong against the known strengths; whether the top K is exact."""
    rank = {e: k for k, e in enumerate(model.ids)}
    certified = wrong = 0
    for p in cert.pairs:
        i, j = rank[p.upper], rank[p.lower]
        if p.status is PairStatus.SEPARATED:
            certified, wrong = certified + 1, wrong + (i > j)
        elif p.status is PairStatus.TIED:
            certified += 1
            wrong += abs(model.expected_score(i, j) - 0.5) >= config.tie_margin
    top = [rank[s.entry] for s in cert.standings[:config.top_k]]
    return {"certified_pairs": certified, "wrong_pairs": int(wrong), "top_k_exact": top == list(range(len(top)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=512, help="games between two looks")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--floor", type=int, default=20)
    parser.add_argument("--cap", type=int, default=20_000_000, help="give up a run after this many games")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that it runs")
    args = parser.parse_args()
    measured = graded_strengths.load()
    strengths = np.array(measured["strengths"])
    if args.smoke:
        strengths, args.seeds, args.top_k, args.floor, args.batch = strengths[::7], 1, 3, 4, 64
    model = Model(strengths, measured["first_move_logit"], measured["draw_rate"])
    config = CertificationConfig(top_k=args.top_k, floor=args.floor)
    console = Console(stderr=True)
    start, results = time.perf_counter(), []
    for seed in range(args.seeds):
        for schedule in SCHEDULES:
            results.append(run(schedule, seed, model, config, args.batch, args.cap))
            console.log(results[-1])
    wall = time.perf_counter() - start

    table = Table(title=f"Games until the top-{args.top_k} order of {len(strengths)} agents is certified at "
                        f"{config.confidence:.0%} (same rule for every schedule; measured model, not the engine)")
    for col in ("schedule", "seed", "games", "certified", "certified pairs", "wrong", "top K exact"):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(r["schedule"], str(r["seed"]), f"{r['games']:,}", "yes" if r["certified"] else "no (cap)",
                      str(r["certified_pairs"]), str(r["wrong_pairs"]), "yes" if r["top_k_exact"] else "no")
    median = {s: float(np.median([r["games"] for r in results if r["schedule"] == s])) for s in SCHEDULES}
    Console().print(table)
    print(json.dumps({
        "arena_matches": round(median["arena"]),
        "equal_games_matches": round(median["equal_games"]),
        "round_robin_matches": round(median["round_robin"]),
        "ratio_vs_equal_games": round(median["equal_games"] / median["arena"], 3),
        "ratio_vs_round_robin": round(median["round_robin"] / median["arena"], 3),
        "certified_pairs": sum(r["certified_pairs"] for r in results),
        "wrong_pairs": sum(r["wrong_pairs"] for r in results),
        "all_certified": all(r["certified"] for r in results),
        **{f"{s}_per_seed": [r["games"] for r in results if r["schedule"] == s] for s in SCHEDULES},
        "agents": len(strengths), "top_k": args.top_k, "confidence": config.confidence,
        "tie_margin": config.tie_margin, "floor": args.floor, "batch": args.batch, "seeds": args.seeds,
        "results": "measured win-probability model (Bradley-Terry + first move + draws), not the engine",
        "wall_s": round(wall, 1),
    }))


if __name__ == "__main__":
    main()
