"""Architecture registry and its networks: shapes, exact parameter counts, strict hyper-parameters."""

from __future__ import annotations

import pytest
import torch

from agents.archs import ARCHS, MAX_PARAMETERS, count_parameters, resolve_hparams, state_shapes
from agents.nets import BUILDERS, build_net
from envs.errors import InvalidSubmission
from envs.registry import get_spec

CASES = [
    ("mlp", {}, (6, 7, 2), 7),
    ("mlp", {"hidden": [], "activation": "tanh"}, (16,), 5),
    ("mlp", {"hidden": [8]}, (), 3),  # rps-v2: scalar observation
    ("cnn", {}, (6, 7, 2), 7),
    ("cnn", {"channels": [4, 8, 4], "kernel": 5, "hidden": 16, "activation": "tanh"}, (3, 3, 2), 9),
]


@pytest.mark.parametrize(("arch", "hparams", "obs_shape", "num_actions"), CASES)
def test_logits_shape_and_exact_parameter_count(arch, hparams, obs_shape, num_actions) -> None:
    net = build_net(arch, hparams, obs_shape, num_actions)
    logits = net(torch.randn(5, *obs_shape))
    assert logits.shape == (5, num_actions) and logits.dtype == torch.float32
    assert count_parameters(arch, hparams, obs_shape, num_actions) == sum(
        p.numel() for p in net.parameters()
    )


@pytest.mark.parametrize(("arch", "hparams", "obs_shape", "num_actions"), CASES)
def test_the_state_shapes_without_torch_are_the_built_networks(arch, hparams, obs_shape, num_actions) -> None:
    """agents.archs lists the state dict uploads are checked against; build_net makes it: the same
    names, in the same order, with the same shapes."""
    with torch.device("meta"):
        built = build_net(arch, hparams, obs_shape, num_actions).state_dict()
    assert state_shapes(arch, hparams, obs_shape, num_actions) == {k: tuple(v.shape) for k, v in built.items()}
    assert list(state_shapes(arch, hparams, obs_shape, num_actions)) == list(built)


def test_every_arch_has_a_network() -> None:
    assert set(BUILDERS) == set(ARCHS)


def test_defaults_match_the_brief_and_keys_are_stable() -> None:
    assert resolve_hparams("mlp", None, (16,), 5) == {"hidden": [256, 256], "activation": "relu"}
    assert resolve_hparams("cnn", {}, (6, 7, 2), 7) == {
        "channels": [32, 32],
        "kernel": 3,
        "hidden": 128,
        "activation": "relu",
    }
    assert list(build_net("mlp", {"hidden": [4]}, (2,), 3).state_dict()) == [
        "trunk.0.weight",
        "trunk.0.bias",
        "head.weight",
        "head.bias",
    ]
    assert list(build_net("cnn", {"channels": [4]}, (3, 3, 2), 9).state_dict()) == [
        "convs.0.weight",
        "convs.0.bias",
        "fc.weight",
        "fc.bias",
        "head.weight",
        "head.bias",
    ]


def test_cnn_sees_the_board_channels_last() -> None:
    """A board that differs in one cell must change the logits (no scrambled layout)."""
    net = build_net("cnn", {"channels": [4], "hidden": 8}, (6, 7, 2), 7)
    board = torch.zeros(2, 6, 7, 2)
    board[1, 5, 3, 0] = 1.0
    out = net(board)
    assert not torch.equal(out[0], out[1])


def test_every_registered_env_has_a_buildable_mlp() -> None:
    for env_id in ("connect_four-v3", "tictactoe-v3", "rps-v2", "simple_tag-v3"):
        env = get_spec(env_id)
        for team in range(env.num_teams):
            shape = env.team_obs_shape(team)
            assert build_net("mlp", {"hidden": [8]}, shape, env.num_actions)(
                torch.zeros(1, *shape)
            ).shape == (1, env.num_actions)


def test_meta_build_allocates_nothing() -> None:
    with torch.device("meta"):
        net = build_net("cnn", {"channels": [512, 512], "hidden": 64}, (6, 7, 2), 7)
    assert all(p.is_meta for p in net.parameters())


@pytest.mark.parametrize(
    ("arch", "hparams", "obs_shape", "message"),
    [
        ("cnn", {}, (16,), "needs a board observation"),
        ("cnn", {"kernel": 4}, (6, 7, 2), "must be odd"),
        ("cnn", {"kernel": 9}, (6, 7, 2), "in [1, 7]"),
        ("cnn", {"channels": []}, (6, 7, 2), "1 to 6 entries"),
        ("cnn", {"hidden": 12.5}, (6, 7, 2), "must be an integer"),
        ("cnn", {"channels": [512] * 6}, (6, 7, 2), "more than the limit"),
        ("mlp", {"hidden": [8] * 9}, (16,), "0 to 8 entries"),
        ("mlp", {"hidden": (8, False)}, (16,), "'hidden[1]' must be an integer"),
        ("mlp", {"dropout": 0.1}, (16,), "unknown hyper-parameter(s) 'dropout'"),
        ("mlp", "hidden=8", (16,), "hparams must be a JSON object"),
        ("rnn", {}, (16,), "unknown arch 'rnn'"),
        ("mlp", {}, (16, 0), "obs_shape must be a list of positive integers"),
    ],
)
def test_bad_hparams_are_refused_with_a_reason(arch, hparams, obs_shape, message) -> None:
    with pytest.raises(InvalidSubmission) as info:
        build_net(arch, hparams, obs_shape, 5)
    assert message in str(info.value)


def test_parameter_limit_is_checked_before_allocating() -> None:
    hparams = {"hidden": [4096, 4096]}
    assert 4096 * 4096 > MAX_PARAMETERS
    with pytest.raises(InvalidSubmission, match="parameters"):
        build_net("mlp", hparams, (16,), 5)


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        ARCHS["evil"] = ARCHS["mlp"]  # type: ignore[index]
    assert sorted(ARCHS) == ["cnn", "mlp"]
