"""Headline: clone fingerprints flag weight-noise copies and nothing independent.

For each env and MLP size, agents are built from seeds: fresh networks (random
initialisation), networks briefly trained to imitate the env's heuristic (Adam on
positions of another seed), and copies of both with gaussian weight noise (1e-4, 1e-3,
1e-2: "retrained" resubmissions). Every pair kind is fingerprinted on the env's 512
positions (``arena.evaluation.fingerprint_positions``) and compared as the service does
(``league.evaluation.fingerprints``: agreement, mean symmetric KL, the default thresholds). The
baseline is what the service had before: a copy is caught only when its weights hash to
the original's (``get_agent_by_weights``), which no noisy copy does.

Run: ``python benchmarks/fingerprints.py [--steps 300] [--smoke]``; the last line is JSON:
``envs``, ``hidden``, ``positions``, ``thresholds``, ``ranges`` (pair kind ->
``[agreement min, max, mean KL min, max]``), ``flagged`` (pair kind -> flagged share),
``hash_baseline_flagged`` (share of noisy copies the hash catches), ``fingerprint_ms``
(one agent, 512 positions), ``positions_s`` (building each env's positions).
``--smoke``: tic-tac-toe, one small MLP, 20 training steps on 128 positions (the suite's check
that it runs; building positions is most of its time).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

# Lets the script run from a checkout without installing the project.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.catalog import make_policy
from agents.checkpoint import LoadedCheckpoint, serialize_weights
from agents.nets import build_net
from agents.neural import NeuralPolicy, random_init_checkpoint
from agents.policy import MatchRng
from arena.evaluation.fingerprint_positions import Positions, fingerprint_positions
from arena.evaluation.fingerprints import policy_fingerprint
from league.evaluation.fingerprints import DEFAULT_THRESHOLDS, similarity

NOISE = (1e-4, 1e-3, 1e-2)
Weights = dict[str, torch.Tensor]


def fresh(env: str, hidden: list[int], seed: int) -> tuple[Weights, object]:
    return random_init_checkpoint(env, "mlp", {"hidden": hidden}, seed=seed)


def trained(env: str, hidden: list[int], seed: int, steps: int, positions: int = 1024) -> Weights:
    """``steps`` Adam steps imitating the heuristic on ``positions`` positions of seed ``77 + seed``."""
    state, spec = fresh(env, hidden, seed)
    net = build_net(spec.arch, spec.hparams, spec.obs_shape, spec.num_actions)
    net.load_state_dict(state)
    data = fingerprint_positions(env, "player", positions, seed=77 + seed)
    n = len(data)
    teacher = make_policy("heuristic", env)
    target = torch.as_tensor(teacher.act(data.obs, data.masks, MatchRng(np.arange(n), np.zeros(n), np.zeros(n))))
    obs, legal = torch.as_tensor(data.obs), torch.as_tensor(data.masks)
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(net(obs).masked_fill(~legal, -1e9), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def noisy(state: Weights, scale: float, seed: int) -> Weights:
    gen = torch.Generator().manual_seed(seed)
    return {k: v + scale * torch.randn(v.shape, generator=gen) for k, v in state.items()}


def fingerprint(state: Weights, spec, positions: Positions) -> np.ndarray:
    sha = hashlib.sha256(serialize_weights(state)).hexdigest()
    return policy_fingerprint(NeuralPolicy(LoadedCheckpoint(spec=spec, state_dict=state, sha256=sha)), positions)


def pairs_of(env: str, hidden: list[int], steps: int, positions: Positions,
             train_positions: int = 1024) -> dict[str, list[tuple]]:
    """``{pair kind: [(agreement, mean KL, same weights hash)]}`` for one env and MLP size."""
    state0, spec = fresh(env, hidden, 0)
    state1, _ = fresh(env, hidden, 1)
    t0, t1 = (trained(env, hidden, seed, steps, train_positions) for seed in (0, 1))
    t0_longer = trained(env, hidden, 0, 2 * steps, train_positions)
    fps: dict[bytes, np.ndarray] = {}

    def fp(state: Weights) -> np.ndarray:
        key = serialize_weights(state)
        if key not in fps:
            fps[key] = fingerprint(state, spec, positions)
        return fps[key]

    def compare(kind: str, a: Weights, b: Weights) -> None:
        same_hash = serialize_weights(a) == serialize_weights(b)
        out.setdefault(kind, []).append((*similarity(fp(a), fp(b)), same_hash))

    out: dict[str, list[tuple]] = {}
    for base in (state0, t0):
        for scale in NOISE:
            compare(f"copy + noise {scale:g}", base, noisy(base, scale, 7))
    compare("fresh vs fresh", state0, state1)
    compare("trained vs trained", t0, t1)
    compare("trained vs fresh", t0, state1)
    compare("same init, trained longer", t0, t0_longer)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="imitation steps of a trained agent")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that it runs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    envs = ["tictactoe-v3"] if args.smoke else ["tictactoe-v3", "connect_four-v3"]
    sizes = [[8]] if args.smoke else [[8], [64, 64], [256, 256]]
    steps = 20 if args.smoke else args.steps
    train_positions = 128 if args.smoke else 1024
    results: dict[str, list[tuple]] = {}
    positions_s, fingerprint_ms = {}, []
    for env in envs:
        start = time.perf_counter()
        positions = fingerprint_positions(env, "player")
        positions_s[env] = round(time.perf_counter() - start, 2)
        for hidden in sizes:
            start = time.perf_counter()
            state, spec = fresh(env, hidden, 0)
            fingerprint(state, spec, positions)
            fingerprint_ms.append((time.perf_counter() - start) * 1000)
            for kind, rows in pairs_of(env, hidden, steps, positions, train_positions).items():
                results.setdefault(kind, []).extend(rows)
    t = DEFAULT_THRESHOLDS
    print(f"clone fingerprints: {', '.join(envs)}; MLPs {sizes}; {len(positions)} positions; "
          f"flagged at agreement >= {t.min_agreement} and mean KL <= {t.max_kl}")
    print(f"{'pair':<28}{'n':>3}{'agreement':>18}{'mean KL':>22}{'flagged':>9}{'hash':>6}")
    ranges, flagged = {}, {}
    for kind, rows in results.items():
        a, k = [r[0] for r in rows], [r[1] for r in rows]
        hits = sum(r[0] >= t.min_agreement and r[1] <= t.max_kl for r in rows)
        ranges[kind] = [min(a), max(a), min(k), max(k)]
        flagged[kind] = hits / len(rows)
        print(f"{kind:<28}{len(rows):>3}{min(a):>9.3f}-{max(a):<8.3f}{min(k):>11.2g}-{max(k):<10.2g}"
              f"{hits:>5}/{len(rows):<3}{sum(r[2] for r in rows):>5}")
    copies = [r for kind, rows in results.items() if kind.startswith("copy") for r in rows]
    print(json.dumps({
        "envs": envs, "hidden": sizes, "positions": len(positions),
        "thresholds": {"min_agreement": t.min_agreement, "max_kl": t.max_kl}, "ranges": ranges,
        "flagged": flagged, "hash_baseline_flagged": sum(r[2] for r in copies) / len(copies),
        "fingerprint_ms": round(float(np.median(fingerprint_ms)), 1), "positions_s": positions_s,
    }))


if __name__ == "__main__":
    main()
