"""The win-probability model of the 50 graded Connect Four agents, measured with the real engine.

The final-evaluation benchmark needs millions of games per seed (a round robin until
certified), too many to play on two CPUs, so it samples results from a model measured
once here: a round robin of the 50 agents of :mod:`benchmarks.support.graded_connect_four`
(levels evenly spaced from 3 down to 0), ``games`` per pair with seats alternated, played
by :class:`~arena.engine.MatchEngine`; then a Bradley-Terry fit with a first-move term,

    P(first wins | decisive) = sigmoid(s_first - s_second + h),

and the measured share of draws. A fitted model, not the raw matrix: 300 games per pair
leave each raw entry +-0.03 of noise, as much as neighbours differ (0.2 logits, 55%),
while the fit pools each agent's 14,700 games (about +-0.02 logits). The fitted strengths
fall with the level throughout (``monotone`` in the file), so the known order is the
level order. (A smooth quartic in the level fitted far worse: the styles change at
levels 1 and 2.)

Run: ``python -m benchmarks.support.graded_strengths [--games 300]``: writes
``graded_strengths.json`` beside this file (strengths from strongest to weakest).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from arena.engine import MatchEngine, MatchJob
from benchmarks.support.graded_connect_four import GradedConnectFour

PATH = Path(__file__).with_name("graded_strengths.json")
ENV_ID = "connect_four-v3"


def measure(n: int, games: int, seed: int = 0) -> dict:
    """Play the round robin and fit the model (see module doc)."""
    policies = [GradedConnectFour(level) for level in np.linspace(3.0, 0.0, n)]
    by_id = {p.agent_id: p for p in policies}
    ids = [p.agent_id for p in policies]
    i, j = np.triu_indices(n, k=1)
    pairs = np.repeat(np.stack([i, j], axis=1), games, axis=0)
    pairs[1::2] = pairs[1::2, ::-1]  # alternate seats
    first_wins = np.zeros((n, n))  # [a, b]: a moved first (against b) and won
    second_wins = np.zeros((n, n))  # [a, b]: a moved first (against b) and lost
    draws = 0
    start = time.perf_counter()
    with MatchEngine(time_budget_s=None) as engine:
        for lo in range(0, len(pairs), 8192):
            chunk = pairs[lo:lo + 8192]
            jobs = [MatchJob(seed=seed * 10**9 + lo + k, agents=(ids[a], ids[b])) for k, (a, b) in enumerate(chunk)]
            for (a, b), r in zip(chunk.tolist(), engine.play(ENV_ID, jobs, by_id)):
                if r.winner is None:
                    draws += 1
                elif r.winner == 0:
                    first_wins[a, b] += 1
                else:
                    second_wins[a, b] += 1
    wall = time.perf_counter() - start

    levels = np.linspace(3.0, 0.0, n)
    fit = _fit(first_wins, second_wins)
    return {"levels": levels.round(6).tolist(), "strengths": fit["strengths"],
            "first_move_logit": fit["first_move_logit"], "monotone": bool(np.all(np.diff(fit["strengths"]) < 0)),
            "draw_rate": round(draws / len(pairs), 5), "games_per_pair": games, "games": len(pairs),
            "wall_s": round(wall, 1), "env": ENV_ID}


def _fit(first_wins: np.ndarray, second_wins: np.ndarray) -> dict:
    """Bradley-Terry with a first-move term (maximum likelihood, a tiny ridge)."""
    basis = np.eye(len(first_wins))
    from scipy.optimize import minimize

    def nll(x: np.ndarray) -> tuple[float, np.ndarray]:
        s, h = basis @ x[:-1], x[-1]
        d = s[:, None] - s[None, :] + h
        pf = 1.0 / (1.0 + np.exp(-d))  # P(first wins | decisive)
        value = (first_wins * np.logaddexp(0, -d)).sum() + (second_wins * np.logaddexp(0, d)).sum()
        g = second_wins * pf - first_wins * (1.0 - pf)  # d value / d d
        grad_s = g.sum(axis=1) - g.sum(axis=0)
        w = x[:-1]
        return float(value + 1e-6 * (w * w).sum()), np.append(basis.T @ grad_s + 2e-6 * w, g.sum())

    x = minimize(nll, np.zeros(basis.shape[1] + 1), jac=True, method="L-BFGS-B").x
    s = basis @ x[:-1]
    return {"strengths": (s - s.mean()).round(5).tolist(), "first_move_logit": round(float(x[-1]), 5),
            "nll": round(nll(x)[0], 2)}


def load() -> dict:
    """The stored measurement (see module doc)."""
    return json.loads(PATH.read_text())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--games", type=int, default=300)
    args = parser.parse_args()
    result = measure(args.agents, args.games)
    PATH.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("levels", "strengths")}))
