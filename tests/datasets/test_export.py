"""arena export: a recorded board's Parquet tables load back, and every observation equals an
independent replay of the records through the plain PettingZoo env (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from agents.policy import derive_seed
from arena.cli import app
from arena.datasets import export_board
from arena.datasets.parquet import action_masks, observations
from arena.engine import MatchJob, play_matches
from arena.engine.records import MatchRecord
from arena.ladder.dispatch import LadderConfig, open_ladder
from arena.runners import AgentSource, InProcessRunner
from arena.storage.db import make_engine, session_factory
from arena.storage.db import repositories as repo
from envs.registry import flat_obs, get_spec, make_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sessions(migrated_db_url):
    sessions = session_factory(make_engine(migrated_db_url))
    yield sessions
    sessions.dispose()


def record_ladder(sessions, env_id: str, agents: tuple[str, ...], matches: int) -> None:
    ladder = open_ladder(sessions, LadderConfig(env_id, batch_size=64, seed=3))
    ladder.add_agents([AgentSource(key=k, builtin=k) for k in agents])
    ladder.run(InProcessRunner(), matches)


class Cheater:
    """Plays an occupied tictactoe square on its third move (a real illegal-action forfeit)."""

    agent_id = "cheater"
    weights_hash = None

    def act(self, obs, mask, rng):
        plies = (obs.reshape(len(obs), -1).sum(1)).astype(int)
        legal_first = mask.argmax(1)
        illegal_first = (~mask).argmax(1)
        return np.where((plies >= 4) & (~mask).any(1), illegal_first, legal_first)


def insert(sessions, records: list[MatchRecord]) -> None:
    sessions.write_transaction(lambda s: repo.insert_matches(s, [repo.match_row(r) for r in records]),
                               what="test matches")


def replay_observations(env_id: str, seed: int, actions: list[tuple[int, int]]) -> list[tuple]:
    """(seat, observation, mask) before every recorded action, through the wrapped PettingZoo AEC env."""
    spec = get_spec(env_id)
    env = make_env(env_id)
    env.reset(seed=int(seed % 2**31))
    out = []
    for seat, action in actions:
        assert env.agent_selection == spec.seats[seat]
        raw = env.observe(env.agent_selection)
        mask = np.asarray(raw["action_mask"], bool) if isinstance(raw, dict) else np.ones(spec.num_actions, bool)
        out.append((seat, np.asarray(flat_obs(raw)), mask))
        if not mask[action]:
            break
        env.step(action)
    return out


def check_against_replay(out: Path, env_id: str, sessions) -> tuple[pq.Table, pq.Table]:
    steps = pq.read_table(out / "steps.parquet")
    matches = pq.read_table(out / "matches.parquet")
    obs, masks = observations(steps), action_masks(steps)
    seqs = steps["match_seq"].to_numpy()
    with sessions() as session:
        stored = {m.seq: m for m in repo.iter_matches(session, env_id)}
    exported = [seq for seq, ok in zip(matches["match_seq"].to_pylist(), matches["exported"].to_pylist()) if ok]
    assert exported
    for seq in exported:
        rows = np.flatnonzero(seqs == seq)
        m = stored[seq]
        expected = replay_observations(env_id, m.seed, [tuple(a) for a in m.actions])
        assert len(rows) == len(expected)
        assert steps["action"].to_numpy()[rows].tolist() == [a for _, a in m.actions]
        for row, (seat, o, mask) in zip(rows, expected):
            assert steps["seat"][int(row)].as_py() == seat
            np.testing.assert_array_equal(obs[row], o.reshape(obs[row].shape))
            np.testing.assert_array_equal(masks[row], mask)
        rewards = steps["reward"].to_numpy()[rows]
        seat_col = steps["seat"].to_numpy()[rows]
        for seat, score in enumerate(m.scores):  # every seat's rewards sum to its recorded score
            assert rewards[seat_col == seat].sum() == pytest.approx(score)
            ends = steps["terminated"].to_numpy()[rows][seat_col == seat]
            assert ends[-1] and not ends[:-1].any()
    return steps, matches


def test_board_export_equals_a_replay_and_skips_what_it_cannot_rebuild(sessions, tmp_path):
    env_id = "tictactoe-v3"
    record_ladder(sessions, env_id, ("heuristic", "heuristic:epsilon=0.5", "random"), 40)
    spec = get_spec(env_id)
    from agents.catalog import make_policy

    jobs = [MatchJob(derive_seed(9, i), ("cheater", "random")) for i in range(3)]
    forfeits = play_matches(env_id, jobs, {"cheater": Cheater(), "random": make_policy("random", env_id)})
    assert all(r.termination == "illegal_action" for r in forfeits)
    normal = play_matches(env_id, [MatchJob(derive_seed(9, 10 + i), ("random", "random")) for i in range(2)],
                          {"random": make_policy("random", env_id)})
    tampered = normal[0]
    tampered.winner = 0 if tampered.winner != 0 else 1
    dropped = normal[1]
    dropped.actions = []
    insert(sessions, [*forfeits, tampered, dropped])

    report = export_board(sessions, env_id, tmp_path)
    assert report.matches == 45 and report.exported == 43
    assert report.skipped == {"no moves kept": 1, "the re-simulated end differs from normal": 1}
    steps, matches = check_against_replay(tmp_path, env_id, sessions)
    assert steps.num_rows == report.steps
    assert (~steps["legal"].to_numpy()).sum() == 3  # the cheaters' illegal moves, each ending its match
    reasons = dict(zip(matches["match_id"].to_pylist(), matches["skipped_reason"].to_pylist()))
    assert reasons[dropped.match_id] == "no moves kept" and reasons[forfeits[0].match_id] == ""
    agents = pq.read_table(tmp_path / "agents.parquet").to_pylist()
    rated = {a["key"]: a for a in agents if a["role"] == "player"}
    assert set(rated) == {"heuristic", "heuristic:epsilon=0.5", "random"}
    assert all(a["games"] > 0 and a["sigma"] < 25 / 3 for a in rated.values())
    ids = {a["key"]: a["agent_id"] for a in agents}
    by_key: dict[str, set] = {}
    for key, agent_id in zip(steps["agent_key"].to_pylist(), steps["agent_id"].to_pylist()):
        by_key.setdefault(key, set()).add(agent_id)
    assert by_key["heuristic"] == {ids["heuristic"]}
    assert by_key["cheater"] == {None}  # inserted without registering the agent: no id
    description = json.loads((tmp_path / "dataset.json").read_text())
    assert description["obs_shape"] == list(spec.obs_shapes[0]) and description["steps"] == steps.num_rows


def test_generic_env_export_equals_a_replay(sessions, tmp_path):
    """rps-v2 has no vectorized core: its matches re-simulate through the PettingZoo env."""
    record_ladder(sessions, "rps-v2", ("rock", "counter", "random"), 12)
    report = export_board(sessions, "rps-v2", tmp_path)
    assert report.exported == report.matches == 12
    steps, _ = check_against_replay(tmp_path, "rps-v2", sessions)
    assert observations(steps).shape == (steps.num_rows,)


def test_role_export_of_a_parallel_env(sessions, tmp_path):
    env_id = "hide_and_seek-v0"
    spec = get_spec(env_id)
    record_ladder(sessions, env_id, ("chaser", "box-hider", "random"), 4)
    report = export_board(sessions, env_id, tmp_path, role="hider")
    assert report.exported == report.matches >= 4
    steps = pq.read_table(tmp_path / "steps.parquet")
    assert set(steps["role"].cast("string").to_pylist()) == {"hider"}
    obs = observations(steps)
    with sessions() as session:
        stored = list(repo.iter_matches(session, env_id))
    first = stored[0]
    env = make_env(env_id)
    now, _ = env.reset(seed=int(first.seed % 2**31))
    rows = np.flatnonzero(steps["match_seq"].to_numpy() == first.seq)
    seat_col = steps["seat"].to_numpy()[rows]
    i, expected = 0, []
    while i < len(first.actions):
        cycle = first.actions[i:i + len(env.agents)]
        expected.extend(now[spec.seats[s]] for s, _ in cycle if spec.roles[spec.seat_team[s]] == "hider")
        now, *_ = env.step({spec.seats[s]: a for s, a in cycle})
        i += len(cycle)
    assert len(rows) == len(expected) and set(seat_col) == {0, 1}
    for row, o in zip(rows, expected):
        np.testing.assert_array_equal(obs[row], o)
    with pytest.raises(ValueError, match="roles hider, seeker"):
        export_board(sessions, env_id, tmp_path / "x", role="goalie")


def test_minari_export_loads_and_passes_minari_checks(sessions, tmp_path):
    minari = pytest.importorskip("minari")
    from arena.datasets.minari_format import dataset_id, datasets_path

    env_id = "tictactoe-v3"
    record_ladder(sessions, env_id, ("heuristic", "random"), 10)
    report = export_board(sessions, env_id, tmp_path, fmt="minari")
    assert report.episodes == 2 * report.exported == 20
    with datasets_path(tmp_path):
        dataset = minari.load_dataset(dataset_id(env_id, "player"))
        assert dataset.total_episodes == 20 and dataset.total_steps == report.steps
        steps = 0
        for episode in dataset.iterate_episodes():  # Minari's own integrity rules, checked one by one
            n = len(episode.rewards)
            steps += n
            assert len(episode.observations) == n + 1 and len(episode.actions) == n
            assert len(episode.rewards) == len(episode.terminations) == len(episode.truncations) == n
            assert all(dataset.observation_space.contains(o) for o in episode.observations)
            assert all(dataset.action_space.contains(int(a)) for a in episode.actions)
            assert episode.terminations[-1] and not episode.terminations[:-1].any()
            assert episode.infos["action_mask"].shape == (n + 1, 9)
        assert steps == dataset.total_steps


def test_cli_export(migrated_db_url, sessions, tmp_path):
    record_ladder(sessions, "connect_four-v3", ("heuristic", "random"), 8)
    result = CliRunner().invoke(app, ["export", "--env", "connect_four-v3", "--format", "parquet",
                                      "--out", str(tmp_path / "ds"), "--database-url", migrated_db_url])
    assert result.exit_code == 0, result.output
    assert pq.read_table(tmp_path / "ds" / "matches.parquet").num_rows == 8
    bad = CliRunner().invoke(app, ["export", "--env", "simple_tag-v3", "--out", str(tmp_path / "tag"),
                                   "--database-url", migrated_db_url])
    assert bad.exit_code == 2 and "--role" in bad.output


def test_benchmark_smoke_mode_prints_its_json_keys():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "export.py"), "--smoke"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"batched_matches_per_s", "naive_matches_per_s", "ratio", "matches", "env"} <= result.keys()
