"""NeuralPolicy: legal, reproducible per match row, honest about broken outputs, and a
snapshot of a live module that never aliases its weights."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.checkpoint import load_checkpoint, save_checkpoint
from agents.checkpoint_spec import make_spec
from agents.nets import build_net
from agents.neural import NeuralPolicy, policy_from_file, random_init_checkpoint, write_checkpoint
from agents.policy import MatchRng, Policy
from envs.errors import InvalidSubmission
from tests.races import race

SETUPS = [  # (env, arch, hparams, role)
    ("connect_four-v3", "cnn", {"channels": [8], "hidden": 32}, None),
    ("simple_tag-v3", "mlp", {"hidden": [32]}, "predator"),
    ("simple_tag-v3", "mlp", {"hidden": [32], "activation": "tanh"}, "prey"),
]


def sharpen(state_dict: dict[str, torch.Tensor], factor: float = 20.0) -> dict[str, torch.Tensor]:
    """Scale the head so logits are far from uniform (sampling then has something to show)."""
    return {k: v * factor if k.startswith("head.") else v for k, v in state_dict.items()}


def make_policy(
    tmp_path: Path,
    env: str,
    arch: str,
    hparams: dict,
    role: str | None,
    seed: int = 0,
    temperature: float = 1.0,
) -> NeuralPolicy:
    """A real checkpoint on disk, loaded back through the validator."""
    state_dict, spec = random_init_checkpoint(env, arch, hparams, seed, role=role)
    path = save_checkpoint(sharpen(state_dict), spec, tmp_path / f"{env}-{arch}-{role}-{seed}")
    return policy_from_file(path, temperature=temperature)


def batch(policy: NeuralPolicy, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random observations, random masks with at least one legal action, match seeds."""
    gen = np.random.default_rng(seed)
    obs = gen.normal(size=(k, *policy.spec.obs_shape)).astype(np.float32)
    mask = gen.random((k, policy.spec.num_actions)) < 0.5
    mask[np.arange(k), gen.integers(0, policy.spec.num_actions, k)] = True
    return obs, mask, gen.integers(0, 2**62, k)


def rng_for(seeds: np.ndarray, seat: int = 0, ply: int = 0) -> MatchRng:
    return MatchRng(seeds, np.full(len(seeds), seat), np.full(len(seeds), ply))


def test_round_trip_save_load_act(tmp_path: Path) -> None:
    checkpoint = write_checkpoint(
        tmp_path / "c4", "connect_four-v3", "cnn", {"channels": [4]}, seed=3
    )
    policy = policy_from_file(tmp_path / "c4.safetensors")
    file_hash = hashlib.sha256((tmp_path / "c4.safetensors").read_bytes()).hexdigest()
    assert isinstance(policy, Policy)
    assert policy.weights_hash == checkpoint.sha256 == file_hash
    assert policy.agent_id == f"cnn-{file_hash[:16]}"
    obs, mask, seeds = batch(policy, 64)
    actions = policy.act(obs.round().clip(0, 1).astype(np.int8), mask, rng_for(seeds))
    assert actions.dtype == np.int64 and actions.shape == (64,)
    assert mask[np.arange(64), actions].all()


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s[0]}-{s[3]}")
@pytest.mark.parametrize("temperature", [0.0, 0.3, 1.0, 5.0])
def test_actions_are_always_legal(tmp_path: Path, setup, temperature: float) -> None:
    policy = make_policy(tmp_path, *setup, temperature=temperature)
    obs, mask, seeds = batch(policy, 2048)
    actions = policy.act(obs, mask, rng_for(seeds))
    assert actions.dtype == np.int64
    assert mask[np.arange(2048), actions].all()


def test_row_without_legal_action_answers_minus_one(tmp_path: Path) -> None:
    policy = make_policy(tmp_path, *SETUPS[1])
    obs, mask, seeds = batch(policy, 4)
    mask[2] = False
    actions = policy.act(obs, mask, rng_for(seeds))
    assert actions[2] == -1 and (actions[[0, 1, 3]] >= 0).all()


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s[0]}-{s[3]}")
def test_same_seeds_same_actions(tmp_path: Path, setup) -> None:
    first = make_policy(tmp_path, *setup)
    second = policy_from_file(next(tmp_path.glob("*.safetensors")))
    obs, mask, seeds = batch(first, 512)
    a = first.act(obs, mask, rng_for(seeds, seat=1, ply=7))
    b = second.act(obs, mask, rng_for(seeds, seat=1, ply=7))
    np.testing.assert_array_equal(a, b)
    c = first.act(obs, mask, rng_for(seeds + 1, seat=1, ply=7))
    assert (a != c).sum() > 10, "sampling must depend on the match seed"


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s[0]}-{s[3]}")
def test_one_row_alone_equals_that_row_in_a_batch_of_256(tmp_path: Path, setup) -> None:
    policy = make_policy(tmp_path, *setup)
    obs, mask, seeds = batch(policy, 256)
    plies = np.arange(256) % 9
    together = policy.act(obs, mask, MatchRng(seeds, np.zeros(256), plies))
    logits = policy.logits(obs)
    for i in range(256):
        alone = policy.act(
            obs[i : i + 1], mask[i : i + 1], MatchRng(seeds[i : i + 1], [0], plies[i : i + 1])
        )
        assert alone[0] == together[i], f"row {i}"
        # Kernels differ by batch size in the last bits only (see agents/neural.py).
        np.testing.assert_allclose(
            policy.logits(obs[i : i + 1])[0], logits[i], rtol=1e-5, atol=1e-5
        )


def test_sampling_follows_the_softmax_of_legal_logits(tmp_path: Path) -> None:
    policy = make_policy(tmp_path, *SETUPS[1], temperature=0.5)
    obs, _, seeds = batch(policy, 1)
    k = 40_000
    obs = np.repeat(obs, k, axis=0)
    mask = np.ones((k, 5), dtype=bool)
    mask[:, 1] = False
    seeds = np.arange(k)
    counts = np.bincount(policy.act(obs, mask, rng_for(seeds)), minlength=5) / k
    logits = policy.logits(obs[:1])[0] / 0.5
    logits[1] = -np.inf
    expected = np.exp(logits - logits.max())
    expected /= expected.sum()
    assert counts[1] == 0
    np.testing.assert_allclose(counts, expected, atol=0.01)


def test_temperature_zero_is_masked_argmax_and_ignores_seeds(tmp_path: Path) -> None:
    policy = make_policy(tmp_path, *SETUPS[0], temperature=0.0)
    obs, mask, seeds = batch(policy, 300)
    expected = np.where(mask, policy.logits(obs), -np.inf).argmax(axis=1)
    np.testing.assert_array_equal(policy.act(obs, mask, rng_for(seeds)), expected)
    np.testing.assert_array_equal(policy.act(obs, mask, rng_for(seeds * 3 + 1)), expected)


def test_nan_weights_give_nan_actions(tmp_path: Path) -> None:
    spec = make_spec("simple_tag-v3", "mlp", {"hidden": [16]}, role="prey")
    net = build_net("mlp", spec.hparams, spec.obs_shape, spec.num_actions)
    with torch.no_grad():
        net.trunk[0].weight[0, 0] = float("nan")  # a diverged learner
    policy = NeuralPolicy.from_module(net, spec)
    obs, mask, seeds = batch(policy, 16)
    actions = policy.act(obs, mask, rng_for(seeds))
    assert actions.dtype == np.float64 and np.isnan(actions).all()
    with pytest.raises(InvalidSubmission, match="NaN"):  # and it can never be submitted
        save_checkpoint(net, spec, tmp_path / "diverged")


def test_only_broken_rows_are_nan(tmp_path: Path) -> None:
    policy = make_policy(tmp_path, *SETUPS[1])  # relu: an inf input reaches the logits
    obs, mask, seeds = batch(policy, 32)
    clean = policy.act(obs, mask, rng_for(seeds))
    obs[[3, 17], 0] = np.inf
    actions = policy.act(obs, mask, rng_for(seeds))
    assert actions.dtype == np.float64
    assert np.isnan(actions[[3, 17]]).all()
    rest = np.setdiff1d(np.arange(32), [3, 17])
    np.testing.assert_array_equal(actions[rest], clean[rest])


def test_snapshot_does_not_alias_the_live_module() -> None:
    spec = make_spec("connect_four-v3", "mlp", {"hidden": [32]})
    net = build_net("mlp", spec.hparams, spec.obs_shape, spec.num_actions)
    policy = NeuralPolicy.from_module(net, spec, temperature=0.0)
    obs = np.random.default_rng(1).integers(0, 2, (64, 6, 7, 2)).astype(np.int8)
    before, hash_before = policy.logits(obs), policy.weights_hash
    net(torch.as_tensor(obs, dtype=torch.float32)).sum().backward()
    with torch.no_grad():  # an in-place training step, as optimizers do
        for param in net.parameters():
            param.sub_(param.grad)
        net.head.bias.add_(100.0)
    np.testing.assert_array_equal(policy.logits(obs), before)
    assert policy.weights_hash == hash_before
    assert NeuralPolicy.from_module(net, spec).weights_hash != hash_before


def test_snapshot_hash_equals_saved_checkpoint_hash(tmp_path: Path) -> None:
    spec = make_spec("simple_tag-v3", "mlp", {"hidden": [8]}, role="predator")
    net = build_net("mlp", spec.hparams, spec.obs_shape, spec.num_actions)
    live = NeuralPolicy.from_module(net, spec)
    saved = load_checkpoint(save_checkpoint(net, spec, tmp_path / "pred"))
    assert live.weights_hash == saved.sha256 and live.agent_id == f"mlp-{saved.sha256[:16]}"


def test_random_init_is_seeded_and_leaves_global_rng_alone() -> None:
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    a, spec = random_init_checkpoint("connect_four-v3", "mlp", {"hidden": [8]}, seed=5)
    assert torch.equal(torch.rand(3), expected_next)
    b, _ = random_init_checkpoint("connect_four-v3", "mlp", {"hidden": [8]}, seed=5)
    c, _ = random_init_checkpoint("connect_four-v3", "mlp", {"hidden": [8]}, seed=6)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["head.weight"], c["head.weight"])
    assert spec.role == "player" and spec.hparams == {"hidden": [8], "activation": "relu"}


def test_random_init_needs_a_role_when_the_env_has_several() -> None:
    with pytest.raises(InvalidSubmission, match="several roles.*predator, prey"):
        random_init_checkpoint("simple_tag-v3", "mlp", {}, seed=0)


def test_bad_inputs_are_refused(tmp_path: Path) -> None:
    policy = make_policy(tmp_path, *SETUPS[1])
    obs, mask, seeds = batch(policy, 4)
    with pytest.raises(ValueError, match="expects observations"):
        policy.act(obs[:, :10], mask, rng_for(seeds))
    with pytest.raises(ValueError, match="mask"):
        policy.act(obs, mask[:, :3], rng_for(seeds))
    with pytest.raises(ValueError, match="temperature"):
        NeuralPolicy.from_module(
            build_net("mlp", {"hidden": [32]}, (16,), 5), policy.spec, temperature=-1.0
        )
    assert policy.act(obs[:0], mask[:0], rng_for(seeds[:0])).shape == (0,)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_cuda_without_gpu_says_so(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "a", "tictactoe-v3", "mlp", {"hidden": [4]})
    with pytest.raises(ValueError, match="CUDA is not available"):
        policy_from_file(tmp_path / "a", device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s[0]}-{s[3]}")
def test_cuda_agrees_with_cpu(tmp_path: Path, setup) -> None:
    cpu = make_policy(tmp_path, *setup, temperature=0.0)
    gpu = policy_from_file(next(tmp_path.glob("*.safetensors")), device="cuda", temperature=0.0)
    obs, mask, seeds = batch(cpu, 256)
    together = gpu.logits(obs)
    for i in range(0, 256, 17):  # per-row on the GPU too, up to rounding
        np.testing.assert_allclose(gpu.logits(obs[i : i + 1])[0], together[i], rtol=1e-4, atol=1e-4)
    # cuDNN convs may use TF32 (10-bit mantissa): compare actions where the choice is clear.
    cpu_logits = np.where(mask, cpu.logits(obs), -np.inf)
    np.testing.assert_allclose(together, cpu.logits(obs), rtol=1e-2, atol=1e-2)
    top2 = np.sort(cpu_logits, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 0.1
    assert clear.sum() > 128
    a, b = cpu.act(obs, mask, rng_for(seeds)), gpu.act(obs, mask, rng_for(seeds))
    np.testing.assert_array_equal(a[clear], b[clear])
    assert str(gpu.device).startswith("cuda") and b.dtype == np.int64


def test_random_init_checkpoint_gives_each_thread_its_own_seed_s_weights() -> None:
    """Threads initializing at once (the service's users, a test's) each get their seed's
    weights: the forked RNG is the process's, so unguarded seeds would cross."""
    seeds = list(range(100, 116))
    alone = {s: random_init_checkpoint("tictactoe-v3", "mlp", {"hidden": [64, 64]}, seed=s)[0] for s in seeds}
    together: dict[int, dict[str, torch.Tensor]] = {}

    def init(seed: int) -> None:
        for _ in range(20):
            together[seed] = random_init_checkpoint("tictactoe-v3", "mlp", {"hidden": [64, 64]}, seed=seed)[0]

    race([functools.partial(init, s) for s in seeds])
    for s in seeds:
        assert all(torch.equal(alone[s][k], together[s][k]) for k in alone[s]), s
    first = next(iter(alone[seeds[0]]))
    assert len({together[s][first].sum().item() for s in seeds}) == len(seeds)
