"""DeviceMatchEngine: the same records as the CPU engine, forfeits, batch independence, summaries.

The CPU engine (``MatchEngine``) is the reference: for the same jobs the device engine
must write the same records field by field (on CPU the network logits are bit-equal
because both forward the same rows in the same order; on CUDA they may differ by
rounding, see ``agents.neural``, so there a few diverging matches are allowed).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from agents.catalog import make_policy
from agents.checkpoint import LoadedCheckpoint
from agents.device_rng import DeviceMatchRng
from agents.neural import NeuralPolicy, random_init_checkpoint
from agents.policy import MatchRng
from arena.engine import MatchEngine, MatchJob
from arena.engine.device import DeviceMatchEngine
from arena.engine.plan import plan_matches
from arena.engine.replay import replay_record
from envs.registry import get_spec
from tests.device_params import DEVICES, one_torch_thread  # noqa: F401 - a fixture

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def key(r):
    return (r.env, r.seed, r.seats, r.weights, r.actions, r.scores, r.winner, r.termination,
            r.forfeit_seat, r.match_id, r.detail)


def neural(env_id: str, arch: str, seed: int, temperature: float = 1.0,
           nan: bool = False) -> NeuralPolicy:
    state, spec = random_init_checkpoint(env_id, arch, {"hidden": [64, 64]} if arch == "mlp" else {},
                                         seed=seed)
    if nan:
        state = {k: torch.full_like(v, float("nan")) if k == "head.bias" else v
                 for k, v in state.items()}
    return NeuralPolicy(LoadedCheckpoint(spec, state, f"{seed:064x}"), temperature=temperature)


def lineup(env_id: str) -> dict:
    policies = [make_policy(n, env_id) for n in ("random", "heuristic", "heuristic:epsilon=0.3")]
    policies += [neural(env_id, "mlp", 1), neural(env_id, "cnn", 2, temperature=0.0)]
    return {p.agent_id: p for p in policies}


def assert_same_records(cpu: list, dev: list, device: str) -> None:
    same = sum(key(a) == key(b) for a, b in zip(cpu, dev, strict=True))
    assert same == len(cpu) if device == "cpu" else same >= 0.98 * len(cpu)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("env_id", ["connect_four-v3", "tictactoe-v3"])
def test_device_engine_writes_the_cpu_engines_records(env_id: str, device: str) -> None:
    policies = lineup(env_id)
    jobs = plan_matches(list(policies), get_spec(env_id), 1000, seed=21)
    cpu = MatchEngine().play(env_id, jobs, policies)
    dev = DeviceMatchEngine(device).play(env_id, jobs, policies)
    assert_same_records(cpu, dev, device)
    assert len({r.winner for r in dev}) == 3  # wins for both seats and draws
    assert all(replay_record(r).ok for r in dev[::4])


@pytest.mark.parametrize("device", DEVICES)
def test_a_match_plays_the_same_alone_or_in_any_batch(device: str) -> None:
    env_id = "connect_four-v3"
    policies = {p.agent_id: p for p in (make_policy("heuristic:epsilon=0.5", env_id),
                                        make_policy("random", env_id))}
    jobs = plan_matches(list(policies), get_spec(env_id), 120, seed=4)
    whole = DeviceMatchEngine(device).play(env_id, jobs, policies)
    small = DeviceMatchEngine(device, batch_size=7, compact_every=3).play(env_id, jobs, policies)
    assert [key(r) for r in whole] == [key(r) for r in small]
    engine = DeviceMatchEngine(device)
    for r in whole[:5]:
        alone = engine.play(env_id, [MatchJob(r.seed, tuple(r.seats), r.match_id)], policies)[0]
        assert key(alone) == key(r)
    other = DeviceMatchEngine(device).play(env_id, plan_matches(list(policies), get_spec(env_id),
                                                                120, seed=5), policies)
    assert [r.actions for r in other] != [r.actions for r in whole]


class Misbehaving:
    """Random play with a position-dependent fault, on both the numpy and the device path.

    Both paths see the same boards and draw from the same streams, so the CPU engine
    and the device engine must end the same matches the same way.
    """

    weights_hash = None

    def __init__(self, mode: str) -> None:
        self.agent_id, self.mode = f"bad-{mode}", mode

    def act(self, obs, mask, rng: MatchRng):
        actions, _ = self.act_device(torch.as_tensor(obs), torch.as_tensor(mask),
                                     DeviceMatchRng.from_match_rng(rng))
        return actions.numpy()

    def act_device(self, obs, mask, rng: DeviceMatchRng):
        flat = obs.reshape(len(obs), -1).to(torch.float64)
        fire = (flat @ torch.arange(1, flat.shape[1] + 1, dtype=torch.float64)) % 5 == 0
        if self.mode == "raise" and fire.any():
            raise RuntimeError("policy crashed")
        actions = rng.choice(mask)
        if self.mode == "illegal":
            illegal = torch.where(mask, -1, torch.arange(mask.shape[1])).max(1).values
            actions = torch.where(fire & (illegal >= 0), illegal, actions)
        if self.mode == "out_of_range":
            actions = torch.where(fire, mask.shape[1] + 3, actions)
        if self.mode == "wrong_shape" and len(actions) > 1:
            actions = actions[:-1]
        return actions, torch.zeros(len(actions), dtype=torch.bool)


@pytest.mark.parametrize(
    ("mode", "termination"),
    [("raise", "error"), ("illegal", "illegal_action"), ("out_of_range", "illegal_action"),
     ("wrong_shape", "invalid_output"), ("nan", "invalid_output"), ("wrong_env", "error")],
)
def test_forfeits_match_the_cpu_engine(mode: str, termination: str) -> None:
    env_id = "connect_four-v3"
    if mode == "nan":
        bad = neural(env_id, "mlp", 3, nan=True)
    elif mode == "wrong_env":
        bad = neural("tictactoe-v3", "mlp", 3)
    else:
        bad = Misbehaving(mode)
    good = make_policy("random", env_id)
    policies = {bad.agent_id: bad, good.agent_id: good}
    jobs = plan_matches(list(policies), get_spec(env_id), 200, seed=8)
    cpu = MatchEngine().play(env_id, jobs, policies)
    dev = DeviceMatchEngine("cpu").play(env_id, jobs, policies)
    assert [key(r) for r in dev] == [key(r) for r in cpu]
    forfeits = [r for r in dev if r.termination == termination]
    assert forfeits and all(r.seats[r.forfeit_seat] == bad.agent_id for r in forfeits)
    assert all(r.winner == 1 - r.forfeit_seat and r.detail for r in forfeits)
    assert all(replay_record(r).ok for r in forfeits)


@pytest.mark.parametrize("device", DEVICES)
def test_summary_counts_equal_the_full_records_and_the_sample_is_seeded(device: str) -> None:
    env_id = "tictactoe-v3"
    policies = {p.agent_id: p for p in (make_policy("heuristic:epsilon=0.2", env_id),
                                        make_policy("random", env_id), neural(env_id, "mlp", 4))}
    agents, n = list(policies), 1200
    full = DeviceMatchEngine(device).play(env_id, plan_matches(agents, get_spec(env_id), n, 9),
                                          policies)
    summary = DeviceMatchEngine(device, batch_size=500).summarize(
        env_id, agents, policies, n, 9, replay_rate=0.05, sample_seed=1)
    assert sum(c.matches for c in summary.lineups) == n
    for c in summary.lineups:
        mine = [r for r in full if tuple(r.seats) == c.agents]
        assert c.matches == len(mine)
        assert c.wins == [sum(r.winner == s for r in mine) for s in (0, 1)]
        assert c.draws == sum(r.winner is None for r in mine)
        assert c.terminations == dict(Counter(r.termination for r in mine))
        assert c.plies == sum(len(r.actions) for r in mine)
    w, d, lost = summary.wdl("random", agents[0])
    assert w + d + lost == 2 * n // 6 and lost > w
    # The sample: about 5%, chosen by seed alone, each replay the full mode's record.
    by_seed = {r.seed: r for r in full}
    assert 0.025 * n < len(summary.replays) < 0.075 * n
    strip = lambda r: key(r)[:-2]  # match ids are fresh in each mode
    assert all(strip(r) == strip(by_seed[r.seed]) for r in summary.replays)
    again = DeviceMatchEngine(device, batch_size=300).summarize(
        env_id, agents, policies, n, 9, replay_rate=0.05, sample_seed=1)
    assert [strip(r) for r in again.replays] == [strip(r) for r in summary.replays]
    assert again.lineups == summary.lineups
    other = DeviceMatchEngine(device).summarize(env_id, agents, policies, n, 9,
                                                replay_rate=0.05, sample_seed=2)
    assert {r.seed for r in other.replays} != {r.seed for r in summary.replays}


def test_envs_and_policies_without_a_device_version_fall_back_to_the_cpu_path() -> None:
    for env_id, policies in (("rps-v2", [make_policy("random", "rps-v2")] * 2),
                             ("connect_four-v3", [make_policy("random", "connect_four-v3"),
                                                  _NumpyOnly()])):
        by_id = {p.agent_id: p for p in policies}
        jobs = plan_matches(list(by_id), get_spec(env_id), 50, seed=2)
        cpu = MatchEngine().play(env_id, jobs, by_id)
        dev = DeviceMatchEngine("cpu").play(env_id, jobs, by_id)
        assert [key(r) for r in dev] == [key(r) for r in cpu]
    with pytest.raises(ValueError, match="cannot be played on the device"):
        DeviceMatchEngine("cpu").summarize("rps-v2", ["random"], {"random": policies[0]}, 10, 1)


class _NumpyOnly:
    """A policy with only the numpy interface (plays the lowest legal column)."""

    agent_id, weights_hash = "lowest", None

    def act(self, obs, mask, rng):
        return np.asarray(mask).argmax(1)
