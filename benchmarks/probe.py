"""Exploitability probes on agents of known strength (connect four).

For every target, :func:`agents.trainers.exploit_probe.probe_exploitability` trains a
PPO best response against it for a fixed budget of env steps (``--budgets``, the same
for every target), then plays ``--games`` evaluation games, seats alternating, and
reports the exploiter's win rate with a 95% Wilson interval. Baseline in the same run:
the same evaluation with the untrained (budget 0, random-init) learner, which shows
what the probe's training found.

Targets, as the ladder plays them (neural agents sample at temperature 1):
``random``; ``heuristic`` (win, block, else a central column; epsilon 0); a
random-init registry ``mlp`` [128, 128]; and a league-trained main agent
(:func:`benchmarks.learning.train_league` for ``--train-minutes``, or ``--trained``
a checkpoint). Expected: random and heuristic highly exploitable, the trained agent
less exploitable than the random-init one.

    nice -n 10 python benchmarks/probe.py [--budgets 1e6] [--games 1000] [--train-minutes 5]
    nice -n 10 python benchmarks/probe.py --budgets 3e4,1e5,3e5,1e6 --trained agent.safetensors
    python benchmarks/probe.py --smoke   # seconds: checks that it runs

Prints a table, then one JSON line: ``env``, ``budgets_env_steps``, ``games``,
``trained_target``, ``trained_target_strength`` and, per target (``random``,
``heuristic``, ``random_init_mlp``, ``league_trained``), ``untrained_win_rate`` and per
budget ``win_rate``, ``ci95``, ``draws``, ``env_steps``, ``train_seconds``. ``--smoke``:
one PPO update per probe (8,192 env steps), 20 evaluation games, a league target
trained for one update on 32 boards (the suite's check that it runs, no numbers).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
from pathlib import Path

# This folder holds ``league.py``, named like the ``league`` package: run as a script,
# the folder would shadow the package on sys.path, so put the repository root there.
_ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == _ROOT / "benchmarks":
    sys.path[0] = str(_ROOT)

import torch

from agents.catalog import make_policy
from agents.checkpoint import LoadedCheckpoint, save_checkpoint, serialize_weights
from agents.neural import NeuralPolicy, random_init_checkpoint
from agents.policy import Policy
from agents.trainers.exploit_probe import ProbeConfig, ProbeResult, probe_exploitability
from benchmarks.learning import train_league, win_rate

ENV = "connect_four-v3"


def random_init_mlp(seed: int) -> NeuralPolicy:
    """A fresh registry ``mlp`` [128, 128] (the league's architecture), sampling at temperature 1."""
    state_dict, spec = random_init_checkpoint(ENV, "mlp", {"hidden": [128, 128]}, seed=seed)
    sha = hashlib.sha256(serialize_weights(state_dict)).hexdigest()
    return NeuralPolicy(LoadedCheckpoint(spec=spec, state_dict=state_dict, sha256=sha))


def league_trained(minutes: float, path: str | None, seed: int, save_to: str | None,
                   smoke: bool = False) -> tuple[NeuralPolicy, dict]:
    """The league's main agent (temperature 1), trained now (saved to ``save_to``) or loaded from
    ``path``; ``smoke``: one update on 32 boards."""
    if path:
        policy = make_policy(f"file:{path}", ENV)
        return policy, {"source": path}
    trainer, _, info = train_league(minutes, seed, max_steps=1, num_envs=32) if smoke else train_league(minutes, seed)
    if save_to:
        save_checkpoint(trainer.trainers["main"].model.actor, trainer.spec, save_to)
    policy = NeuralPolicy.from_module(trainer.trainers["main"].model.actor, trainer.spec)
    return policy, {"source": "league main, smoke" if smoke else f"league main, {minutes:g} min", **info}


def run_probes(targets: dict[str, Policy], budgets: list[int], games: int,
               seed: int) -> dict[str, dict[int, ProbeResult]]:
    """Every target probed at budget 0 (the untrained learner) and at every budget."""
    rows: dict[str, dict[int, ProbeResult]] = {}
    for name, target in targets.items():
        start = time.perf_counter()
        rows[name] = {b: probe_exploitability(ENV, target, ProbeConfig(budget_env_steps=b, eval_games=games, seed=seed))
                      for b in [0, *budgets]}
        logging.getLogger(__name__).warning("%s probed in %.0f s", name, time.perf_counter() - start)
    return rows


def report(rows: dict[str, dict[int, ProbeResult]], budgets: list[int], out: dict) -> None:
    """Print the table and fill ``out`` with the numbers."""
    print(f"{'target':<18}{'env steps':>11}{'win rate':>10}{'95% interval':>18}{'draws':>7}{'train s':>9}")
    for name, by_budget in rows.items():
        out[name] = {"untrained_win_rate": by_budget[0].win_rate}
        for b in [0, *budgets]:
            r = by_budget[b]
            print(f"{name:<18}{b:>11,}{r.win_rate:>10.3f}{f'[{r.ci_low:.3f}, {r.ci_high:.3f}]':>18}"
                  f"{r.draws:>7}{r.train_seconds:>9.0f}")
            if b:
                out[name][str(b)] = {"win_rate": r.win_rate, "ci95": [round(r.ci_low, 4), round(r.ci_high, 4)],
                                     "draws": r.draws, "env_steps": r.env_steps,
                                     "train_seconds": round(r.train_seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="1e6", help="env steps per probe, comma-separated")
    parser.add_argument("--games", type=int, default=1000, help="evaluation games per probe")
    parser.add_argument("--train-minutes", type=float, default=5.0, help="league training of the trained target")
    parser.add_argument("--trained", default=None, help="a checkpoint to use as the trained target instead")
    parser.add_argument("--save-trained", default=None, help="save the trained target here (.safetensors)")
    parser.add_argument("--targets", default="random,heuristic,random_init_mlp,league_trained",
                        help="comma-separated subset of the targets to probe")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that it runs")
    args = parser.parse_args()
    strength_games = 400
    if args.smoke:
        args.budgets, args.games, args.threads, strength_games = "8192", 20, 1, 20
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    trained, trained_info = league_trained(args.train_minutes, args.trained, args.seed, args.save_trained,
                                           args.smoke)
    strength = {"vs_heuristic": win_rate(trained, "heuristic", strength_games),
                "vs_random": win_rate(trained, "random", strength_games)}
    targets: dict[str, Policy] = {"random": make_policy("random", ENV), "heuristic": make_policy("heuristic", ENV),
                                  "random_init_mlp": random_init_mlp(args.seed), "league_trained": trained}
    targets = {name: targets[name] for name in args.targets.split(",")}
    budgets = [int(float(b)) for b in args.budgets.split(",")]
    rows = run_probes(targets, budgets, args.games, args.seed)
    print(f"connect four exploitability: PPO best response, {args.games} evaluation games per row "
          f"(env steps 0: the untrained learner)")
    print(f"trained target: {trained_info}; its win rate (T=1) vs heuristic "
          f"{strength['vs_heuristic']:.3f}, vs random {strength['vs_random']:.3f}")
    out: dict = {"env": ENV, "budgets_env_steps": budgets, "games": args.games, "trained_target": trained_info,
                 "trained_target_strength": strength}
    report(rows, budgets, out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
