"""arena.gym.make: Gymnasium conformance, masks, the episode rules, seeding and opponents."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import arena.gym
from agents.neural import write_checkpoint
from envs.errors import UnknownAgent
from envs.registry import get_spec


@pytest.mark.parametrize(("env_id", "opponents", "role"), [
    ("connect_four-v3", ["random", "heuristic:epsilon=0.3"], None),
    ("tictactoe-v3", ["heuristic"], None),
    ("rps-v2", ["counter", "rock"], None),
    ("hide_and_seek-v0", ["chaser"], "hider"),
    ("hide_and_seek-v0", ["box-hider"], "seeker"),
])
def test_check_env_passes(env_id, opponents, role):
    env = arena.gym.make(env_id, opponents=opponents, role=role)
    check_env(env, skip_render_check=True)
    spec = get_spec(env_id)
    assert env.observation_space.shape == spec.team_obs_shape(env.learner_teams[0])
    assert env.action_space.n == spec.num_actions


def play(env, seed: int, episodes: int, action_seed: int = 0) -> list[tuple]:
    """Trajectories of random legal actions: (obs bytes, action, reward, terminated) per step."""
    rng = np.random.default_rng(action_seed)
    out = []
    obs, info = env.reset(seed=seed)
    for _ in range(episodes):
        done = False
        while not done:
            mask = env.action_masks()
            assert (mask == info["action_mask"]).all()
            action = int(rng.choice(np.flatnonzero(mask)))
            obs, reward, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            out.append((obs.tobytes(), action, reward, terminated, truncated))
        obs, info = env.reset()
    return out


@pytest.mark.parametrize(("env_id", "opponents", "role"), [
    ("connect_four-v3", ["heuristic:epsilon=0.5", "random"], None),
    ("hide_and_seek-v0", ["chaser"], "hider"),
])
def test_episodes_are_reproducible_from_a_seed(env_id, opponents, role):
    first = play(arena.gym.make(env_id, opponents, role=role), seed=11, episodes=3)
    again = play(arena.gym.make(env_id, opponents, role=role), seed=11, episodes=3)
    other = play(arena.gym.make(env_id, opponents, role=role), seed=12, episodes=3)
    assert first == again
    assert first != other


def test_connect_four_mask_is_the_open_columns_and_full_columns_are_illegal():
    env = arena.gym.make("connect_four-v3", opponents=["random"], seed=3)
    obs, _ = env.reset()
    for _ in range(200):
        occupied = obs[..., 0] + obs[..., 1]
        assert (env.action_masks() == (occupied[0] == 0)).all()  # row 0 is the top row
        obs, _, terminated, truncated, _ = env.step(int(np.flatnonzero(env.action_masks())[0]))
        if terminated or truncated:
            assert env.action_masks().all()  # ended: all True, never an empty mask
            obs, _ = env.reset()


def test_illegal_action_ends_the_episode_as_a_loss():
    env = arena.gym.make("tictactoe-v3", opponents=["random"], seed=0)
    env.reset()
    while env.action_masks().all():  # find a position with an occupied square
        env.step(int(np.flatnonzero(env.action_masks())[0]))
    illegal = int(np.flatnonzero(~env.action_masks())[0])
    _, reward, terminated, truncated, info = env.step(illegal)
    assert (reward, terminated, truncated, info["illegal_action"]) == (-1.0, True, False, True)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset()
    assert env.step(99)[1:4] == (-1.0, True, False)  # outside the action space too


def test_rewards_are_the_outcome_for_the_learner_seat():
    """rps against 'rock' for 15 rounds: always paper wins every round, so the match (+1)."""
    env = arena.gym.make("rps-v2", opponents=["rock"], seed=0)
    env.reset()
    rewards, done = [], False
    while not done:
        _, reward, terminated, truncated, info = env.step(1)  # paper
        rewards.append(reward)
        done = terminated or truncated
    assert rewards[-1] == 1.0 and set(rewards[:-1]) == {0.0} and terminated
    assert info["outcome"] == 1.0 and info["opponents"] == {1 - info["learner_team"]: "rock"}
    for action, outcome in ((0, 0.0), (2, -1.0)):  # rock against rock draws, scissors loses
        env.reset()
        last = env.step(action)
        while not last[2]:
            last = env.step(action)
        assert last[1] == outcome


def test_symmetric_games_draw_the_learner_seat_and_opponents_per_episode():
    env = arena.gym.make("rps-v2", opponents=["rock", "paper"], seed=5)
    seen_teams, seen_opponents = set(), set()
    env.reset()
    for _ in range(30):
        done = False
        while not done:
            _, _, terminated, truncated, info = env.step(0)
            done = terminated or truncated
        seen_teams.add(info["learner_team"])
        seen_opponents.update(info["opponents"].values())
        env.reset()
    assert seen_teams == {0, 1} and seen_opponents == {"rock", "paper"}


def test_role_env_plays_the_role_team_seat_by_seat():
    env = arena.gym.make("hide_and_seek-v0", opponents=["chaser"], role="hider", seed=1)
    env.reset()
    spec = get_spec("hide_and_seek-v0")
    seats = set()
    for _ in range(10):
        seats.add(env.seat)
        env.step(0)
    assert seats == set(spec.teams[spec.team_of_role("hider")])  # both hiders, one after the other
    with pytest.raises(ValueError, match="roles hider, seeker"):
        arena.gym.make("hide_and_seek-v0", role="goalkeeper")
    with pytest.raises(ValueError, match="symmetric"):
        arena.gym.make("connect_four-v3", role="hider")


def test_file_and_pfsp_opponents(tmp_path):
    for seed in (1, 2):
        write_checkpoint(tmp_path / "pool" / f"snap{seed}.safetensors", "tictactoe-v3", "mlp", {"hidden": [8]},
                         seed=seed)
    single = tmp_path / "pool" / "snap1.safetensors"
    env = arena.gym.make("tictactoe-v3", opponents=[f"file:{single}"], seed=0)
    env.reset()
    assert env.opponents.policy(0).agent_id.startswith("mlp-")
    env = arena.gym.make("tictactoe-v3", opponents=[f"pfsp:{tmp_path / 'pool'}"], seed=0)
    env.reset()
    drawn = set()
    for _ in range(40):
        done = False
        while not done:
            _, _, terminated, truncated, info = env.step(int(np.flatnonzero(env.action_masks())[0]))
            done = terminated or truncated
        drawn.update(info["opponents"].values())
        env.reset()
    assert len(drawn) == 2
    rates = env.opponents.win_rates()
    assert set(rates) == drawn and all(r != 0.5 for r in rates.values())  # PFSP saw the results


def test_bad_opponent_names_fail_at_construction():
    with pytest.raises(UnknownAgent, match="unknown agent"):
        arena.gym.make("connect_four-v3", opponents=["grandmaster"])
    with pytest.raises(UnknownAgent, match="cannot reach the Arena server"):  # nothing listens on port 1
        arena.gym.make("connect_four-v3", opponents=["arena:12@http://127.0.0.1:1"])
    with pytest.raises(UnknownAgent, match="arena:<agent_id>@<url>"):
        arena.gym.make("connect_four-v3", opponents=["arena:twelve"])
    with pytest.raises(UnknownAgent, match="no such directory"):
        arena.gym.make("connect_four-v3", opponents=["pfsp:/nonexistent/pool"])


@pytest.mark.slow
def test_maskable_ppo_trains_on_the_env():
    """sb3-contrib's MaskablePPO reads action_masks() through SB3's VecEnv (the train extra)."""
    sb3_contrib = pytest.importorskip("sb3_contrib")
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(lambda: arena.gym.make("tictactoe-v3", opponents=["random"]), n_envs=2, seed=0)
    model = sb3_contrib.MaskablePPO("MlpPolicy", venv, n_steps=32, batch_size=32, n_epochs=1, seed=0)
    model.learn(128)
    assert model.num_timesteps >= 128
