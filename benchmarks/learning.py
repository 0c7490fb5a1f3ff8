"""Learning: a PPO league's main agent after 10 minutes on 2 CPUs, and how fast it trains.

connect four:
(a) ours: :class:`arena.training.trainer.LeagueTrainer` with one ``main`` learner (PFSP
    over its past snapshots and the scripted baselines, half of its games PFSP among
    the baselines alone - :class:`LeagueConfig`'s default - and no self-play) on the real
    services (embedded Redis snapshot pool, SQLite) in a temporary data dir, for
    ``--minutes`` of training (or ``--max-steps`` env steps) on ``--threads`` torch
    threads; then the final weights,
    greedy (temperature 0), play 400 games against ``heuristic`` and 400 against
    ``random``, seats balanced (``plan_matches`` alternates them);
(b) naive: what a competent person writes without our tricks (CleanRL's loop on an AEC
    env): one ``connect_four_v3.env()``, one torch forward per learner move, scripted
    opponents called on one observation at a time, then exactly the same network and
    the same PPO update (:meth:`SelfPlayPPO.optimise` of :meth:`Rollout.samples`) on a rollout of the
    same size, for ``--naive-seconds``. Both count learner decisions per second,
    updates included.

hide and seek: ``benchmarks.support.hide_and_seek_learning.hide_and_seek_section(minutes)``
adds its ``hs_*`` keys when that trainer exists (skipped otherwise).

speed on a device (``--device cuda``; ``--device cpu`` measures the same code on the CPU):
env steps/s, updates included, of PPO self-play on connect four against a frozen
snapshot of the learner (``--ppo-envs`` boards, the league's network) with boards,
rollouts, GAE and updates on the device, beside the CPU default (numpy core) and the
torch core on the CPU; hide-and-seek env stepping (random actions, resets excluded)
in the numpy core, the torch core on the CPU and on the device; hide-and-seek PPO env
steps/s on the device and on the CPU default. ``--speed-only`` skips everything else.

    python benchmarks/learning.py [--minutes 10] [--naive-seconds 60] [--hs-minutes 10]
    python benchmarks/learning.py --max-steps 30e6 --hs-minutes 0   # fixed work, for comparisons
    python benchmarks/learning.py --device cuda --speed-only      # device speed only
    python benchmarks/learning.py --smoke                         # seconds: checks that it runs

Prints a table, then one JSON line: ``c4_vs_heuristic``, ``c4_vs_random``,
``env_steps_per_s``, ``naive_env_steps_per_s``, the ``hs_*`` keys of
:func:`benchmarks.support.hide_and_seek_learning.hide_and_seek_section` unless
``--hs-minutes 0``, and the ``--device`` section's keys. ``--smoke``: one PPO update
on 32 boards, 40 evaluation games, one rollout of the naive loop, two hide-and-seek
updates on 16 episodes (the suite's check that it runs, no numbers).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

# This folder holds ``league.py``, named like the ``league`` package: run as a script,
# the folder would shadow the package on sys.path, so put the repository root there.
_ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == _ROOT / "benchmarks":
    sys.path[0] = str(_ROOT)

import numpy as np
import torch

from agents.catalog import make_policy
from agents.checkpoint_spec import make_spec
from agents.neural import NeuralPolicy
from agents.policy import MatchRng
from agents.trainers.hide_and_seek.ppo import HideAndSeekPPO, HideAndSeekPPOConfig
from agents.trainers.ppo_core import Rollout
from agents.trainers.ppo_selfplay import PPOConfig, SelfPlayPPO, actor_hparams
from arena.core.settings import Settings
from arena.engine import play_matches
from arena.engine.plan import plan_matches
from arena.storage.wiring import open_services
from arena.training.config import LeagueConfig
from arena.training.trainer import LeagueTrainer
from envs.connect_four import ConnectFourCore
from envs.hide_and_seek.core import HideAndSeekCore
from envs.hide_and_seek.device.core import TorchHideAndSeekCore
from envs.hide_and_seek.rules import NUM_ACTIONS
from envs.registry import get_spec

ENV = "connect_four-v3"


def win_rate(policy: NeuralPolicy, opponent: str, games: int = 400, seed: int = 2024) -> float:
    """Share of ``games`` won by ``policy`` against ``opponent``, seats alternating."""
    opp = make_policy(opponent, ENV)
    jobs = plan_matches([policy.agent_id, opp.agent_id], get_spec(ENV), games, seed)
    records = play_matches(ENV, jobs, {policy.agent_id: policy, opp.agent_id: opp})
    return sum(r.winner is not None and r.seats[r.winner] == policy.agent_id for r in records) / games


def train_league(minutes: float, seed: int = 0, max_steps: int | None = None,
                 num_envs: int | None = None) -> tuple[LeagueTrainer, float, dict]:
    """Train a main agent on fresh services; returns the trainer, steps/s and the final numbers.

    ``max_steps`` (env steps) replaces the time budget: the same work whatever else runs
    on the machine, for comparing settings (the learning-rate schedule follows it too).
    ``num_envs`` replaces the league's boards per update (smoke runs).
    """
    data_dir = tempfile.mkdtemp(prefix="arena-learning-")
    # Self-play share 0 (AlphaStar: 0.35): within 10 minutes, games against a near-random
    # early self teach little; PFSP over the baselines and the past snapshots (fictitious
    # self-play) learned faster in our sweeps (0.71 vs 0.50 vs heuristic after 3 minutes).
    config = LeagueConfig(name="bench", env_id=ENV, roles=("main",), minutes=minutes, seed=seed,
                          role_config=replace(LeagueConfig().role_config, self_play=0.0))
    if num_envs is not None:
        config = replace(config, ppo=replace(config.ppo, num_envs=num_envs))
    if max_steps is not None:
        per_update = config.ppo.num_envs * config.ppo.rollout_steps
        config = replace(config, minutes=float("inf"), max_updates=max(1, math.ceil(max_steps / per_update)))
    with open_services(Settings(data_dir=data_dir)) as services:
        trainer = LeagueTrainer(services, config)
        result = trainer.run()
    learner = trainer.state.learners[0]
    return trainer, result.steps_per_s, {"updates": result.updates, "env_steps": result.env_steps,
                                          "snapshots": len(trainer.state.snapshots),
                                          "pfsp_win_rates": {b: round(learner.table.win_rate(b), 3)
                                                             for b in trainer.baselines}}


def naive_env_steps_per_s(config: PPOConfig, opponents: Sequence[str], probs: Sequence[float],
                          seconds: float, seed: int = 0) -> float:
    """Learner decisions per second of the single-env PettingZoo PPO loop (updates included)."""
    from pettingzoo.classic import connect_four_v3

    trainer = SelfPlayPPO(ConnectFourCore(), PPOConfig(**{**config.__dict__, "num_envs": 1}))
    model, policies = trainer.model, [make_policy(n, ENV) for n in opponents]
    rng = np.random.default_rng(seed)
    env = connect_four_v3.env()
    size = config.num_envs * config.rollout_steps  # the same rollout size as ours

    def new_game() -> tuple[str, int]:
        env.reset(seed=int(rng.integers(2**31)))
        learner = env.agents[int(rng.integers(2))]
        return learner, int(rng.choice(len(policies), p=probs))

    def opponent_moves(learner: str, opp: int, ply: int) -> bool:
        """Opponent plays while it is its turn; True if the game ended."""
        while env.agent_selection != learner:
            obs = env.observe(env.agent_selection)
            r = MatchRng(np.array([ply]), np.array([1]), np.array([ply]))
            a = policies[opp].act(obs["observation"][None], obs["action_mask"][None].astype(bool), r)
            env.step(int(a[0]))
            if any(env.terminations.values()) or any(env.truncations.values()):
                return True
        return False

    learner, opp = new_game()
    ply, steps, start = 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        buf = {k: [] for k in ("obs", "mask", "act", "logp", "val", "rew", "done")}
        for _ in range(size):
            if opponent_moves(learner, opp, ply):  # cannot happen: games end on our reply below
                learner, opp = new_game()
                continue
            obs = env.observe(learner)
            o = torch.as_tensor(obs["observation"], dtype=torch.float32)[None]
            m = torch.as_tensor(obs["action_mask"].astype(bool))[None]
            with torch.no_grad():
                dist, value = model(o, m)
                action = dist.sample()
            env.step(int(action))
            ply += 1
            done = any(env.terminations.values()) or opponent_moves(learner, opp, ply)
            for k, v in zip(buf, (o[0], m[0], action[0], dist.log_prob(action)[0], value[0],
                                  float(env.rewards[learner]) if done else 0.0, float(done))):
                buf[k].append(v)
            if done:
                learner, opp = new_game()
        o = env.observe(learner)
        with torch.no_grad():
            _, next_value = model(torch.as_tensor(o["observation"], dtype=torch.float32)[None],
                                  torch.as_tensor(o["action_mask"].astype(bool))[None])
        obs, mask, act, logp, val = (torch.stack(buf[k])[:, None] for k in ("obs", "mask", "act", "logp", "val"))
        roll = Rollout(obs, mask, act, logp, val, rew=torch.tensor(buf["rew"])[:, None],
                       done=torch.tensor(buf["done"])[:, None], next_value=next_value)
        trainer.optimise(roll.samples(config.gamma, config.gae_lambda))
        steps += size
    return steps / (time.perf_counter() - start)


def ppo_steps_per_s(device: str, num_envs: int, updates: int, torch_core: bool = False) -> float:
    """Env steps/s of connect-four PPO against a frozen snapshot of the learner (first update excluded)."""
    cfg = replace(LeagueConfig().ppo, num_envs=num_envs, device=device, torch_core=torch_core)
    trainer = SelfPlayPPO(ConnectFourCore(), cfg, pick_opponents=lambda rng, k: np.zeros(k, np.int64))
    spec = make_spec(ENV, cfg.arch, actor_hparams(cfg))
    opponents = [NeuralPolicy.from_module(trainer.model.actor, spec)]
    trainer.update(opponents)  # warm-up (kernels, allocator); update() ends in a host read
    start = time.perf_counter()
    for _ in range(updates):
        trainer.update(opponents)
    return updates * num_envs * cfg.rollout_steps / (time.perf_counter() - start)


def hs_stepping_per_s(device: str | None, n: int, rounds: int = 2) -> float:
    """Hide-and-seek env steps/s, random actions, resets excluded (``None``: the numpy core)."""
    rng = np.random.default_rng(0)
    actions = rng.integers(0, NUM_ACTIONS, size=(60, n, 4))
    if device is None:
        core = HideAndSeekCore(n)
        reset = lambda: core.reset(np.arange(n))
        step = core.step
    else:
        core = TorchHideAndSeekCore(n, device=device)
        bank, picks = core.draw_layouts(np.arange(min(n, 4096))), torch.arange(n) % min(n, 4096)
        reset = lambda: core.reset_from_bank(bank, picks.to(core.device))
        actions = torch.as_tensor(actions, device=device)
        step = core.step
    best = 0.0
    for _ in range(rounds):
        reset()
        start = time.perf_counter()
        for t in range(60):
            obs, *_ = step(actions[t])
        float(obs[0, 0, 0])  # waits for the device
        best = max(best, 60 * n / (time.perf_counter() - start))
    return best


def hs_ppo_steps_per_s(device: str, num_envs: int, updates: int) -> float:
    """Env steps/s of hide-and-seek PPO (updates included; first update excluded)."""
    on_device = device != "cpu"
    cfg = HideAndSeekPPOConfig(num_envs=num_envs, device=device, layout_bank=4096 if on_device else 0)
    trainer = HideAndSeekPPO(cfg)
    trainer.update()
    start = time.perf_counter()
    for _ in range(updates):
        trainer.update()
    return updates * num_envs * 60 / (time.perf_counter() - start)


def device_speed(device: str, ppo_envs: int, hs_envs: int, updates: int) -> dict:
    """The ``--device`` section: the device's numbers beside the CPU's, same code."""
    cpu_envs = min(ppo_envs, 4096)  # the CPU default's numbers settle long before that
    out = {
        "device": device,
        "c4_ppo_device_env_steps_per_s": ppo_steps_per_s(device, ppo_envs, updates, torch_core=True),
        "c4_ppo_cpu_env_steps_per_s": ppo_steps_per_s("cpu", cpu_envs, updates),
        "c4_ppo_cpu_torch_core_env_steps_per_s": ppo_steps_per_s("cpu", cpu_envs, updates, True),
        "hs_step_numpy_per_s": hs_stepping_per_s(None, min(hs_envs, 4096)),
        "hs_step_torch_cpu_per_s": hs_stepping_per_s("cpu", min(hs_envs, 4096)),
        "hs_step_device_per_s": hs_stepping_per_s(device, hs_envs),
        "hs_ppo_device_env_steps_per_s": hs_ppo_steps_per_s(device, hs_envs, updates),
        "hs_ppo_cpu_env_steps_per_s": hs_ppo_steps_per_s("cpu", 256, updates),
    }
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in out.items()}


def hide_and_seek(minutes: float, smoke: bool = False) -> dict:
    """The hide-and-seek trainer's section, if that trainer exists (``smoke``: two tiny updates)."""
    try:
        from benchmarks.support.hide_and_seek_learning import hide_and_seek_section
    except ImportError as exc:
        logging.getLogger(__name__).warning("hide-and-seek section skipped: %s", exc)
        return {}
    if smoke:
        tiny = HideAndSeekPPOConfig(num_envs=16, minibatches=4, hidden=[16])
        return dict(hide_and_seek_section(minutes, config=tiny, target_generations=1, eval_episodes=8, max_updates=2))
    return dict(hide_and_seek_section(minutes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="training time of our league")
    parser.add_argument("--max-steps", type=float, default=None,
                        help="train for this many env steps instead of --minutes (comparisons on a busy machine)")
    parser.add_argument("--naive-seconds", type=float, default=60.0, help="time of the naive loop")
    parser.add_argument("--hs-minutes", type=float, default=10.0, help="hide-and-seek section (0: skip)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="add the device speed section (cpu, cuda)")
    parser.add_argument("--speed-only", action="store_true", help="only the --device section")
    parser.add_argument("--ppo-envs", type=int, default=0,
                        help="boards of device PPO (default 32768 on a GPU, 1024 on a CPU)")
    parser.add_argument("--hs-envs", type=int, default=0,
                        help="hide-and-seek episodes at once (default 16384 on a GPU, 1024 on a CPU)")
    parser.add_argument("--updates", type=int, default=3, help="timed updates per PPO speed number")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that it runs")
    args = parser.parse_args()
    num_envs, games = None, 400
    if args.smoke:
        args.max_steps, args.naive_seconds, args.hs_minutes = 1, 0.01, 1.0
        args.ppo_envs, args.hs_envs, args.updates, num_envs, games, args.threads = 32, 16, 1, 32, 40, 1
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    speed = {}
    if args.device is not None:
        gpu = args.device != "cpu"
        speed = device_speed(args.device, args.ppo_envs or (32768 if gpu else 1024),
                             args.hs_envs or (16384 if gpu else 1024), args.updates)
        print(f"{'speed (env steps/s)':<44}{'value':>14}")
        for name, value in speed.items():
            print(f"{name:<44}{value:>14,}" if not isinstance(value, str) else f"{name:<44}{value:>14}")
        if args.speed_only:
            print(json.dumps(speed))
            return
    start = time.perf_counter()
    max_steps = None if args.max_steps is None else int(args.max_steps)
    trainer, ours, info = train_league(args.minutes, args.seed, max_steps, num_envs)
    train_s = time.perf_counter() - start
    policy = NeuralPolicy.from_module(trainer.trainers["main"].model.actor, trainer.spec, temperature=0.0)
    vs_heuristic, vs_random = win_rate(policy, "heuristic", games), win_rate(policy, "random", games)
    baselines = list(trainer.baselines)
    naive = naive_env_steps_per_s(trainer.cfg.ppo, baselines, np.full(len(baselines), 1 / len(baselines)),
                                  args.naive_seconds, args.seed)
    budget = f"{args.minutes:g} min" if max_steps is None else f"{max_steps:,} env steps of"
    print(f"connect four: {budget} league training ({train_s:.0f} s wall), {info}")
    print(f"{'':<44}{'value':>14}")
    for name, value in [(f"greedy main agent vs heuristic ({games} games)", f"{vs_heuristic:.3f}"),
                        (f"greedy main agent vs random ({games} games)", f"{vs_random:.3f}"),
                        ("ours: env steps/s (updates included)", f"{ours:,.0f}"),
                        ("naive PettingZoo PPO: env steps/s", f"{naive:,.0f}"),
                        ("speed-up", f"{ours / naive:.1f}x")]:
        print(f"{name:<44}{value:>14}")
    out = {"c4_vs_heuristic": vs_heuristic, "c4_vs_random": vs_random,
           "env_steps_per_s": round(ours, 1), "naive_env_steps_per_s": round(naive, 1)}
    if args.hs_minutes > 0:
        out.update(hide_and_seek(args.hs_minutes, args.smoke))
    print(json.dumps({**out, **speed}))


if __name__ == "__main__":
    from benchmarks.support.signals import unwind_on_sigterm

    unwind_on_sigterm()  # a SIGTERM cleans up as a Ctrl-C does: no server or client left running
    main()
