"""Clone fingerprints in the service: the seeded positions, fingerprints of pooled snapshots
(safetensors and ONNX alike) cached in Redis by snapshot hash, written only when asked to."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.checkpoint import LoadedCheckpoint, serialize_weights
from agents.neural import NeuralPolicy, random_init_checkpoint
from agents.onnx_agents.export import export_onnx, onnx_spec
from arena.evaluation.fingerprint_positions import fingerprint_positions, scripted_mix
from arena.evaluation.fingerprints import TTL_S, FingerprintStore, policy_fingerprint
from arena.snapshots.pool import RedisSnapshotPool
from league.evaluation.fingerprints import near_duplicates, similarity

pytestmark = pytest.mark.redis

TTT = "tictactoe-v3"
HIDDEN = {"hidden": [16]}


def _checkpoint(seed: int, noise: float = 0.0) -> LoadedCheckpoint:
    state, spec = random_init_checkpoint(TTT, "mlp", HIDDEN, seed=seed)
    if noise:
        gen = torch.Generator().manual_seed(seed + 1000)
        state = {k: v + noise * torch.randn(v.shape, generator=gen) for k, v in state.items()}
    return LoadedCheckpoint(spec=spec, state_dict=state, sha256="0" * 64)


def _fp_keys(pool: RedisSnapshotPool) -> list[bytes]:
    return list(pool.client.scan_iter(f"{pool.keys.prefix}:fp:*"))


def test_positions_are_seeded_distinct_and_each_a_real_choice():
    positions = fingerprint_positions(TTT, "player")
    again = fingerprint_positions.__wrapped__(TTT, "player")  # built afresh, not from the cache
    assert len(positions) == 512 and positions.digest == again.digest
    assert np.array_equal(positions.obs, again.obs) and np.array_equal(positions.masks, again.masks)
    assert positions.masks.sum(axis=1).min() >= 2  # a forced move says nothing about a policy
    rows = {o.tobytes() + m.tobytes() for o, m in zip(positions.obs, positions.masks, strict=True)}
    assert len(rows) == 512
    other = fingerprint_positions.__wrapped__(TTT, "player", 64, seed=1)
    assert len(other) == 64 and other.digest != positions.digest
    assert scripted_mix("simple_tag-v3", "prey") == ("random", "evader", "evader:epsilon=0.3")
    with pytest.raises(ValueError, match="no role"):
        fingerprint_positions(TTT, "seeker")


def test_a_noisy_copy_has_the_fingerprint_of_its_original_and_another_init_does_not():
    positions = fingerprint_positions(TTT, "player")
    original = policy_fingerprint(NeuralPolicy(_checkpoint(0)), positions)
    assert original.shape == (512, 9) and original.dtype == np.float32
    assert np.allclose(original.sum(axis=1), 1, atol=1e-5) and not original[~positions.masks].any()
    copy = policy_fingerprint(NeuralPolicy(_checkpoint(0, noise=1e-4)), positions)
    other = policy_fingerprint(NeuralPolicy(_checkpoint(1)), positions)
    agreement, kl = similarity(original, copy)
    assert agreement == 1.0 and kl < 1e-6
    agreement, kl = similarity(original, other)
    assert agreement < 0.5
    assert [(s.a, s.b) for s in near_duplicates({1: original, 2: copy, 3: other})] == [(1, 2)]


def test_fingerprints_are_computed_once_stored_by_snapshot_and_failures_with_their_reason(
        snapshot_pool: RedisSnapshotPool):
    positions = fingerprint_positions(TTT, "player")
    ck = _checkpoint(0)
    sha = snapshot_pool.put(serialize_weights(ck.state_dict), ck.spec, TTT)
    worker = FingerprintStore(snapshot_pool, snapshot_pool.client, snapshot_pool.keys)  # the background's side
    reader = FingerprintStore(snapshot_pool, snapshot_pool.client, snapshot_pool.keys)  # an API process's
    assert reader.position_set(TTT, "player") is None
    first = worker.compute(positions, sha)
    assert first.error == "" and worker.computed == 1
    [key] = _fp_keys(snapshot_pool)
    assert key.decode() == snapshot_pool.keys.fingerprint(positions.digest, sha)
    with pytest.raises(ValueError, match="digest"):
        snapshot_pool.keys.fingerprint("../" + positions.digest[3:], sha)  # keys are never built from arbitrary text
    assert 0 < snapshot_pool.client.ttl(key) <= TTL_S
    assert np.array_equal(worker.compute(positions, sha).probs, first.probs) and worker.computed == 1  # stored

    worker.publish_positions(TTT, "player", positions)
    published = reader.position_set(TTT, "player")
    assert (published.digest, published.count, published.num_actions) == (positions.digest, len(positions), 9)
    assert np.array_equal(reader.stored(published, [sha])[sha].probs, first.probs) and reader.computed == 0

    onnx = snapshot_pool.put(export_onnx(LoadedCheckpoint(ck.spec, ck.state_dict, sha)),
                    onnx_spec(LoadedCheckpoint(ck.spec, ck.state_dict, sha)), TTT)
    assert reader.stored(published, [onnx]) == {onnx: None}  # not computed yet
    assert reader.ask(TTT, "player", [onnx, onnx]) == 1 and reader.ask(TTT, "player", [onnx]) == 0  # one job
    exported = worker.compute(positions, onnx)  # the same network as ONNX: the same behaviour
    assert exported.error == "", exported.error
    agreement, kl = similarity(first.probs, exported.probs)
    assert agreement == 1.0 and kl < 1e-6
    worker.done(TTT, "player", onnx)
    assert reader.ask(TTT, "player", [onnx]) == 1  # done: asking again may queue it (the reader asks only for missing)

    other_env, spec = random_init_checkpoint("connect_four-v3", "mlp", HIDDEN, seed=0)
    other = snapshot_pool.put(serialize_weights(other_env), spec, "connect_four-v3")
    wrong = worker.compute(positions, other)
    assert wrong.probs is None and "plays connect_four-v3/player" in wrong.error
    assert reader.stored(published, [other])[other].error == wrong.error  # the failure is stored, with its reason
    assert worker.compute(positions, other).error == wrong.error


def test_the_benchmark_runs_and_flags_only_the_copies():
    """``benchmarks/fingerprints.py --smoke``: it runs, tiny noise copies are flagged and no independent pair is."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "fingerprints.py"), "--smoke"],
                          check=False, cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"envs", "hidden", "positions", "thresholds", "ranges", "fingerprint_ms", "positions_s"} <= result.keys()
    flagged = result["flagged"]
    assert flagged["copy + noise 0.0001"] == 1.0 and result["hash_baseline_flagged"] == 0.0
    assert flagged["fresh vs fresh"] == flagged["trained vs trained"] == flagged["trained vs fresh"] == 0.0
