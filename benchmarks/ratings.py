"""Headline: closed-form TrueSkill 1v1 updates vs the trueskill package.

Baseline: what a competent person writes, a loop over ``trueskill.rate_1vs1(a, b,
drawn=..., env=env)`` with one explicit environment. Ours: the scalar closed form
(``rate_1v1_fast``, what a sequential ladder replay uses) and the vectorized one
(``rate_1v1_arrays``, for independent matches). Same 20,000 random matches for all
(mus 0..50, sigmas 0.5..9, 30% draws); best of 3 repeats; the max absolute
difference to the package over every output is reported too.

Run: ``python benchmarks/ratings.py [--n 20000] [--seed 0] [--smoke]``; the last line is
JSON: ``n``, ``package_updates_per_s``, ``fast_updates_per_s``, ``ratio``,
``fast_scalar_updates_per_s``, ``scalar_ratio``, ``max_abs_diff``. ``--smoke``: 200
updates, one repeat (the suite's check that it runs).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import trueskill

# Lets the script run from a checkout without installing the project.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.support.smoke import parse_with_smoke
from league.ratings.closed_form import rate_1v1_arrays, rate_1v1_fast
from league.ratings.rating import Rating, RatingEnv


def best_time(fn: Callable[[], np.ndarray], repeats: int) -> tuple[float, np.ndarray]:
    """Best wall time of ``repeats`` calls, and the last call's result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def implementations(
    env: RatingEnv, rng: np.random.Generator, n: int
) -> dict[str, Callable[[], np.ndarray]]:
    """The package baseline and our two fast paths, on the same ``n`` random matches.

    Each returns an ``(n, 4)`` array of new (winner mu, sigma, loser mu, sigma).
    """
    mu_w, mu_l = rng.uniform(0, 50, n), rng.uniform(0, 50, n)
    sd_w, sd_l = rng.uniform(0.5, 9, n), rng.uniform(0.5, 9, n)
    drawn = rng.random(n) < 0.3
    rows = list(zip(mu_w.tolist(), sd_w.tolist(), mu_l.tolist(), sd_l.tolist(), drawn.tolist()))

    def package() -> np.ndarray:
        out = []
        for a, b, c, d, e in rows:
            w, l = trueskill.rate_1vs1(
                trueskill.Rating(a, b), trueskill.Rating(c, d), drawn=e, env=env.package
            )
            out.append((w.mu, w.sigma, l.mu, l.sigma))
        return np.array(out)

    def fast_scalar() -> np.ndarray:
        out = []
        for a, b, c, d, e in rows:
            w, l = rate_1v1_fast(Rating(a, b), Rating(c, d), e, env=env)
            out.append((w.mu, w.sigma, l.mu, l.sigma))
        return np.array(out)

    def fast_vectorized() -> np.ndarray:
        return np.stack(rate_1v1_arrays(mu_w, sd_w, mu_l, sd_l, drawn, env=env), axis=1)

    return {
        "trueskill.rate_1vs1 (package)": package,
        "rate_1v1_fast (scalar)": fast_scalar,
        "rate_1v1_arrays (vectorized)": fast_vectorized,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="number of 1v1 updates")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parse_with_smoke(parser, "tiny sizes, seconds: checks that it runs", n=200, repeats=1)

    impls = implementations(RatingEnv(), np.random.default_rng(args.seed), args.n)
    timed = {name: best_time(fn, args.repeats) for name, fn in impls.items()}
    (t_pkg, ref), (t_scalar, _), (t_vec, _) = timed.values()
    diffs = {name: float(np.abs(out - ref).max()) for name, (_, out) in timed.items()}

    print(f"TrueSkill 1v1 updates: n={args.n}, seed={args.seed}, best of {args.repeats}")
    print(f"{'implementation':<32}{'seconds':>10}{'updates/s':>14}{'speedup':>9}{'max|diff|':>12}")
    for name, (secs, _) in timed.items():
        rate = args.n / secs
        print(f"{name:<32}{secs:>10.4f}{rate:>14,.0f}{t_pkg / secs:>8.1f}x{diffs[name]:>12.2e}")
    print(
        json.dumps(
            {
                "n": args.n,
                "package_updates_per_s": round(args.n / t_pkg),
                "fast_updates_per_s": round(args.n / t_vec),
                "ratio": round(t_pkg / t_vec, 1),
                "fast_scalar_updates_per_s": round(args.n / t_scalar),
                "scalar_ratio": round(t_pkg / t_scalar, 1),
                "max_abs_diff": max(diffs.values()),
            }
        )
    )


if __name__ == "__main__":
    main()
