"""OnnxPolicy: a batched Policy with reproducible sampling, whose misbehaviour in a match
(NaN logits, a graph that loops for a long time) is a forfeit and never a stuck thread."""

from __future__ import annotations

import threading

import numpy as np
import onnxruntime as ort
import pytest

from agents.catalog import make_policy
from agents.onnx_agents.policy import OnnxPolicy, validate_onnx_bytes
from agents.onnx_agents.session import Deadlines, TimedSession, load_session, providers_for
from agents.policy import MatchRng, Policy
from arena.engine import MatchJob, play_matches
from tests.agents.onnx_corpus import (
    ENV,
    honest_model,
    hostile_corpus,
    play_time_hostiles,
    spec_json,
)


def _policy(data: bytes, **kwargs) -> OnnxPolicy:
    return OnnxPolicy(validate_onnx_bytes(data, spec_json()), device="cpu", **kwargs)


def _batch(k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, MatchRng]:
    gen = np.random.default_rng(seed)
    obs = (gen.random((k, 3, 3, 2)) < 0.3).astype(np.int8)
    mask = gen.random((k, 9)) < 0.5
    mask[np.arange(k), gen.integers(0, 9, k)] = True
    return obs, mask, MatchRng(gen.integers(0, 2**62, k), np.zeros(k), np.zeros(k))


def test_policy_identity_and_legal_reproducible_actions() -> None:
    data = honest_model(seed=1)
    policy = _policy(data)
    assert isinstance(policy, Policy) and policy.bounded_runtime is False
    assert policy.agent_id == f"onnx-{policy.weights_hash[:16]}"
    obs, mask, rng = _batch(512)
    actions = policy.act(obs, mask, rng)
    assert actions.dtype == np.int64 and mask[np.arange(512), actions].all()
    # A row draws the same action alone as inside the batch (per-row random streams).
    _, _, rng = _batch(512)
    for row in (0, 17, 511):
        alone = policy.act(obs[row:row + 1], mask[row:row + 1], rng.subset(np.array([row])))
        assert alone[0] == actions[row]


def test_temperature_zero_is_the_masked_argmax() -> None:
    policy = _policy(honest_model(seed=2), temperature=0.0)
    obs, mask, rng = _batch(256, seed=1)
    expected = np.where(mask, policy.logits(obs), -np.inf).argmax(axis=1)
    np.testing.assert_array_equal(policy.act(obs, mask, rng), expected)


def _jobs(agent: str, other: str, n: int) -> list[MatchJob]:
    return [MatchJob(i, (agent, other) if i % 2 == 0 else (other, agent)) for i in range(n)]


def _forfeits_by(records, agent: str) -> list[str]:
    return [r.termination for r in records if r.forfeit_seat is not None
            and r.seats[r.forfeit_seat] == agent]


def test_nan_logits_in_play_forfeit_with_invalid_output() -> None:
    """Finite on the probe batches (<= 8 rows), NaN on the 16-row batches of a match."""
    policy = _policy(play_time_hostiles()["nan_in_play"])
    random = make_policy("random", ENV)
    records = play_matches(ENV, _jobs(policy.agent_id, random.agent_id, 32),
                           {policy.agent_id: policy, random.agent_id: random})
    assert _forfeits_by(records, policy.agent_id) == ["invalid_output"] * 32


@pytest.mark.timeout(60)  # a hang guard, not a timing assert
def test_endless_loop_in_play_forfeits_with_timeout_and_frees_the_thread() -> None:
    policy = _policy(play_time_hostiles()["loop_in_play"], time_limit_s=0.5)
    random = make_policy("random", ENV)
    before = set(threading.enumerate())
    records = play_matches(ENV, _jobs(policy.agent_id, random.agent_id, 32),
                           {policy.agent_id: policy, random.agent_id: random}, time_budget_s=0.5)
    assert _forfeits_by(records, policy.agent_id) == ["timeout"] * 32
    assert all("exceeded the 0.5s budget" in r.detail for r in records)
    # The engine abandoned its watchdog threads; the terminated runs let them end.
    for thread in set(threading.enumerate()) - before:
        if thread.name.startswith("policy"):
            thread.join(timeout=30)
            assert not thread.is_alive()
    obs, mask, rng = _batch(4)  # small batches run no loop: the session still answers
    assert mask[np.arange(4), policy.act(obs.astype(np.float32), mask, rng)].all()


@pytest.mark.timeout(60)
def test_timed_session_terminates_a_long_loop_and_stays_usable() -> None:
    loop = next(c for c in hostile_corpus() if c.name == "endless_loop").data
    session = TimedSession(load_session(loop), "obs", "logits")
    obs = np.zeros((2, 3, 3, 2), np.float32)
    # Each run is terminated itself, never refused because an earlier terminated run is still
    # inside the loop ("an earlier run ... was still running"): each terminated run returned.
    for _ in range(3):
        with pytest.raises(TimeoutError, match="terminated at its 0.2s deadline"):
            session.run(obs, 0.2)


def test_deadlines_fire_once_and_disarm_cleanly() -> None:
    deadlines = Deadlines()
    fired = threading.Event()
    late = deadlines.arm(0.05, fired.set)
    assert fired.wait(10)
    assert deadlines.disarm(late) is True
    calls: list[int] = []
    early = deadlines.arm(30.0, lambda: calls.append(1))
    assert deadlines.disarm(early) is False and calls == []


def test_device_choice_follows_onnxruntime_providers() -> None:
    assert providers_for("cpu") == ["CPUExecutionProvider"]
    has_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    assert ("CUDAExecutionProvider" in str(providers_for("auto"))) == has_cuda
    with pytest.raises(ValueError, match="device must be"):
        providers_for("tpu")
    if not has_cuda:
        with pytest.raises(ValueError, match="no CUDA provider"):
            providers_for("cuda:0")
        assert _policy(honest_model()).device == "cpu"
