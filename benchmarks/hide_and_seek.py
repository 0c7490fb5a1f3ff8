"""Hide-and-seek with ramps: do the emergent phases appear, and in order?

One run of the hide-and-seek league (:mod:`arena.training.hide_and_seek.league`) on
``hide_and_seek-v1``'s standard quadrant layout, within a wall-clock budget (default 60
minutes on CPUs, 10 on a GPU), snapshots in an embedded Redis pool. By default the teams
learn from the game's own team reward alone (hidden or seen, per post-preparation step):
nothing pays for a fort, a ramp or a defended ramp. What the league does change is where
training episodes start: a start-state curriculum (boxes next to the doors while forts
are rare, later the ramp near a door with its reach set by automatic domain
randomization's rule), reported under ``config.start_state_curriculum``; the phase rates
are always measured on the standard layout. ``--shaped`` trains the shaped configuration
instead (:data:`arena.training.hide_and_seek.config.SHAPING`: the hiders paid 40 for a
fort, 10 by a fort potential, 30 for a defended ramp), ``--ablation`` runs the honest
run and then the shaped one, each with the whole ``--minutes``, and prints one table of
both.

The baseline is generation 0, the untrained networks (near-random play), measured the
same way; ours is every later generation. Per generation it prints the phase rates
measured against itself on the standard layout (chasing, fort, ramp use, ramp defense)
and the TrueSkill of its hiders and seekers (and the fort rate on its training layouts,
which start as the curriculum's boxes-by-the-doors ones), then a table per phase
(untrained baseline, max, first generation past its bar) and one JSON line:

``shaped`` (whether any shaping bonus was paid), ``baseline_rates`` (generation 0's rate
of each phase), ``generations``, ``env_steps``, ``env_steps_per_s`` (training env steps
per second of training), ``chasing_rates``, ``fort_rates``, ``ramp_use_rates``,
``ramp_defense_rates`` (per generation), ``fort_rate_max``, ``ramp_use_rate_max``,
``ramp_defense_rate_max``, ``first_generation`` (per phase, the first generation whose
rate passed 0.5 for fort and ramp defense, 0.3 for ramp use; ``null`` if none),
``phases_in_order`` (fort, then ramp use, then ramp defense, each first reached in that
order), ``hider_mu`` / ``seeker_mu``, ``config`` (sizes, ``rewards``: ``team`` or
``shaped``, the ``bonuses``, the ``start_state_curriculum``, ``gamma``, ``critic``:
``central`` (the default) or ``local``, ``transitions_per_update``: num_envs x steps x agents, 25,600 by
default on CPUs, 409,600 with the GPU preset's 2,048 envs). With ``--ablation`` the
honest run's keys, plus ``ablation.shaped``: the shaped run's.

Before training (and alone with ``--core-only``) it measures the host v1 cores, pinned to
one CPU (as ``taskset -c 0``): ``core_steps_per_s`` (env steps per second of the compiled
core, :class:`envs.hide_and_seek.compiled_v1.CompiledHideAndSeekV1Core`, the trainer's and
the service's), ``baseline_core_steps_per_s`` (the numpy core's,
:class:`envs.hide_and_seek.core_v1.HideAndSeekV1Core`) and ``core_speedup`` (their ratio):
``core_batch`` (128) standard quadrant episodes played to their end with random legal
actions and reset together, as the trainer does; only ``reset`` and ``step`` are timed
(``--core-seconds`` each, after a warm-up that also compiles). Measured (commit of issue
30, one core of the 2-core machine, the other busy): see docs/leagues.md, "The v1 core".

    nice python benchmarks/hide_and_seek.py --minutes 60 --data-dir runs/hs-honest   # the headline
    nice python benchmarks/hide_and_seek.py --minutes 60 --critic local   # critics on each agent's own view
    nice python benchmarks/hide_and_seek.py --minutes 60 --exploiters 1   # one exploiter per role
    nice python benchmarks/hide_and_seek.py --ablation --minutes 60   # honest, then shaped: two hours
    python benchmarks/hide_and_seek.py --smoke   # seconds, tiny sizes: checks that it runs (the suite's)
    python benchmarks/hide_and_seek.py --scripted   # no training: is ramp defense feasible at all?
    python benchmarks/hide_and_seek.py --core-only   # the v1 cores' speed alone (seconds)
    python benchmarks/hide_and_seek.py --speed   # the whole loop against --classic-loop (minutes)

``--speed`` (issue 30) runs the whole loop (updates, evaluation, snapshots, saves) of the
defaults and of ``--classic-loop`` (the loop before issue 30: the numpy core, the critic
called per step, 4 passes of 6 minibatches, every generation evaluated) for
``--speed-minutes`` each, pinned to one CPU with one torch thread; its JSON is the default
run's keys with ``env_steps_per_s`` the loop's env steps per wall second, plus
``baseline_env_steps_per_s``, ``speedup``, ``baseline_config``. ``--smoke`` also runs a
tiny speed comparison (its ``speedup`` means nothing at those sizes). Every run's JSON has
``evaluated`` (per generation: standard-layout evaluation, else its training episodes) and
``rate_agreement`` (over evaluated generations, evaluation vs training-episode rates per
phase). Measured: docs/leagues.md, "A cheaper learner loop".

``--exploiters N`` adds N exploiters per role (:mod:`arena.training.hide_and_seek.exploiters`:
trained only against the current mains, frozen into the mains' pools when they win,
reset to the main's weights when they stop; ``--exploiter-share`` is the share of the
envs they play in together, default 0.25); each generation's row then ends with every
exploiter's score against the other role's main and its edge over its own main's
self-play score (``*``: frozen, ``r``: reset), and the JSON's
``exploiters`` holds ``per_role``, per role its ``snapshots`` and ``resets``, and
``edges`` (per generation, per role, each exploiter's edge). ``--cpu-clock`` counts
``--minutes`` in this process's CPU time, so runs side by side on a busy machine get the
same compute (the JSON's ``budget_clock``, ``budget_s``).

``--scripted`` trains nothing: planned hider teams (:mod:`agents.hide_and_seek.feasibility`:
one hider builds the fort while the other defends the ramp, each plan searched exactly
over the env's rules) play ``--layouts`` standard layouts (seeds from ``--seed``) in the
real core, whose detectors decide. It prints a table per level (``detectors``: exactly
what the benchmark's phase detectors count, the ramp out of the seekers' use; ``sealed``:
door boxes also locked and both hiders back inside) and one JSON line: ``env``,
``layouts``, ``steps``, ``prep_steps``, ``fort_rate``, ``ramp_defense_rate``,
``both_rate``, ``bound_both_rate`` (each task fits alone: an upper bound), the ``sealed_`` four,
``ramp_from_door`` (walls-only steps from
the nearest door to the ramp: mean, median, p90, max, ``hist``), ``alone_steps`` (the
fewest steps of one hider doing a task alone), ``prep_sweep`` / ``prep_for_0_9`` (per
level, the ``both`` rate with longer preparations until it reaches 0.9, v1's defaults
unchanged), ``mismatches`` (plans the planner's model and the core disagree on: 0),
``capped`` (searches that gave up at ``max_states``, ``--max-states``: 20,000, the smoke's
2,000; a capped task counts as not done), ``wall_s``. With today's detector (the ramp off the
vault spots), ``--layouts 200``, 35 minutes on a shared core: fort, ramp defense and both
1.000 at the detectors' level; sealed 0.995 / 0.945 / 0.735 (each part fits alone in
0.940), 0.830 with 22 preparation steps and 0.905 with 24; 0 mismatches, 62 searches
capped. The defaults (1,000 layouts) took 251 s while the detector still counted a ramp
locked on a vault spot: sealed ``both`` 0.915 then, 0.452 of the layouts ending with the
ramp on a vault spot (docs/leagues.md, "Is ramp defense feasible?").

Every training number measured so far is of the **shaped** configuration (what was then the
default, now ``--shaped``): the hiders were paid for exactly the fort and the defended ramp
that the detectors count, so those forts did not emerge from the game's reward. The honest
run (the default since issue 21) has not been measured yet. The shaped runs (60 minutes,
both cores of the 2-core machine): commit 072b838 (pushable boxes, hider shaping 40/10/10,
two-stage curriculum with the ramp two cells outside a door; nothing else running): 470
generations, 30.0M env steps, 12.1k env steps/s of training. Standard-layout fort 0.02
untrained -> >= 0.5 from generation 121 -> 0.85 max (>= 0.8 in 74 generations from 226
on); seekers' ramp use 0.14 background -> >= 0.3 from generation 165 (after forts) -> 0.90
max, chasing back up from 0.39 to ~0.5 as they climbed over the forts; ramp defense never
above the untrained 0.02. With a hider next to the ramp in the ramp stage (shared with a
test run for ~60% of the hour): 390 generations, 24.9M env steps, fort >= 0.5 from
generation 120 -> 0.91, ramp use >= 0.3 from 243 -> 0.93, ramp defense <= 0.008. With the
ramp stage's reach (commit a10bbb7, shaping 40/10/30; nothing else running): 423
generations, 27.0M env steps, 11.2k env steps/s; fort >= 0.5 from generation 134 -> 0.90
(>= 0.8 in 134 generations from 234 on), ramp use >= 0.3 from 221 -> 0.96; the reach rose
0 -> 0.4 (generations 100-162) and stayed there, the stage defending 0.11-0.23 of its own
episodes; standard-layout ramp defense <= 0.012 after generation 0 (docs/leagues.md).
Only the seekers' ramp use was unpaid in those runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == _ROOT / "benchmarks":
    sys.path[0] = str(_ROOT)

import torch

from agents.trainers.hide_and_seek.ppo import CRITICS, HideAndSeekPPOConfig
from agents.trainers.ppo_core import PRECISIONS
from arena.snapshots.durable import FileSnapshotStore
from arena.snapshots.pool import RedisSnapshotPool
from arena.storage.redis_server import EmbeddedRedis, connect_redis
from arena.training.hide_and_seek.config import SHAPING, HideAndSeekLeagueConfig, classic_loop, default_v1_ppo
from arena.training.hide_and_seek.evaluation import GenerationSummary
from arena.training.hide_and_seek.league import HideAndSeekLeague

THRESHOLDS = {"fort": 0.5, "ramp_use": 0.3, "ramp_defense": 0.5}


def phases_in_order(first: dict[str, int | None]) -> bool:
    """Fort, ramp use and ramp defense were all reached, in that order (ties allowed)."""
    gens = [first[p] for p in ("fort", "ramp_use", "ramp_defense")]
    return all(g is not None for g in gens) and gens == sorted(gens)


def summarise(league: HideAndSeekLeague) -> dict:
    gens = league.generations
    rates = {p: [round(s.phase_rates.get(p, 0.0), 4) for s in gens] for p in ("chasing", *THRESHOLDS)}
    first = league.first_generations(THRESHOLDS)
    steps, seconds = league.trainer.total_steps, league.train_seconds
    return {
        "generations": len(gens),
        "baseline_rates": {p: v[0] for p, v in rates.items()},
        "env_steps": steps,
        "env_steps_per_s": round(steps / seconds, 1) if seconds else 0.0,
        **{f"{p}_rates": v for p, v in rates.items()},
        "fort_rate_max": max(rates["fort"]),
        "ramp_use_rate_max": max(rates["ramp_use"]),
        "ramp_defense_rate_max": max(rates["ramp_defense"]),
        "first_generation": first,
        "phases_in_order": phases_in_order(first),
        "train_fort_rates": [round(s.door_block_rate, 4) for s in gens],
        "curriculum_shares": [[round(s.curriculum, 3), round(s.ramp_curriculum, 3)] for s in gens],
        "ramp_reach": [s.ramp_reach for s in gens],
        "ramp_stage_defense_rates": [None if s.ramp_stage_defense is None else round(s.ramp_stage_defense, 4)
                                     for s in gens],
        "hider_mu": [round(s.hider_mu, 2) for s in gens],
        "seeker_mu": [round(s.seeker_mu, 2) for s in gens],
        "evaluated": [s.evaluated for s in gens],
        "rate_agreement": rate_agreement(gens),
        "exploiters": {"per_role": league.cfg.ppo.exploiters, **league.exploiters.summary(),
                       "edges": [{role: [e["edge"] for e in s.exploiters if e["role"] == role]
                                   for role in ("hider", "seeker")} for s in gens[1:]]},
    }


def rate_agreement(gens: list[GenerationSummary]) -> dict:
    """Per phase, over the evaluated generations that also have training-episode rates: the
    mean and max absolute difference between the two (``pairs``: how many generations)."""
    both = [s for s in gens if s.evaluated and s.training_phase_rates]
    out: dict = {"pairs": len(both)}
    for p in PHASE_NAMES:
        diffs = [abs(s.phase_rates.get(p, 0.0) - s.training_phase_rates.get(p, 0.0)) for s in both]
        out[p] = {"mean_abs": round(sum(diffs) / len(diffs), 4), "max_abs": round(max(diffs), 4)} if diffs else None
    return out


def row(s: GenerationSummary) -> str:
    r = s.phase_rates
    return (f"{s.generation:4d} {s.updates:6d} {s.env_steps:11,d} {r.get('chasing', 0):8.3f} {r.get('fort', 0):6.3f} "
            f"{r.get('ramp_use', 0):9.3f} {r.get('ramp_defense', 0):13.3f} {s.hider_mu:8.2f} {s.seeker_mu:9.2f}"
            f" {s.door_block_rate:10.3f} {s.curriculum:5.2f}/{s.ramp_curriculum:4.2f}"
            + ("" if s.ramp_stage_defense is None else f" {s.ramp_reach:5.2f} {s.ramp_stage_defense:11.3f}")
            + "".join(f"  x{e['role'][0]}{e['index']} {e['score']:.2f}{e['edge']:+.2f}{'*' if e['snapshot'] else ''}"
                      f"{'r' if e['reset'] else ''}" for e in s.exploiters))


def _core_rate(backend: str, n_envs: int, seconds: float, seed: int) -> float:
    """Env steps per second of ``reset`` + ``step`` of one host v1 core (see the module docstring)."""
    import numpy as np

    from envs.hide_and_seek.compiled_v1 import v1_core

    core = v1_core(n_envs, backend=backend)
    rng = np.random.default_rng(seed)
    _, masks = core.reset(rng.integers(0, 2**31, size=n_envs))  # warm-up (compiles the kernels once)
    core.step((rng.random(masks.shape) * masks).argmax(-1))
    spent, steps = 0.0, 0
    while spent < seconds or steps == 0:
        seeds = rng.integers(0, 2**31, size=n_envs)
        start = time.perf_counter()
        _, masks = core.reset(seeds)
        spent += time.perf_counter() - start
        for _ in range(core.max_steps):
            actions = (rng.random(masks.shape) * masks).argmax(-1)
            start = time.perf_counter()
            _, _, _, masks = core.step(actions)
            spent += time.perf_counter() - start
            steps += n_envs
    return steps / spent


def core_speed(n_envs: int = 128, seconds: float = 10.0, seed: int = 0) -> dict:
    """The compiled v1 core against the numpy one on one CPU: ``core_steps_per_s``,
    ``baseline_core_steps_per_s``, ``core_speedup`` (and ``core_batch``, ``core_cpu``)."""
    import os

    cpus = os.sched_getaffinity(0)
    cpu = min(cpus)
    os.sched_setaffinity(0, {cpu})
    try:
        baseline = _core_rate("numpy", n_envs, seconds, seed)
        fast = _core_rate("compiled", n_envs, seconds, seed)
    finally:
        os.sched_setaffinity(0, cpus)
    print(f"hide_and_seek-v1 host cores, {n_envs} envs, one CPU ({cpu}): numpy {baseline:,.0f} env steps/s, "
          f"compiled {fast:,.0f} env steps/s: {fast / baseline:.1f}x")
    return {"core_steps_per_s": round(fast, 1), "baseline_core_steps_per_s": round(baseline, 1),
            "core_speedup": round(fast / baseline, 2), "core_batch": n_envs, "core_cpu": cpu}


def scripted(layouts: int, seed: int, smoke: bool = False, max_states: int = 20_000) -> dict:
    """The ``--scripted`` run: planned teams on standard layouts (see the module docstring);
    ``max_states``: each search's cap (a capped search counts its task as not done, so the
    rates are lower bounds; ``capped`` says how many); ``smoke``: the preparation sweep stops
    two steps on (it plans again every layout still missed)."""
    from agents.hide_and_seek.feasibility import LEVELS, feasibility, preparation_needed

    start = time.perf_counter()
    seeds = list(range(seed, seed + layouts))
    res = feasibility(seeds, max_states=max_states)
    reports = res.pop("reports")
    print(f"hide_and_seek-v1 standard layouts: {layouts} (seeds {seeds[0]}..{seeds[-1]}), {res['max_steps']} steps, "
          f"{res['prep_steps']} of preparation; planned teams played in the core")
    print("level        fort  ramp_defense   both  bound_both")
    for level in LEVELS:
        pre = "" if level == "detectors" else "sealed_"
        print(f"{level:10s} {res[pre + 'fort_rate']:6.3f} {res[pre + 'ramp_defense_rate']:13.3f} "
              f"{res[pre + 'both_rate']:6.3f} {res[pre + 'bound_both_rate']:11.3f}")
    dist = res["ramp_from_door"]
    hist = {}
    for r in reports:
        hist[r.ramp_from_door] = hist.get(r.ramp_from_door, 0) + 1
    dist["hist"] = {str(k): hist[k] for k in sorted(hist)}
    print(f"ramp's steps from the nearest door: mean {dist['mean']}, median {dist['median']}, p90 {dist['p90']}, "
          f"max {dist['max']}; " + ", ".join(f"{k}: {v}" for k, v in dist["hist"].items()))
    for name, s in res["alone_steps"].items():
        print(f"one hider alone, {name}: mean {s['mean']}, median {s['median']}, p90 {s['p90']}, max {s['max']}, "
              f"not within preparation {s['over']}")
    sweep = {}
    for level in LEVELS:
        sweep[level] = preparation_needed(reports, level, start=res["prep_steps"],
                                          stop=res["prep_steps"] + (2 if smoke else 20), max_states=max_states)
        print(f"{level} both rate by preparation steps: " + ", ".join(f"{p}: {r:.3f}" for p, r in sweep[level].items()))
    reached = {lv: next((p for p, r in s.items() if r >= 0.9), None) for lv, s in sweep.items()}
    result = {"env": "hide_and_seek-v1", "layouts": layouts, "steps": res["max_steps"], "max_states": max_states, **res,
              "prep_sweep": {lv: {str(p): r for p, r in s.items()} for lv, s in sweep.items()},
              "prep_for_0_9": reached, "wall_s": round(time.perf_counter() - start, 1)}
    del result["max_steps"]
    print(json.dumps(result))
    return result


BONUSES = ("fort_bonus", "fort_potential_bonus", "ramp_defense_bonus", "ramp_use_bonus")
PHASE_NAMES = ("chasing", *THRESHOLDS)


def league_config(args: argparse.Namespace, shaped: bool, name: str) -> HideAndSeekLeagueConfig:
    """The league of one run: the game's team reward (``shaped`` adds :data:`SHAPING`), the
    command line's sizes, bonuses and start-state curriculum."""
    ppo = default_v1_ppo(args.seed, shaped=shaped)
    bonuses = {k: getattr(args, k) for k in BONUSES if getattr(args, k) is not None}
    ppo = replace(ppo, epochs=args.epochs, device=args.device, gamma=args.gamma, critic=args.critic,
                  exploiters=args.exploiters, exploiter_share=args.exploiter_share, precision=args.precision,
                  **args.sizes, **bonuses)
    cfg = HideAndSeekLeagueConfig(name=name, ppo=ppo, updates_per_generation=args.updates_per_generation,
                                  eval_episodes=args.eval_episodes, eval_every=args.eval_every,
                                  curriculum=not args.no_curriculum, curriculum_share=args.curriculum_share,
                                  curriculum_target=args.curriculum_target,
                                  curriculum_ramp=args.curriculum_ramp, ramp_reach_step=args.ramp_reach_step,
                                  ramp_reach_up=args.ramp_reach_up)
    return classic_loop(cfg) if args.classic_loop else cfg


def run_config(league: HideAndSeekLeague) -> dict:
    """What the run trained with (the league's own config: a resumed league keeps its saved one):
    sizes, the rewards (``bonuses``, all 0 when unshaped) and the start-state curriculum."""
    cfg, ppo = league.cfg, league.cfg.ppo
    return {"num_envs": ppo.num_envs, "minibatches": ppo.minibatches, "layout_bank": ppo.layout_bank,
            "core_backend": ppo.core_backend, "batched_values": ppo.batched_values, "eval_every": cfg.eval_every,
            "transitions_per_update": league.trainer.transitions_per_update,
            "epochs": ppo.epochs, "gamma": ppo.gamma, "critic": ppo.critic,
            "precision": ppo.precision, "precision_used": league.trainer.precision,
            "exploiters": ppo.exploiters, "exploiter_share": ppo.exploiter_share,
            "updates_per_generation": cfg.updates_per_generation,
            "eval_episodes": cfg.eval_episodes, "rewards": "shaped" if ppo.shaped else "team",
            "bonuses": {k: getattr(ppo, k) for k in BONUSES},
            "start_state_curriculum": {
                "curriculum": cfg.curriculum, "curriculum_share": cfg.curriculum_share,
                "curriculum_target": cfg.curriculum_target, "curriculum_ramp": cfg.curriculum_ramp,
                "ramp_reach_step": cfg.ramp_reach_step, "ramp_reach_up": cfg.ramp_reach_up,
                "ramp_reach_down": cfg.ramp_reach_down,
                "stages": "box_by_door: boxes start next to the doors inside; ramp_by_door: the ramp starts "
                          "near a door, a hider on its way (reach set by ADR's rule)"}}


def train_run(args: argparse.Namespace, pool: RedisSnapshotPool, data_dir: Path, shaped: bool,
              minutes: float, name: str | None = None) -> tuple[dict, HideAndSeekLeague]:
    """One league run of ``minutes`` (printing a row per generation); its result dict.
    ``--cpu-clock``: minutes of this process's CPU time, not of the wall clock."""
    clock = time.process_time if args.cpu_clock else time.perf_counter
    start, wall_start = clock(), time.perf_counter()
    name = name or ("bench-shaped" if shaped else "bench")
    league = HideAndSeekLeague(pool, data_dir, league_config(args, shaped, name))
    if league.cfg.ppo.shaped != shaped:
        print(f"note: resumed league {name!r} was saved {'with' if league.cfg.ppo.shaped else 'without'} "
              "shaping; its saved config wins")
    ppo = league.cfg.ppo
    rewards = ("shaped: " + ", ".join(f"{k} {getattr(ppo, k):g}" for k in BONUSES)) if ppo.shaped \
        else "the game's team reward only"
    print(f"hide_and_seek-v1 quadrant, {minutes:g} min, device {league.trainer.device}, "
          f"{ppo.num_envs} envs ({league.trainer.transitions_per_update:,} transitions per update), "
          f"gamma {ppo.gamma:g}, {ppo.critic} critic, {league.cfg.updates_per_generation} updates per "
          f"generation; rewards: {rewards}")
    print(" gen  upds   env steps  chasing   fort  ramp_use  ramp_defense  hider_mu  seeker_mu"
          "  train_fort  boxes/ramp  reach  stage_defense")
    print(row(league.generations[0]) + "   (baseline: untrained)")
    left = minutes - (clock() - start) / 60.0
    steps, loop_start = league.trainer.total_steps, clock()
    league.run(left, on_generation=lambda s: print(row(s), flush=True), clock=clock)
    loop_s = clock() - loop_start
    result = {"shaped": ppo.shaped, **summarise(league), "wall_s": round(time.perf_counter() - wall_start, 1),
              "budget_s": round(clock() - start, 1), "budget_clock": "cpu" if args.cpu_clock else "wall",
              "loop_env_steps_per_s": round((league.trainer.total_steps - steps) / loop_s, 1),
              "device": str(league.trainer.device), "config": run_config(league)}
    return result, league


def speed(args: argparse.Namespace, pool: RedisSnapshotPool, data_dir: Path) -> dict:
    """``--speed``: the whole loop (updates, evaluation, snapshots, saves) of today's defaults
    against the loop before issue 30 (:func:`classic_loop`: the numpy core too), each for
    ``--speed-minutes`` on one CPU and one torch thread, in this process, the baseline first."""
    import os

    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    torch.set_num_threads(1)
    args.device = "cpu"
    args.sizes = {**args.sizes, "layout_bank": 0}
    args.exploiters = 0  # both loops as they were measured: mains only
    rates = {}
    try:
        for name, classic in (("baseline", True), ("ours", False)):
            args.classic_loop = classic
            rates[name] = train_run(args, pool, data_dir, False, args.speed_minutes, name=f"speed-{name}")[0]
    finally:
        os.sched_setaffinity(0, cpus)
    ours, base = rates["ours"], rates["baseline"]
    print(f"whole loop, one CPU: baseline {base['loop_env_steps_per_s']:,.0f} env steps/s, ours "
          f"{ours['loop_env_steps_per_s']:,.0f}: {ours['loop_env_steps_per_s'] / base['loop_env_steps_per_s']:.2f}x")
    return {**ours, "env_steps_per_s": ours["loop_env_steps_per_s"],
            "baseline_env_steps_per_s": base["loop_env_steps_per_s"],
            "speedup": round(ours["loop_env_steps_per_s"] / base["loop_env_steps_per_s"], 2),
            "speed_minutes": args.speed_minutes, "speed_cpu": min(cpus), "baseline_config": base["config"],
            "baseline_generations": base["generations"], "baseline_env_steps": base["env_steps"]}


def final_table(results: list[dict]) -> None:
    """One table for every run: each phase's untrained baseline, max and first generation."""
    head = "phase         pass  " + "  ".join(
        f"{'shaped' if r['shaped'] else 'honest'}: baseline    max  first_gen" for r in results)
    print(head)
    for phase in PHASE_NAMES:
        cells = []
        for r in results:
            first = r["first_generation"].get(phase)
            cells.append(f"{r['baseline_rates'][phase]:16.3f} {max(r[f'{phase}_rates']):6.3f} "
                         f"{'-' if first is None else first:>10}")
        bar = f"{THRESHOLDS[phase]:4.1f}" if phase in THRESHOLDS else "   -"
        print(f"{phase:12s}  {bar}  " + "  ".join(cells))
    print("runs: " + "; ".join(f"{'shaped' if r['shaped'] else 'honest'} {r['generations']} generations, "
                               f"{r['env_steps']:,} env steps, {r['env_steps_per_s']:,.0f}/s, in order "
                               f"{r['phases_in_order']}" for r in results))


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=None,
                   help="budget of each run (default 60 on CPU, 10 on a GPU; --ablation runs two)")
    p.add_argument("--shaped", action="store_true",
                   help="the shaped configuration instead: hiders paid for forts and a defended ramp")
    p.add_argument("--ablation", action="store_true",
                   help="the honest run, then the shaped one, each with --minutes; one table of both")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-envs", type=int, default=None,
                   help="episodes per update (default 128: 25,600 transitions; on a GPU 2048: 409,600)")
    p.add_argument("--gamma", type=float, default=HideAndSeekPPOConfig.gamma,
                   help="discount per step, < 1 (OpenAI's 0.998 at most)")
    p.add_argument("--critic", choices=CRITICS, default=default_v1_ppo().critic,
                   help=f"local: each critic sees its agent's observation; central: plus the full state "
                        f"(default {default_v1_ppo().critic})")
    p.add_argument("--epochs", type=int, default=None, help="passes over each rollout (default 4)")
    p.add_argument("--minibatches", type=int, default=None,
                   help="per pass over each team's samples (default 6, about 1,900 hider samples each; 12 on a GPU)")
    p.add_argument("--layout-bank", type=int, default=None,
                   help="GPU: layouts drawn per curriculum setting, picked on the device (default 8192)")
    p.add_argument("--updates-per-generation", type=int, default=10)
    p.add_argument("--eval-episodes", type=int, default=256)
    p.add_argument("--eval-every", type=int, default=HideAndSeekLeagueConfig.eval_every,
                   help="standard-layout evaluation every this many generations (the others: training episodes)")
    p.add_argument("--precision", choices=PRECISIONS, default=default_v1_ppo().precision,
                   help="the networks' matrix products: fp32, bf16, or auto (bf16 where the CPU multiplies "
                        "bfloat16 in hardware; default auto)")
    p.add_argument("--exploiters", type=int, default=0, help="exploiters per role (AlphaStar's main exploiters)")
    p.add_argument("--exploiter-share", type=float, default=HideAndSeekPPOConfig.exploiter_share,
                   help="share of the envs that all exploiters together play in (default 0.25)")
    p.add_argument("--classic-loop", action="store_true",
                   help="the learner loop before issue 30 (numpy core, per-step critic, every generation evaluated)")
    p.add_argument("--speed", action="store_true",
                   help="the whole loop against --classic-loop, --speed-minutes each on one CPU: speedup")
    p.add_argument("--speed-minutes", type=float, default=3.0)
    for name in BONUSES:
        p.add_argument(f"--{name.replace('_', '-')}", type=float, default=None,
                       help=f"shaping bonus (default 0; {SHAPING[name]:g} with --shaped)")
    p.add_argument("--curriculum-share", type=float, default=HideAndSeekLeagueConfig.curriculum_share,
                   help="share of boxes-by-the-doors training episodes while standard forts are rare")
    p.add_argument("--curriculum-target", type=float, default=HideAndSeekLeagueConfig.curriculum_target,
                   help="standard-layout fort rate at which that share reaches 0")
    p.add_argument("--no-curriculum", action="store_true")
    p.add_argument("--curriculum-ramp", action=argparse.BooleanOptionalAction,
                   default=HideAndSeekLeagueConfig.curriculum_ramp,
                   help="second curriculum stage once forts are common: the ramp starts by a door")
    p.add_argument("--ramp-reach-up", type=float, default=HideAndSeekLeagueConfig.ramp_reach_up,
                   help="ramp-stage defense rate (in the stage's own episodes) at which its reach grows")
    p.add_argument("--ramp-reach-step", type=float, default=HideAndSeekLeagueConfig.ramp_reach_step,
                   help="how far the ramp stage's reach moves per generation (0: ramp next to a hider by the door)")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    p.add_argument("--cpu-clock", action="store_true",
                   help="--minutes counts this process's CPU time (runs side by side on a busy machine)")
    p.add_argument("--data-dir", default=None, help="keep (and resume) the leagues here")
    p.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that it runs")
    p.add_argument("--scripted", action="store_true",
                   help="no training: planned hider teams measure whether fort and ramp defense fit in preparation")
    p.add_argument("--layouts", type=int, default=1000, help="--scripted: standard layouts (seeds from --seed)")
    p.add_argument("--max-states", type=int, default=None,
                   help="--scripted: states one search may visit before it gives up (default 20,000; --smoke 2,000)")
    p.add_argument("--core-only", action="store_true",
                   help="no training: only the v1 cores' speed (compiled against numpy, one CPU)")
    p.add_argument("--core-seconds", type=float, default=10.0, help="timed seconds of each core (default 10)")
    args = p.parse_args(argv)
    if args.max_states is not None and args.max_states < 1:
        p.error("--max-states must be at least 1 (a search visits the start state)")
    if args.scripted:
        max_states = args.max_states if args.max_states is not None else (2_000 if args.smoke else 20_000)
        return scripted(6 if args.smoke else args.layouts, args.seed, args.smoke, max_states)
    core = core_speed(seconds=0.3 if args.smoke else args.core_seconds, seed=args.seed)
    if args.core_only:
        print(json.dumps(core))
        return core
    if args.smoke:
        args.minutes, args.num_envs, args.minibatches, args.epochs, args.device, args.threads = \
            0.1, 16, 4, 1, "cpu", 1
        args.updates_per_generation, args.eval_episodes, args.speed_minutes = 1, 8, 0.04
        args.exploiters = max(1, args.exploiters)  # the exploiters' path too
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)
    gpu = torch.cuda.is_available() and args.device in ("auto", "cuda")
    minutes = args.minutes if args.minutes is not None else (10.0 if gpu else 60.0)
    args.epochs = args.epochs or 4
    args.sizes = {"num_envs": args.num_envs or (2048 if gpu else 128),
                  "minibatches": args.minibatches or (12 if gpu else 6),
                  "layout_bank": args.layout_bank if args.layout_bank is not None else (8192 if gpu else 0)}
    runs = (False, True) if args.ablation else (args.shaped,)
    results = []
    with tempfile.TemporaryDirectory(prefix="hs-bench-") as tmp:
        data_dir = Path(args.data_dir or tmp)
        with EmbeddedRedis(data_dir / "redis") as server:
            pool = RedisSnapshotPool(connect_redis(server.url), FileSnapshotStore(data_dir / "snapshots"))
            if args.speed:
                result = {**speed(args, pool, data_dir), **core}
                print(json.dumps(result))
                return result
            if args.smoke:  # the speed comparison's path too (both loops, a generation or so each)
                fast = speed(argparse.Namespace(**vars(args)), pool, data_dir)
                core |= {k: fast[k] for k in ("baseline_env_steps_per_s", "speedup")}
            for shaped in runs:
                results.append(train_run(args, pool, data_dir, shaped, minutes)[0])
    final_table(results)
    result = {**results[0], **core}
    if len(results) > 1:
        result["ablation"] = {"shaped": results[1]}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    from benchmarks.support.signals import unwind_on_sigterm

    unwind_on_sigterm()  # a SIGTERM cleans up as a Ctrl-C does: no server or client left running
    main()
