"""The hide-and-seek league on a real (embedded) Redis pool: populations, PFSP, TrueSkill, resume.

Budgets are tiny (a few updates of 32 episodes): these check the machinery - snapshots in
the per-role pools, PFSP-fed win-rate tables, phase rates and ratings per generation,
resuming after a SIGKILL - not learning (that is ``benchmarks/hide_and_seek.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

from arena.snapshots.durable import FileSnapshotStore
from arena.snapshots.pool import RedisSnapshotPool
from arena.storage.redis_server import connect_redis
from arena.training.hide_and_seek.config import HideAndSeekLeagueConfig, default_v1_ppo
from arena.training.hide_and_seek.evaluation import GenerationRatings, rate_generations
from arena.training.hide_and_seek.league import HideAndSeekLeague
from arena.training.hide_and_seek.state import STATE_FILE, STATE_VERSION
from envs.hide_and_seek.curriculum import CurriculumState
from envs.hide_and_seek.rules import PHASES

pytestmark = pytest.mark.redis
REPO = Path(__file__).resolve().parents[2]


def tiny(name: str = "tiny") -> HideAndSeekLeagueConfig:
    ppo = replace(default_v1_ppo(seed=1), num_envs=32, hidden=[16], minibatches=4, epochs=1, device="cpu")
    return HideAndSeekLeagueConfig(name=name, ppo=ppo, updates_per_generation=1, eval_episodes=16)


def tiny_local(name: str) -> HideAndSeekLeagueConfig:
    """:func:`tiny` with the local critic: every league saved before the critic choice had one."""
    cfg = tiny(name)
    cfg.ppo = replace(cfg.ppo, critic="local")
    return cfg


def make_pool(redis_url: str, tmp_path: Path) -> RedisSnapshotPool:
    return RedisSnapshotPool(connect_redis(redis_url), FileSnapshotStore(tmp_path / "snapshots"))


def test_league_snapshots_both_populations_rates_them_and_resumes(redis_url: str, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    league = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, tiny())
    assert not league.resumed and len(league.generations) == 1  # generation 0, untrained
    seen = []
    league.run(5.0, max_generations=3, on_generation=seen.append)
    gens = league.generations
    assert [s.generation for s in gens] == [0, 1, 2] and [s.generation for s in seen] == [1, 2]
    for role in ("hider", "seeker"):
        members = league.pool.list(league.pools[role])
        assert sorted(members) == sorted(getattr(s, f"{role}_sha256") for s in gens)
    assert all(set(s.phase_rates) == set(PHASES) for s in gens)
    assert all(0.0 <= v <= 1.0 for s in gens for v in s.phase_rates.values())
    assert all(s.hider_sigma < 25 / 3 and s.seeker_sigma < 25 / 3 for s in gens)  # rated
    # PFSP: each learner's table holds results against past generations of the other role.
    assert league.tables["hider"].opponents() and league.tables["seeker"].opponents()
    assert [row["generation"] for row in league.phase_table()] == [0, 1, 2]
    _assert_rated_as_a_replay(league)

    again = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, tiny())
    assert again.resumed and again.trainer.updates == league.trainer.updates
    assert again.curriculum_shares == league.curriculum_shares
    assert again.trainer.core.box_by_door == league.curriculum_shares[0]
    assert [s.hider_sha256 for s in again.generations] == [s.hider_sha256 for s in gens]
    for role in ("hider", "seeker"):
        for a, b in zip(again.trainer.models[role].parameters(), league.trainer.models[role].parameters()):
            assert torch.equal(a, b)
        saved = again.trainer.generations[2][role]
        assert all(torch.equal(saved[k], league.trainer.generations[2][role][k]) for k in saved)
    again.run(5.0, max_generations=4)
    assert [s.generation for s in again.generations] == [0, 1, 2, 3]
    assert again.trainer.updates == league.trainer.updates + 1
    _assert_rated_as_a_replay(again)  # a resumed league rebuilds its ratings from the saved matches


def _assert_rated_as_a_replay(league: HideAndSeekLeague) -> None:
    """The ratings kept generation after generation are those of replaying every match."""
    hiders, seekers = rate_generations(league.matches, len(league.generations))
    assert [(s.hider_mu, s.hider_sigma, s.seeker_mu, s.seeker_sigma) for s in league.generations] == \
        [(h.mu, h.sigma, k.mu, k.sigma) for h, k in zip(hiders, seekers, strict=True)]


def test_generation_ratings_apply_each_match_once_in_order() -> None:
    matches = [(g % 3, (g * 2) % 3, g % 3 - 1) for g in range(30)]
    kept = GenerationRatings()
    for end in (0, 7, 7, 19, 30):  # as a league's match list grows, generation by generation
        kept.update(matches[:end])
    assert kept.applied == 30 and kept.ratings(3) == rate_generations(matches, 3)
    with pytest.raises(ValueError, match="fewer than the 30 already rated"):
        kept.update(matches[:20])  # a list that is not the same one, grown


SCRIPT = """
import sys, torch
torch.set_num_threads(1)
from tests.training.test_hide_and_seek_league import tiny, make_pool
from arena.training.hide_and_seek.league import HideAndSeekLeague
from pathlib import Path
league = HideAndSeekLeague(make_pool(sys.argv[1], Path(sys.argv[2])), sys.argv[2], tiny("killed"))
league.run(10.0, max_generations=1000)
"""


@pytest.mark.slow
def test_league_resumes_after_a_kill(redis_url: str, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    state = tmp_path / "leagues" / "killed" / "hide_and_seek.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, redis_url, str(tmp_path)], cwd=REPO, env=env)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if state.is_file() and len(json.loads(state.read_text())["generations"]) >= 2:  # 0 and a trained 1
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the league stopped on its own"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    saved = json.loads(state.read_text())
    league = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, tiny("killed"))
    assert league.resumed and len(league.generations) == len(saved["generations"]) >= 2
    assert league.trainer.updates == saved["updates"] > 0
    n = len(league.generations)
    league.run(5.0, max_generations=n + 1)
    assert [s.generation for s in league.generations] == list(range(n + 1))
    assert league.pool.count(league.pools["hider"]) == n + 1


def test_curriculum_mixes_boxes_by_the_doors_then_the_ramp_by_a_door(redis_url: str, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    pool = make_pool(redis_url, tmp_path)
    league = HideAndSeekLeague(pool, tmp_path, tiny("mix"))
    fort0 = league.generations[0].phase_rates["fort"]
    assert league.curriculum_shares == pytest.approx((0.5 * (1 - fort0 / 0.8), 0.0))
    evaluator = league.evaluator
    assert league.trainer.core.box_by_door == evaluator.train_core.box_by_door == league.curriculum_shares[0]
    assert not evaluator.standard_core.box_by_door and not evaluator.standard_core.ramp_by_door  # the headline's
    shares = league.rule.shares
    assert shares({}) == (0.5, 0.0)
    assert shares({"fort": 0.4}) == pytest.approx((0.25, 0.0))  # ramps wait until forts are common
    assert shares({"fort": 0.6}) == pytest.approx((0.125, 0.25))
    assert shares({"fort": 0.9, "ramp_defense": 0.4}) == pytest.approx((0.0, 0.25))
    assert shares({"fort": 1.0, "ramp_defense": 0.8}) == (0.0, 0.0)
    off = HideAndSeekLeague(pool, tmp_path, replace(tiny("off"), curriculum=False))
    assert off.curriculum_shares == (0.0, 0.0) and not off.trainer.core.box_by_door
    league.set_curriculum(CurriculumState(0.1, 0.3, 0.4))
    league.save()
    again = HideAndSeekLeague(pool, tmp_path, tiny("mix"))
    assert again.curriculum_shares == (0.1, 0.3) and again.trainer.core.ramp_by_door == 0.3
    assert again.ramp_reach == again.trainer.core.ramp_reach == again.evaluator.train_core.ramp_reach == 0.4


def test_ramp_stage_reach_moves_with_the_stage_defense_rate(redis_url: str, tmp_path: Path) -> None:
    """ADR's rule: up a step at >= 0.4 defended, down below 0.1, clipped to [0, 1]; the stage
    is evaluated (on its own episodes at the current reach) only while it trains."""
    torch.set_num_threads(1)
    league = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, tiny("reach"))
    assert league.generations[0].ramp_stage_defense is None and league.ramp_reach == 0.0
    nxt = league.rule.next_reach
    assert nxt(0.0, None) == 0.0 and nxt(0.0, 0.05) == 0.0 and nxt(0.0, 0.4) == 0.1 and nxt(0.0, 0.3) == 0.0
    assert nxt(0.95, 0.9) == 1.0 and nxt(0.95, 0.0) == pytest.approx(0.85) and nxt(0.95, 0.2) == 0.95
    league.set_curriculum(CurriculumState(0.0, 0.5, 0.0))
    league.run(5.0, max_generations=2)
    last = league.generations[-1]
    assert last.ramp_curriculum == 0.5 and last.ramp_reach == 0.0
    assert last.ramp_stage_defense is not None and 0.0 <= last.ramp_stage_defense <= 1.0
    assert league.ramp_reach == (0.1 if last.ramp_stage_defense >= 0.4 else 0.0)
    assert HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, tiny("reach")).ramp_reach == league.ramp_reach


def as_first_version(state: dict) -> dict:
    """A state as the league wrote it before states were versioned: no ``version``, the
    trainer's minibatches given by their size, no ``critic`` choice."""
    old = {k: v for k, v in state.items() if k != "version"}
    ppo = dict(old["config"]["ppo"])
    del ppo["minibatches"], ppo["critic"]
    ppo["minibatch_size"] = 512
    old["config"] = {**old["config"], "ppo": ppo}
    return old


def test_a_league_saved_before_states_were_versioned_resumes(redis_url: str, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    league = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, tiny_local("old"))
    league.run(5.0, max_generations=2)
    path = tmp_path / "leagues" / "old" / STATE_FILE
    saved = json.loads(path.read_text())
    assert saved["version"] == STATE_VERSION
    path.write_text(json.dumps(as_first_version(saved)))
    again = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, tiny("old"))
    assert again.resumed and again.trainer.updates == league.trainer.updates
    assert again.cfg.ppo.minibatches == 6  # 29 live envs x 50 steps x 2 hiders / 512
    assert [asdict(s) for s in again.generations] == [asdict(s) for s in league.generations]
    assert again.tables["hider"].to_json() == league.tables["hider"].to_json()
    again.run(5.0, max_generations=3)
    assert json.loads(path.read_text())["version"] == STATE_VERSION and len(again.generations) == 3
    path.write_text(json.dumps({**saved, "version": STATE_VERSION + 1}))
    with pytest.raises(ValueError, match="newer Arena"):
        HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, tiny("old"))


def test_a_central_critic_league_resumes_and_a_version_2_state_keeps_its_local_critic(
        redis_url: str, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    central = tiny("central")
    central.ppo = replace(central.ppo, critic="central", gamma=0.998)
    league = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, central)
    league.run(5.0, max_generations=2)
    again = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, tiny("central"))  # the saved config wins
    assert again.cfg.ppo.critic == "central" and again.cfg.ppo.gamma == 0.998
    critics = [lg.trainer.models["seeker"].critic.parameters() for lg in (league, again)]
    assert all(torch.equal(x, y) for x, y in zip(*critics, strict=True))
    local = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, tiny_local("v2"))
    path = tmp_path / "leagues" / "v2" / STATE_FILE
    saved = json.loads(path.read_text())
    del saved["config"]["ppo"]["critic"]
    path.write_text(json.dumps({**saved, "version": 2}))
    resumed = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, tiny("v2"))
    assert resumed.resumed and resumed.cfg.ppo.critic == "local" and resumed.trainer.critic_dim == 0
    assert local.cfg.ppo == resumed.cfg.ppo


def test_generations_between_evaluations_read_their_training_episodes(redis_url: str, tmp_path: Path) -> None:
    """``eval_every=2``: generations 0 and 2 are evaluated on the standard layouts (and keep the
    training episodes' rates beside, to compare); 1 and 3 read the same detectors from their own
    training episodes that started as the standard layout, and their matches from its games."""
    torch.set_num_threads(1)
    cfg = replace(tiny("every2"), eval_every=2)
    league = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, cfg)
    league.run(5.0, max_generations=4)
    gens = league.generations
    assert [s.evaluated for s in gens] == [True, False, True, False]
    for s in gens[1:]:
        assert set(s.training_phase_rates) == set(PHASES)
        assert all(0.0 <= v <= 1.0 for v in s.training_phase_rates.values())
    assert gens[2].phase_episodes == cfg.eval_episodes and gens[2].phase_rates != gens[2].training_phase_rates
    assert gens[1].phase_rates == gens[1].training_phase_rates and 0 < gens[1].phase_episodes <= cfg.ppo.num_envs
    assert all(s.hider_sigma < 25 / 3 and s.seeker_sigma < 25 / 3 for s in gens)  # every generation rated
    assert {m[:2] for m in league.matches if 1 in m[:2]} >= {(1, 1)}  # generation 1's self-play games
    again = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, tiny("every2"))  # the saved config wins
    assert again.cfg.eval_every == 2 and [asdict(s) for s in again.generations] == [asdict(s) for s in gens]


def test_a_version_3_state_resumes_with_its_loop_and_its_ramp_gate(redis_url: str, tmp_path: Path) -> None:
    """A state written before ``eval_every`` and ``ramp_use_gate`` (version 3: its summaries lack
    the new fields) resumes evaluating every generation and gating the ramp stage on forts alone."""
    torch.set_num_threads(1)
    league = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, tiny("v3"))
    league.run(5.0, max_generations=2)
    path = tmp_path / "leagues" / "v3" / STATE_FILE
    saved = json.loads(path.read_text())
    for key in ("eval_every", "ramp_use_gate", "exploiter_margin", "exploiter_patience"):
        del saved["config"][key]
    for key in ("core_backend", "batched_values", "exploiters", "exploiter_share"):
        del saved["config"]["ppo"][key]
    for s in saved["generations"]:
        for key in ("evaluated", "phase_episodes", "training_phase_rates", "exploiters"):
            del s[key]
    for key in ("exploiters", "exploiter_snapshots"):
        del saved[key]
    path.write_text(json.dumps({**saved, "version": 3}))
    again = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, tiny("v3"))
    assert again.resumed and again.trainer.updates == league.trainer.updates
    assert again.cfg.eval_every == 1 and not again.rule.ramp_use_gate and again.cfg.ppo.core_backend == "compiled"
    again.run(5.0, max_generations=3)
    assert [s.evaluated for s in again.generations] == [True, True, True]
    assert json.loads(path.read_text())["version"] == STATE_VERSION


def exploiting(name: str, **rule) -> HideAndSeekLeagueConfig:
    """:func:`tiny` with one exploiter per role (4 of the 32 envs each, after the past opponents' 6)."""
    cfg = replace(tiny(name), **rule)
    cfg.ppo = replace(cfg.ppo, exploiters=1, exploiter_share=0.25)
    return cfg


def test_exploiters_that_win_join_the_pools_and_the_mains_meet_them(redis_url: str, tmp_path: Path) -> None:
    """``exploiter_margin=-1``: every generation counts as a win, so each exploiter is frozen into its
    role's pool after every generation; PFSP then draws the frozen ones for the mains, the
    timeline shows them apart, and a resumed league has them all back."""
    torch.set_num_threads(1)
    league = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, exploiting("x-win", exploiter_margin=-1.0))
    assert league.trainer.exploiter_rows == {"hider": [slice(6, 10)], "seeker": [slice(10, 14)]}
    league.run(5.0, max_generations=3)
    episodes = league.trainer.last_episodes
    assert not episodes.self_play()[6:14].any() and episodes.self_play()[14:].all()
    for g in league.generations[1:]:
        assert [(e["role"], e["snapshot"], e["reset"]) for e in g.exploiters] == [
            ("hider", f"x{g.generation - 1}", False), ("seeker", f"x{g.generation - 1}", False)]
        assert all(0.0 <= e["score"] <= 1.0 for e in g.exploiters)
    for role in ("hider", "seeker"):
        assert len(league.exploiter_shas[role]) == 2 and len(league.trainer.exploiter_snapshots[role]) == 2
        members = set(league.pool.list(league.pools[role]))
        assert members == {getattr(s, f"{role}_sha256") for s in league.generations} | set(league.exploiter_shas[role])
        picks = {league.role_pools.pick(role, 3, league.exploiters.snapshot_keys(role)) for _ in range(200)}
        assert picks == {0, 1, 2, "x0", "x1"}
        frozen = league.trainer.frozen_actor("x1", role)
        snapshot = league.trainer.exploiter_snapshots[role][1]
        assert all(torch.equal(v, frozen.state_dict()[k]) for k, v in snapshot.items())
    roles = ("hider", "seeker")
    assert league.exploiters.summary() == {r: {"exploiters": 1, "snapshots": 2, "resets": 0} for r in roles}

    again = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path, exploiting("x-win", exploiter_margin=-1.0))
    assert again.resumed and again.exploiters.to_json() == league.exploiters.to_json()
    for role in ("hider", "seeker"):
        mine, theirs = again.trainer.exploiters[role][0], league.trainer.exploiters[role][0]
        assert all(torch.equal(a, b) for a, b in zip(mine.parameters(), theirs.parameters(), strict=True))
        for mine, theirs in zip(again.trainer.exploiter_snapshots[role], league.trainer.exploiter_snapshots[role]):
            assert all(torch.equal(mine[k], theirs[k]) for k in mine)
    again.run(5.0, max_generations=4)
    assert again.exploiters.summary()["hider"]["snapshots"] == 3


def test_an_exploiter_that_stops_winning_starts_again_from_the_main(redis_url: str, tmp_path: Path) -> None:
    """No edge passes ``exploiter_margin=1`` and ``exploiter_patience`` is 1: after every
    generation each exploiter is reset to its main's weights (actor and critic), never frozen.
    Between two resets it learns on its own envs, away from the main."""
    torch.set_num_threads(1)
    league = HideAndSeekLeague(make_pool(redis_url, tmp_path), tmp_path,
                               exploiting("x-reset", exploiter_margin=1.0, exploiter_patience=1))
    league.run(5.0, max_generations=2)
    assert [(e["snapshot"], e["reset"]) for e in league.generations[1].exploiters] == [(None, True), (None, True)]
    trainer = league.trainer
    for role in ("hider", "seeker"):
        main, exploiter = trainer.models[role].state_dict(), trainer.exploiters[role][0].state_dict()
        assert all(torch.equal(main[k], exploiter[k]) for k in main)
    trainer.update()
    for role in ("hider", "seeker"):
        main, exploiter = trainer.models[role].state_dict(), trainer.exploiters[role][0].state_dict()
        assert not all(torch.equal(main[k], exploiter[k]) for k in main)
    assert league.exploiters.summary()["seeker"] == {"exploiters": 1, "snapshots": 0, "resets": 1}
