"""ONNX models in the snapshot pool: stored as exact bytes, copied durably as ``.onnx``,
rebuilt after Redis loses them, played through the worker's cache; each format is
checked by its own validator (the safetensors one is not weakened)."""

from __future__ import annotations

import hashlib

import numpy as np
import onnxruntime as ort
import pytest
import safetensors.torch

from agents.checkpoint_spec import make_spec
from agents.onnx_agents.policy import OnnxPolicy
from agents.policy import MatchRng
from arena.snapshots.cache import SnapshotCache, onnx_device
from arena.snapshots.formats import snapshot_format
from arena.snapshots.pool import RedisSnapshotPool
from envs.errors import InvalidSubmission
from tests.agents.onnx_corpus import ENV, honest_model, hostile_corpus, spec_json
from tests.snapshots.test_pool import tiny_weights

pytestmark = pytest.mark.redis

POOL = "submissions.tictactoe-v3"


def test_an_onnx_snapshot_round_trips_survives_redis_and_plays(snapshot_pool: RedisSnapshotPool) -> None:
    data = honest_model(seed=4)
    sha = snapshot_pool.put(data, spec_json(), POOL, meta={"agent_key": "x"})
    assert sha == hashlib.sha256(data).hexdigest()
    folder = snapshot_pool.durable.root / sha[:2]
    assert sorted(p.name for p in folder.iterdir()) == [f"{sha}.json", f"{sha}.onnx"]
    snapshot_pool.client.flushdb()  # Redis loses everything: the durable copy serves it
    weights, spec = snapshot_pool.get(sha)
    assert weights == data and snapshot_format(spec) == "onnx" and snapshot_pool.list(POOL) == [sha]
    policy = SnapshotCache(snapshot_pool).get(sha)
    assert isinstance(policy, OnnxPolicy) and policy.weights_hash == sha
    gen = np.random.default_rng(0)
    obs = (gen.random((16, 3, 3, 2)) < 0.3).astype(np.float32)
    mask = gen.random((16, 9)) < 0.5
    mask[:, 4] = True
    actions = policy.act(obs, mask, MatchRng(gen.integers(0, 2**62, 16), np.zeros(16), np.zeros(16)))
    assert mask[np.arange(16), actions].all()


def test_each_format_is_checked_by_its_own_validator(snapshot_pool: RedisSnapshotPool) -> None:
    custom_op = next(c for c in hostile_corpus() if c.name == "custom_op_node")
    with pytest.raises(InvalidSubmission, match="custom operators"):
        snapshot_pool.put(custom_op.data, spec_json(), POOL)  # the static checks run on put
    with pytest.raises(InvalidSubmission, match="not an ONNX model"):
        snapshot_pool.put(tiny_weights(1), spec_json(), POOL)  # safetensors bytes, onnx spec
    mlp = make_spec(ENV, "mlp", {"hidden": [8]})
    with pytest.raises(InvalidSubmission, match='its spec needs "arch": "onnx"'):
        snapshot_pool.put(honest_model(), mlp, POOL)  # ONNX bytes, safetensors spec
    with pytest.raises(InvalidSubmission, match="NaN or infinite"):
        snapshot_pool.put(_nan_weights(), mlp, POOL)  # the full safetensors validator still runs
    assert list(snapshot_pool.client.scan_iter(match=snapshot_pool.keys.pattern())) == []
    assert list(snapshot_pool.durable.root.iterdir()) == []


def _nan_weights() -> bytes:
    state = safetensors.torch.load(tiny_weights(2))
    state["head.bias"][0] = float("nan")
    return safetensors.torch.save(state)


def test_a_gpu_worker_runs_onnx_where_onnxruntime_can() -> None:
    has_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    assert onnx_device("cuda") == ("cuda" if has_cuda else "cpu")
    assert onnx_device("cuda:1") == ("cuda:1" if has_cuda else "cpu")
    assert onnx_device("cpu") == "cpu" and onnx_device("auto") == "auto"
