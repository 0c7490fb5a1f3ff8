"""The match engine: forfeits for every kind of misbehaviour, reproducibility, replay."""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
import pytest

from agents.catalog import make_policy
from agents.policy import MatchRng, derive_seed
from arena.engine import MatchJob, make_vector_core, play_matches
from arena.engine.board import play_board_matches
from arena.engine.guard import ILLEGAL, ActResult, PolicyCaller
from arena.engine.plan import plan_matches
from arena.engine.records import MatchRecord
from arena.engine.replay import replay_record
from envs.registry import get_spec, register_env
from envs.spec import EnvSpec


class Misbehaving:
    """A policy that plays randomly except on rows where ``trigger`` fires."""

    weights_hash = None

    def __init__(self, agent_id: str, mode: str, every: int = 1) -> None:
        self.agent_id, self.mode, self.every = agent_id, mode, every
        self.calls = 0

    def act(self, obs, mask, rng: MatchRng):
        self.calls += 1
        actions = rng.choice(mask).astype(np.float64)
        flat = np.asarray(obs, dtype=np.float64).reshape(len(mask), -1)
        # A position-dependent trigger: some boards in a batch fire, others do not.
        score = np.floor(np.abs(flat @ np.arange(1, flat.shape[1] + 1)))
        bad = score % self.every == 0
        if self.mode == "raise" and bad.any():
            raise RuntimeError("policy crashed")
        if self.mode == "nan":
            actions[bad] = np.nan
        if self.mode == "illegal":
            actions[bad] = np.where(mask[bad], -1, np.arange(mask.shape[1])).max(axis=1)
        if self.mode == "out_of_range":
            actions[bad] = mask.shape[1] + 3
        if self.mode == "wrong_shape":
            return actions[:-1] if len(actions) > 1 else np.zeros(3)
        if self.mode == "sleep" and bad.any():
            time.sleep(0.3)
        return actions


def _play(env_id: str, bad: Misbehaving, n: int = 200, budget: float | None = 5.0):
    good = make_policy("random", env_id)
    policies = {bad.agent_id: bad, good.agent_id: good}
    jobs = plan_matches([bad.agent_id, good.agent_id], get_spec(env_id), n, seed=3)
    return play_matches(env_id, jobs, policies, time_budget_s=budget)


@pytest.mark.parametrize("env_id", ["connect_four-v3", "rps-v2", "simple_tag-v3"])
@pytest.mark.parametrize(
    ("mode", "termination"),
    [
        ("raise", "error"),
        ("nan", "invalid_output"),
        ("wrong_shape", "invalid_output"),
        ("illegal", "illegal_action"),
        ("out_of_range", "illegal_action"),
    ],
)
def test_misbehaviour_is_a_forfeit_and_the_engine_keeps_going(env_id, mode, termination):
    n = 40 if env_id == "simple_tag-v3" else 200
    if mode == "illegal" and env_id != "connect_four-v3":
        pytest.skip("every action is legal in this env; out_of_range covers it")
    records = _play(env_id, Misbehaving("bad", mode), n=n)
    assert len(records) == n
    spec = get_spec(env_id)
    forfeits = [r for r in records if r.termination == termination]
    assert forfeits, f"no {termination} forfeit happened"
    for r in forfeits:
        assert r.seats[r.forfeit_seat] == "bad"
        bad_team = spec.seat_team[r.forfeit_seat]
        assert r.winner == 1 - bad_team
        assert r.detail
        assert replay_record(r).ok
    others = Counter(r.termination for r in records if r.termination != termination)
    assert set(others) <= {"normal"}


def test_raising_on_some_rows_forfeits_only_those_matches():
    bad = Misbehaving("bad", "raise", every=17)
    records = _play("connect_four-v3", bad, n=300)
    terms = Counter(r.termination for r in records)
    assert terms["error"] > 0 and terms["normal"] > 0
    # Played alone, each match ends the same way as inside the batch.
    for r in records[:30]:
        alone = play_matches("connect_four-v3", [MatchJob(r.seed, tuple(r.seats))],
                             {"bad": bad, "random": make_policy("random", "connect_four-v3")})[0]
        assert (alone.actions, alone.termination, alone.winner) == (r.actions, r.termination, r.winner)


def test_timeout_forfeits_and_later_calls_still_work():
    bad = Misbehaving("bad", "sleep", every=1)
    records = _play("tictactoe-v3", bad, n=20, budget=0.05)
    assert Counter(r.termination for r in records) == {"timeout": 20}
    # The engine is usable right after abandoning the slow call.
    fine = _play("tictactoe-v3", Misbehaving("bad", "none"), n=20, budget=0.5)
    assert all(r.termination == "normal" for r in fine)


def test_step_limit_ends_long_matches():
    spec = get_spec("rps-v2")
    short = EnvSpec(**{**spec.__dict__, "env_id": "rps_short-v0", "step_limit": 6})
    register_env("rps_short-v0", "pettingzoo.classic.rps_v2:env", short)
    records = _play("rps_short-v0", Misbehaving("bad", "none"), n=10)
    assert all(r.termination == "step_limit" and len(r.actions) == 6 for r in records)
    assert all(replay_record(r).ok for r in records)


@pytest.mark.parametrize("env_id", ["connect_four-v3", "tictactoe-v3", "rps-v2", "simple_tag-v3"])
def test_same_seed_same_records_and_batch_independent(env_id):
    names = ["heuristic", "random"] if "v3" in env_id and "tag" not in env_id else ["random", "random"]
    spec = get_spec(env_id)
    policies = {n: make_policy(n, env_id) for n in set(names)}
    n = 30 if env_id == "simple_tag-v3" else 300
    jobs = plan_matches(names, spec, n, seed=11)
    a = play_matches(env_id, jobs, policies)
    b = play_matches(env_id, plan_matches(names, spec, n, seed=11), policies)
    key = lambda r: (r.seed, r.seats, r.actions, r.scores, r.winner, r.termination)
    assert [key(r) for r in a] == [key(r) for r in b]
    # Split into odd-sized batches: identical matches.
    c = play_matches(env_id, jobs[:7], policies) + play_matches(env_id, jobs[7:], policies)
    assert [key(r) for r in a] == [key(r) for r in c]
    # A different master seed gives different games.
    d = play_matches(env_id, plan_matches(names, spec, n, seed=12), policies)
    assert [r.actions for r in a] != [r.actions for r in d]


def test_vectorized_and_pettingzoo_paths_agree():
    env_id = "connect_four-v3"
    policies = {n: make_policy(n, env_id) for n in ("heuristic:epsilon=0.3", "random")}
    jobs = plan_matches(list(policies), get_spec(env_id), 200, seed=5)
    fast = play_matches(env_id, jobs, policies)
    slow = play_matches(env_id, jobs, policies, vectorized=False)
    assert [(r.actions, r.scores, r.winner) for r in fast] == [(r.actions, r.scores, r.winner) for r in slow]


def test_replay_reproduces_1000_matches_and_catches_tampering():
    env_id = "connect_four-v3"
    policies = {n: make_policy(n, env_id) for n in ("heuristic", "heuristic:epsilon=0.5", "random")}
    records = play_matches(env_id, plan_matches(list(policies), get_spec(env_id), 1000, seed=7), policies)
    assert sum(replay_record(r).ok for r in records) == 1000
    tampered = MatchRecord.from_json(records[0].to_json())
    tampered.winner = None if tampered.winner is not None else 0
    assert not replay_record(tampered).ok
    cut = MatchRecord.from_json(records[1].to_json())
    cut.actions = cut.actions[:-1]
    assert not replay_record(cut).ok


def test_derived_seeds_are_distinct_and_json_safe():
    seeds = derive_seed(7, np.arange(100_000))
    assert len(set(seeds.tolist())) == 100_000
    assert seeds.min() >= 0 and seeds.max() < 2**63
    assert derive_seed(7, 5) == int(seeds[5])


def test_env_worker_processes_play_the_same_matches():
    from arena.engine import MatchEngine

    env_id = "simple_tag-v3"
    policies = {"random": make_policy("random", env_id)}
    jobs = plan_matches(["random", "random"], get_spec(env_id), 12, seed=4)
    inline = play_matches(env_id, jobs, policies)
    with MatchEngine(env_workers=2) as engine:
        sharded = engine.play(env_id, jobs, policies)
        again = engine.play(env_id, jobs, policies)  # reused env instances reset cleanly
    key = lambda r: (r.actions, r.scores, r.winner)
    assert [key(r) for r in inline] == [key(r) for r in sharded] == [key(r) for r in again]


class OverTheWire:
    """Answers like a connected agent: ``submit`` sends the rows, the returned function
    answers them later (here: a heuristic's moves, or an illegal one on some rows)."""

    weights_hash = None
    answers_rows = True

    def __init__(self, agent_id: str, env_id: str) -> None:
        self.agent_id, self.inner = agent_id, make_policy("heuristic:epsilon=0.3", env_id)
        self.requests = 0

    def act(self, obs, mask, rng):
        return self.submit(obs, mask, rng)()

    def submit(self, obs, mask, rng):
        self.requests += 1
        actions = np.asarray(self.inner.act(obs, mask, rng), dtype=np.int64)
        codes = np.zeros(len(mask), dtype=np.int8)
        illegal = (rng.seeds % 37 == 0) & (np.asarray(rng.plies) == 5)
        codes[illegal] = ILLEGAL

        def finish():
            return ActResult(actions, codes, "illegal on purpose" if illegal.any() else "")

        return finish


def test_an_over_the_wire_agent_is_asked_every_other_tick_and_no_match_changes():
    """Its matches as the second seat start a tick late, so its moves in all its matches fall
    on the same ticks: half the round trips, the same records (forfeits included)."""
    env_id = "connect_four-v3"
    spec = get_spec(env_id)
    key = lambda r: (r.seed, r.seats, r.actions, r.scores, r.winner, r.termination, r.forfeit_seat, r.detail)
    played = {}
    for align in (False, True):
        wire = OverTheWire("wire", env_id)
        policies = {"wire": wire, "random": make_policy("random", env_id)}
        jobs = plan_matches(["wire", "random"], spec, 200, seed=5)
        records = play_board_matches(spec, make_vector_core(env_id), jobs, policies, PolicyCaller(),
                                     align_wire=align)
        played[align] = ([key(r) for r in records], wire.requests, max(len(r.actions) for r in records))
    assert {tuple(r[1]) for r in played[False][0]} == {("wire", "random"), ("random", "wire")}
    assert any(k[5] == "illegal_action" for k in played[False][0])
    assert played[True][0] == played[False][0]
    (_, unaligned, longest), (_, aligned, _) = played[False], played[True]
    assert aligned <= longest // 2 + 1  # every other tick
    assert aligned <= 0.6 * unaligned, (aligned, unaligned)  # in step: at nearly every ply
