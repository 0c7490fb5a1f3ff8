"""Device twins of the random streams and of Arena's policies draw and choose exactly like the numpy ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.catalog import make_policy
from agents.checkpoint import LoadedCheckpoint
from agents.device_policies import DeviceNeuralPolicy, to_device_policy
from agents.device_rng import DeviceMatchRng, derive_seeds, splitmix64
from agents.neural import NeuralPolicy, random_init_checkpoint
from agents.policy import MatchRng, derive_seed
from agents.policy import splitmix64 as splitmix64_numpy
from envs.connect_four import ConnectFourCore
from envs.tictactoe import TicTacToeCore
from tests.device_params import DEVICES, one_torch_thread  # noqa: F401 - a fixture
from tests.envs.boards import play_random_batch

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def streams(n: int, device: str) -> tuple[MatchRng, DeviceMatchRng]:
    seeds = derive_seed(99, np.arange(n))
    seats, plies = np.arange(n) % 2, np.arange(n) % 43
    on_device = [torch.as_tensor(x, device=device) for x in (seeds, seats, plies)]
    return MatchRng(seeds, seats, plies), DeviceMatchRng(*on_device)


@pytest.mark.parametrize("device", DEVICES)
def test_device_streams_draw_the_numpy_streams_numbers(device: str) -> None:
    ref, dev = streams(5000, device)
    for _ in range(2):  # successive draws advance both counters alike
        assert np.array_equal(dev.uniform(3).cpu().numpy(), ref.uniform(3))
    mask = np.random.default_rng(0).random((5000, 7)) < 0.4
    expected = ref.choice(mask)
    assert np.array_equal(dev.choice(torch.as_tensor(mask, device=device)).cpu().numpy(), expected)
    assert (expected[~mask.any(1)] == -1).all() and (~mask.any(1)).any()
    # -log(-log(u)) near 0 turns one ulp of torch's log vs numpy's into ~1e-14 relative: bound it absolutely too.
    np.testing.assert_allclose(dev.gumbel(7).cpu().numpy(), ref.gumbel(7), rtol=1e-14, atol=1e-15)
    rows = np.array([3, 1, 4])
    assert np.array_equal(dev.subset(torch.as_tensor(rows, device=device)).uniform(1).cpu().numpy(),
                          ref.subset(rows).uniform(1))
    again = DeviceMatchRng.from_match_rng(streams(5000, "cpu")[0], device)
    assert np.array_equal(again.uniform(2).cpu().numpy(), streams(5000, "cpu")[0].uniform(2))


@pytest.mark.parametrize("device", DEVICES)
def test_hashes_and_derived_seeds_are_bit_identical(device: str) -> None:
    x = np.random.default_rng(1).integers(-(2**63), 2**63 - 1, size=10_000, dtype=np.int64)
    ours = splitmix64(torch.as_tensor(x, device=device)).cpu().numpy()
    assert np.array_equal(ours.view(np.uint64), splitmix64_numpy(x.view(np.uint64)))
    for master in (0, 7, 2**64 - 5):
        idx = torch.arange(100_000, device=device)
        assert np.array_equal(derive_seeds(master, idx).cpu().numpy(),
                              derive_seed(master, np.arange(100_000)))


def positions(env_id: str) -> tuple[np.ndarray, np.ndarray]:
    core = ConnectFourCore() if env_id == "connect_four-v3" else TicTacToeCore()
    rec = play_random_batch(core, 300, 3)
    live = rec.masks.any(-1)
    return rec.obs[live], rec.masks[live]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("env_id", ["connect_four-v3", "tictactoe-v3"])
def test_device_twins_choose_the_numpy_policies_actions(env_id: str, device: str) -> None:
    obs, mask = positions(env_id)
    k = len(obs)
    seeds, seats, plies = derive_seed(1, np.arange(k)), np.arange(k) % 2, np.arange(k) % 9
    policies = [make_policy(n, env_id) for n in ("random", "heuristic", "heuristic:epsilon=0.3")]
    for arch, temperature in (("mlp", 1.0), ("cnn", 0.0), ("mlp", 0.5)):
        state, spec = random_init_checkpoint(env_id, arch, seed=len(policies))
        policies.append(NeuralPolicy(LoadedCheckpoint(spec, state, "0" * 64), temperature=temperature))
    o, m = torch.as_tensor(obs, device=device).float(), torch.as_tensor(mask, device=device)
    on_device = [torch.as_tensor(x, device=device) for x in (seeds, seats, plies)]
    for policy in policies:
        expected = policy.act(obs, mask, MatchRng(seeds, seats, plies))
        twin = to_device_policy(policy, device)
        actions, invalid = twin.act_device(o, m, DeviceMatchRng(*on_device))
        same = (actions.cpu().numpy() == expected).mean()
        # Bit-equal logits on the CPU; on CUDA a rare near-tie may round the other way.
        assert same == 1.0 if device == "cpu" else same > 0.999, policy.agent_id
        assert not invalid.any()
    assert len(set(expected.tolist())) > 3


def test_non_finite_logits_are_flagged_and_foreign_policies_have_no_twin() -> None:
    state, spec = random_init_checkpoint("connect_four-v3", "mlp", {"hidden": [8]}, seed=0)
    state["head.bias"][2] = float("inf")
    twin = DeviceNeuralPolicy.from_policy(NeuralPolicy(LoadedCheckpoint(spec, state, "0" * 64)), "cpu")
    obs, mask = positions("connect_four-v3")
    rng = DeviceMatchRng(torch.arange(len(obs)), 0, 0)
    _, invalid = twin.act_device(torch.as_tensor(obs).float(), torch.as_tensor(mask), rng)
    assert invalid.all()
    with pytest.raises(TypeError, match="no device version"):
        to_device_policy(object(), "cpu")
