"""The env registry (ids, third-party registration, spec inference) and EnvSpec rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from envs import registry
from envs.builtin import BUILTIN_ENV_IDS, BUILTIN_ENVS
from envs.connect_four import ConnectFourCore
from envs.errors import ArenaError, UnknownEnv
from envs.registry import get_spec, list_envs, make_env, make_vector_core, register_env
from envs.spec import EnvSpec


@pytest.fixture
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made by a test vanish after it (the registry is process-wide)."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


def two_player(**overrides: object) -> EnvSpec:
    fields: dict = {
        "env_id": "duel-v0",
        "seats": ("a", "b"),
        "teams": ((0,), (1,)),
        "roles": ("player", "player"),
        "num_actions": 3,
        "obs_shapes": ((4,), (4,)),
    }
    return EnvSpec(**{**fields, **overrides})


def tag_like(**overrides: object) -> EnvSpec:
    """Three predators and one prey, like simple_tag-v3."""
    fields: dict = {
        "env_id": "tag-v0",
        "seats": ("p0", "p1", "p2", "prey"),
        "teams": ((0, 1, 2), (3,)),
        "roles": ("predator", "prey"),
        "num_actions": 5,
        "obs_shapes": ((16,), (16,), (16,), (14,)),
        "api": "parallel",
        "outcome": "first_team_if_positive",
    }
    return EnvSpec(**{**fields, **overrides})


# ---------- registration ----------


def test_register_third_party_aec_env_infers_spec(scratch_registry: None) -> None:
    spec = register_env("my_rps-v0", "pettingzoo.classic.rps_v2:env")
    assert spec.env_id == "my_rps-v0"
    assert spec.seats == ("player_0", "player_1")
    assert spec.teams == ((0,), (1,))
    assert spec.roles == ("player", "player") and spec.symmetric
    assert spec.num_actions == 3
    assert spec.obs_shapes == ((), ())
    assert spec.api == "aec"  # regression: wrapped AEC envs were inferred as "parallel"
    assert spec.outcome == "higher_score"
    assert get_spec("my_rps-v0") == spec
    assert "my_rps-v0" in [s.env_id for s in list_envs()]
    env = make_env("my_rps-v0")
    env.reset(seed=0)
    assert env.agent_selection == "player_0"
    assert make_vector_core("my_rps-v0") is None


def test_register_with_kwargs_passes_them_to_the_constructor(scratch_registry: None) -> None:
    spec = register_env("my_rpsls-v0", "pettingzoo.classic.rps_v2:env", kwargs={"num_actions": 5})
    assert spec.num_actions == 5 and spec.kwargs == {"num_actions": 5}
    assert make_env("my_rpsls-v0").action_space("player_1").n == 5
    # Overrides win over the registered kwargs.
    assert make_env("my_rpsls-v0", num_actions=3).action_space("player_1").n == 3


def test_register_parallel_env_infers_parallel_api(scratch_registry: None) -> None:
    spec = register_env("my_tag-v0", "mpe2.simple_tag_v3:parallel_env")
    assert spec.api == "parallel"
    assert spec.seats == ("adversary_0", "adversary_1", "adversary_2", "agent_0")
    assert spec.teams == ((0,), (1,), (2,), (3,))
    assert spec.num_actions == 5
    assert spec.obs_shapes == ((16,), (16,), (16,), (14,))
    assert register_env("my_rps-v1", "pettingzoo.classic.rps_v2:parallel_env").api == "parallel"


def test_register_with_spec_takes_the_registered_id(scratch_registry: None) -> None:
    spec = register_env("duel-v3", "pettingzoo.classic.rps_v2:env", two_player(num_actions=3))
    assert spec.env_id == "duel-v3" and get_spec("duel-v3").env_id == "duel-v3"


@pytest.mark.parametrize(
    "bad_id", ["rps", "rps-v", "rps-1", "rps-v1.0", "my game-v0", "rps-v0 ", "-v0", "rps_v2", ""]
)
def test_invalid_ids_are_rejected(scratch_registry: None, bad_id: str) -> None:
    with pytest.raises(ValueError, match="name-v<version>"):
        register_env(bad_id, "pettingzoo.classic.rps_v2:env")
    assert bad_id not in registry._REGISTRY


def test_entry_point_without_attribute_is_rejected(scratch_registry: None) -> None:
    with pytest.raises(ValueError, match="package.module:attribute"):
        register_env("my_rps-v0", "pettingzoo.classic.rps_v2")


def test_continuous_actions_are_rejected(scratch_registry: None) -> None:
    with pytest.raises(ValueError, match="only discrete action spaces"):
        register_env(
            "my_tag-v0", "mpe2.simple_tag_v3:parallel_env", kwargs={"continuous_actions": True}
        )
    assert "my_tag-v0" not in registry._REGISTRY


def test_entry_point_must_build_a_pettingzoo_env(scratch_registry: None) -> None:
    with pytest.raises(TypeError, match="not a PettingZoo AECEnv or ParallelEnv"):
        register_env("my_dict-v0", "collections:OrderedDict")
    assert "my_dict-v0" not in registry._REGISTRY


def test_per_seat_action_spaces_need_an_explicit_spec(scratch_registry: None) -> None:
    # simple_world_comm's leader has 20 actions, everyone else 5.
    with pytest.raises(ValueError, match="same Discrete action space"):
        register_env("my_comm-v0", "mpe2.simple_world_comm_v3:env")


def test_unknown_env_lists_known_envs() -> None:
    with pytest.raises(UnknownEnv) as info:
        get_spec("nope-v0")
    message = str(info.value)
    assert "nope-v0" in message
    for spec in list_envs():
        assert spec.env_id in message
    assert isinstance(info.value, ArenaError)
    with pytest.raises(UnknownEnv):
        make_env("connect_four-v2")
    with pytest.raises(UnknownEnv):
        make_vector_core("nope-v0")


def test_builtin_cores() -> None:
    assert isinstance(make_vector_core("connect_four-v3"), ConnectFourCore)
    assert make_vector_core("rps-v2") is None


def test_the_builtins_are_registered_once_the_registry_loads(scratch_registry: None) -> None:
    assert registry.builtin_env_ids() == BUILTIN_ENV_IDS == tuple(sorted(e.spec.env_id for e in BUILTIN_ENVS))
    assert {"connect_four-v3", "hide_and_seek-v1"} <= set(BUILTIN_ENV_IDS)
    register_env("my_rps-v0", "pettingzoo.classic.rps_v2:env")
    assert "my_rps-v0" in registry.list_registered() and "my_rps-v0" not in registry.builtin_env_ids()
    for entry in BUILTIN_ENVS:
        assert registry.get_entry(entry.spec.env_id) is entry


def test_the_builtins_are_data_that_import_no_registry() -> None:
    """envs.builtin -> envs.registry -> envs.builtin was a cycle (closed by an importlib string)."""
    code = "import sys, envs.builtin; print(*sorted(m for m in sys.modules if m.startswith('envs')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    loaded = out.stdout.split()
    assert "envs.builtin" in loaded and "envs.spec" in loaded
    assert "envs.registry" not in loaded


# ---------- EnvSpec validation ----------


@pytest.mark.parametrize(
    ("teams", "roles"),
    [
        (((0,), (0,)), ("player", "player")),  # seat 0 twice, seat 1 nowhere
        (((0, 1), (1,)), ("player", "player")),  # overlap
        (((0,),), ("player",)),  # seat 1 missing
        (((0,), (1,), (2,)), ("player",) * 3),  # seat 2 does not exist
        (((0, 1), ()), ("player", "player")),  # empty team
    ],
)
def test_teams_must_partition_seats(teams: tuple, roles: tuple) -> None:
    with pytest.raises(ValueError, match="partition"):
        two_player(teams=teams, roles=roles)


def test_one_role_per_team() -> None:
    with pytest.raises(ValueError, match="2 teams but 1 roles"):
        two_player(roles=("player",))
    with pytest.raises(ValueError, match="2 teams but 3 roles"):
        two_player(roles=("a", "b", "c"))


def test_one_obs_shape_per_seat_shared_within_a_team() -> None:
    with pytest.raises(ValueError, match="one observation shape per seat"):
        two_player(obs_shapes=((4,),))
    with pytest.raises(ValueError, match="share an observation shape"):
        tag_like(obs_shapes=((16,), (15,), (16,), (14,)))


def test_unknown_api_and_outcome_are_rejected() -> None:
    with pytest.raises(ValueError, match="api"):
        two_player(api="turns")
    with pytest.raises(ValueError, match="outcome"):
        two_player(outcome="most_points")
    with pytest.raises(ValueError, match="exactly 2 teams"):
        tag_like(teams=((0, 1), (2,), (3,)), roles=("a", "b", "c"))


def test_spec_accessors() -> None:
    spec = tag_like()
    assert spec.num_seats == 4 and spec.num_teams == 2
    assert spec.seat_team == (0, 0, 0, 1)
    assert spec.team_obs_shape(0) == (16,) and spec.team_obs_shape(1) == (14,)
    assert spec.team_of_role("prey") == 1 and spec.team_of_role("predator") == 0
    assert not spec.symmetric and two_player().symmetric


# ---------- outcome rules ----------


def test_team_scores_sum_seats_over_any_leading_shape() -> None:
    spec = tag_like()
    assert spec.team_scores(np.array([1.0, 2.0, 3.0, -4.0])).tolist() == [6.0, -4.0]
    batch = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    scores = spec.team_scores(batch)
    assert scores.shape == (2, 3, 2)
    assert np.array_equal(scores[..., 0], batch[..., :3].sum(-1))
    assert np.array_equal(scores[..., 1], batch[..., 3])


def test_higher_score_winner_and_draws() -> None:
    spec = two_player()
    seat_scores = np.array([[1, -1], [-1, 1], [0, 0], [0.5, 0.5], [3, 2], [-2, -3]])
    assert spec.winner(seat_scores).tolist() == [0, 1, -1, -1, 0, 0]
    assert spec.winner(np.array([0.0, 2.0])).tolist() == [1]  # one row, 1-D input
    three = EnvSpec(
        env_id="ffa-v0",
        seats=("a", "b", "c"),
        teams=((0,), (1,), (2,)),
        roles=("player",) * 3,
        num_actions=2,
        obs_shapes=((), (), ()),
    )
    # A tie for first is a draw; a tie below first is not.
    seat_scores = np.array([[2, 2, 1], [2, 1, 1], [0, 0, 0], [1, 3, 3], [1, 2, 3]])
    assert three.winner(seat_scores).tolist() == [-1, 0, -1, -1, 2]


def test_higher_score_sums_team_members() -> None:
    spec = EnvSpec(
        env_id="pairs-v0",
        seats=("a", "b", "c", "d"),
        teams=((0, 2), (1, 3)),
        roles=("player", "player"),
        num_actions=2,
        obs_shapes=((),) * 4,
    )
    # Team 0 = seats 0 and 2, team 1 = seats 1 and 3.
    assert spec.winner(np.array([[5, 1, -5, 1], [1, 0, 0, 1], [0, 1, 3, 0]])).tolist() == [1, -1, 0]


def test_first_team_if_positive_winner() -> None:
    spec = tag_like()
    seat_scores = np.array(
        [
            [10, 0, 0, -10],  # one tag: predators win
            [0, 0, 0, 0],  # no tag: prey wins
            [0, 0, 0, 5],  # prey scored, predators did not
            [-1, -1, 0, 3],  # negative predator total: prey
            [0.1, 0, 0, 100],  # any positive predator total beats a prey score
        ]
    )
    assert spec.winner(seat_scores).tolist() == [0, 1, 1, 1, 0]
    assert (spec.winner(seat_scores) >= 0).all(), "this rule never draws"
