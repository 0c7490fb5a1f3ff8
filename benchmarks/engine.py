"""Match throughput: the naive loop, PettingZoo random play, and our engine, in one run.

(a) naive: one PettingZoo env, one match at a time, one torch forward per move
    (``torch.inference_mode``, Categorical sampling over legal moves) - what a
    competent person writes without batching;
(b) PettingZoo random play, no policy at all;
(c) our engine: many matches at once, one batched forward per policy per ply;
(d) with ``--device``, board games only: the device engine (:class:`DeviceMatchEngine`,
    boards, sampling and forfeits on the device, records copied out in bulk) on that
    device AND the same code on the CPU, in full-record mode and in summary mode
    (counts plus a 1% replay sample, see ``docs/gpu.md``).

Both policies are MLPs with two hidden layers of 256 and different weights.

    python benchmarks/engine.py [--env connect_four-v3|simple_tag-v3] [--device cpu|cuda] [--smoke]

Prints a table, then one JSON line (mps = completed matches per second): ``env``,
``device``, ``naive_mps``, ``pettingzoo_random_mps``, ``engine_mps``,
``ratio_vs_naive`` (generic envs add ``engine_inline_mps``). Board games add (d)
unless ``--skip-device``: ``device_mps`` / ``cpu_mps`` (full records),
``device_summary_mps`` / ``cpu_summary_mps``, ``ratio_device_vs_cpu`` (full records)
and ``ratio_summary_device_vs_cpu``. ``--smoke``: 64 matches in batches of 32,
0.2 s per naive baseline (the suite's check that it runs, in seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch

from agents.checkpoint import LoadedCheckpoint, serialize_weights
from agents.nets import build_net
from agents.neural import NeuralPolicy, random_init_checkpoint
from arena.engine import MatchEngine
from arena.engine.device import DeviceMatchEngine
from arena.engine.plan import plan_matches
from envs.registry import get_spec, make_env
from envs.spec import EnvSpec

HPARAMS = {"hidden": [256, 256]}


def make_agents(spec: EnvSpec, device: str) -> tuple[list[torch.nn.Module], list[NeuralPolicy]]:
    """Two MLPs with different weights: one per seat (symmetric) or per role."""
    roles = list(spec.roles) if not spec.symmetric else [spec.roles[0]] * 2
    modules, policies = [], []
    for i, role in enumerate(roles):
        state, ck_spec = random_init_checkpoint(spec.env_id, "mlp", HPARAMS, seed=100 + i, role=role)
        net = build_net("mlp", ck_spec.hparams, ck_spec.obs_shape, ck_spec.num_actions)
        net.load_state_dict(state)
        modules.append(net.eval().to(device))
        import hashlib

        sha = hashlib.sha256(serialize_weights(state)).hexdigest()
        policies.append(NeuralPolicy(LoadedCheckpoint(ck_spec, state, sha), device=device))
    return modules, policies


def naive_act(net: torch.nn.Module, obs, mask, device: str) -> int:
    with torch.inference_mode():
        x = torch.as_tensor(np.asarray(obs), dtype=torch.float32, device=device).unsqueeze(0)
        logits = net(x)[0]
        if mask is not None:
            logits = logits.masked_fill(~torch.as_tensor(mask, dtype=torch.bool, device=device), -1e9)
        return int(torch.distributions.Categorical(logits=logits).sample().item())


def run_naive_aec(spec: EnvSpec, nets, seconds: float, device: str, random_play: bool) -> float:
    env = make_env(spec.env_id)
    rng = np.random.default_rng(0)
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.reset(seed=done)
        seat_net = {name: nets[(i + done) % 2] for i, name in enumerate(spec.seats)}
        for agent in env.agent_iter():
            obs, _, term, trunc, _ = env.last()
            if term or trunc:
                env.step(None)
                continue
            mask = obs["action_mask"].astype(bool)
            if random_play:
                action = int(rng.choice(np.flatnonzero(mask)))
            else:
                action = naive_act(seat_net[agent], obs["observation"], mask, device)
            env.step(action)
        done += 1
    return done / (time.perf_counter() - start)


def run_naive_parallel(spec: EnvSpec, nets, seconds: float, device: str, random_play: bool) -> float:
    env = make_env(spec.env_id)
    team_net = {spec.seats[s]: nets[t] for t, team in enumerate(spec.teams) for s in team}
    rng = np.random.default_rng(0)
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        obs, _ = env.reset(seed=done)
        while env.agents:
            if random_play:
                actions = {a: int(rng.integers(spec.num_actions)) for a in env.agents}
            else:
                actions = {a: naive_act(team_net[a], obs[a], None, device) for a in env.agents}
            obs, *_ = env.step(actions)
        done += 1
    return done / (time.perf_counter() - start)


def run_engine(spec: EnvSpec, policies, matches: int, batch: int, env_workers: int = 0) -> float:
    by_id = {p.agent_id: p for p in policies}
    jobs = plan_matches([p.agent_id for p in policies], spec, matches, seed=1)
    with MatchEngine(env_workers=env_workers) as engine:
        engine.play(spec.env_id, jobs[:batch], by_id)  # warm-up: builds envs, loads kernels
        start = time.perf_counter()
        for lo in range(0, matches, batch):
            engine.play(spec.env_id, jobs[lo : lo + batch], by_id)
        return matches / (time.perf_counter() - start)


def run_device_engine(spec: EnvSpec, policies, device: str, matches: int, batch: int | None,
                      summary: bool) -> float:
    """Matches/s of :class:`DeviceMatchEngine` on ``device`` (full records or summary mode)."""
    by_id = {p.agent_id: p for p in policies}
    agents = list(by_id)
    with DeviceMatchEngine(device, batch_size=batch) as engine:
        size = engine.batch_size
        engine.summarize(spec.env_id, agents, by_id, min(size, 4096), seed=0)  # warm-up
        if summary:
            start = time.perf_counter()
            engine.summarize(spec.env_id, agents, by_id, matches, seed=1, replay_rate=0.01)
            return matches / (time.perf_counter() - start)
        jobs = plan_matches(agents, spec, matches, seed=1)
        start = time.perf_counter()
        for lo in range(0, matches, size):
            engine.play(spec.env_id, jobs[lo : lo + size], by_id)
        return matches / (time.perf_counter() - start)


def device_section(spec: EnvSpec, args: argparse.Namespace, matches: int) -> tuple[list, dict]:
    """Rows and JSON keys of (d): the device engine on ``--device`` and on the CPU."""
    dev_matches = args.device_matches or (matches if args.device == "cpu" else 1 << 20)
    cpu_matches = args.cpu_matches or matches
    out = {}
    for mode, summary in (("", False), ("summary_", True)):
        dev = run_device_engine(spec, _on(args.device, spec), args.device, dev_matches,
                                args.device_batch, summary)
        cpu = dev if args.device == "cpu" else run_device_engine(
            spec, _on("cpu", spec), "cpu", cpu_matches, None, summary)
        out[f"device_{mode}mps"], out[f"cpu_{mode}mps"] = round(dev, 1), round(cpu, 1)
    out["ratio_device_vs_cpu"] = round(out["device_mps"] / out["cpu_mps"], 2)
    out["ratio_summary_device_vs_cpu"] = round(out["device_summary_mps"] / out["cpu_summary_mps"], 2)
    rows = [(f"device engine, records ({args.device})", out["device_mps"]),
            (f"device engine, summary ({args.device})", out["device_summary_mps"])]
    if args.device != "cpu":
        rows += [("device engine, records (cpu)", out["cpu_mps"]),
                 ("device engine, summary (cpu)", out["cpu_summary_mps"])]
    return rows, out


def _on(device: str, spec: EnvSpec) -> list[NeuralPolicy]:
    return make_agents(spec, device)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="connect_four-v3")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seconds", type=float, default=10.0, help="time for each baseline")
    parser.add_argument("--matches", type=int, default=0, help="engine matches (default by env)")
    parser.add_argument("--batch", type=int, default=0, help="engine batch size (default by env)")
    parser.add_argument("--env-workers", type=int, default=0,
                        help="generic envs: env worker processes (default: one per core)")
    parser.add_argument("--device-matches", type=int, default=0,
                        help="device engine matches on --device (default 2**20 on a GPU, else --matches)")
    parser.add_argument("--cpu-matches", type=int, default=0,
                        help="device engine matches on the CPU (default --matches)")
    parser.add_argument("--device-batch", type=int, default=None,
                        help="device engine batch on --device (default: the engine's)")
    parser.add_argument("--skip-device", action="store_true",
                        help="board games: leave out (d) even with --device")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that it runs")
    args = parser.parse_args()
    if args.smoke:
        args.seconds, args.matches, args.batch, args.device_batch, args.env_workers = 0.2, 64, 32, 32, 1
        torch.set_num_threads(1)  # tiny batches: more threads only contend on a busy machine
    spec = get_spec(args.env)
    generic = spec.api == "parallel" or spec.env_id not in ("connect_four-v3", "tictactoe-v3")
    matches = args.matches or (2000 if generic else 32768)
    batch = args.batch or (500 if generic else 8192)
    nets, policies = make_agents(spec, args.device)
    naive = run_naive_parallel if spec.api == "parallel" else run_naive_aec
    engine_mps = run_engine(spec, policies, matches, batch)
    rows_extra = []
    if generic:
        workers = args.env_workers or os.cpu_count() or 1
        inline_mps = engine_mps
        engine_mps = run_engine(spec, policies, matches, batch, env_workers=workers)
        rows_extra = [("arena engine, envs in this process", inline_mps),
                      (f"arena engine, envs in {workers} worker processes", engine_mps)]
    naive_mps = naive(spec, nets, args.seconds, args.device, random_play=False)
    random_mps = naive(spec, nets, args.seconds, args.device, random_play=True)
    device_rows, device_keys = [], {}
    if not generic and not args.skip_device:
        device_rows, device_keys = device_section(spec, args, matches)
    rows = [("naive loop (1 env, 1 forward/move)", naive_mps),
            ("PettingZoo random play (no policy)", random_mps),
            *(rows_extra or [(f"arena engine (batch {batch}, {args.device})", engine_mps)]),
            *device_rows]
    print(f"{'method':<44}{'matches/s':>12}")
    for name, mps in rows:
        print(f"{name:<44}{mps:>12,.1f}")
    print(json.dumps({
        "env": spec.env_id,
        "device": args.device,
        "naive_mps": round(naive_mps, 1),
        "pettingzoo_random_mps": round(random_mps, 1),
        "engine_mps": round(engine_mps, 1),
        "ratio_vs_naive": round(engine_mps / naive_mps, 1),
        **({"engine_inline_mps": round(rows_extra[0][1], 1)} if rows_extra else {}),
        **device_keys,
    }))


if __name__ == "__main__":
    main()
