"""hide_and_seek-v1 matches played by the engine replay bit-exactly through the plain env,
and a replay tells which phases happened in the match (the env's final ``phases``)."""

from __future__ import annotations

from dataclasses import replace

from agents.catalog import make_policy
from agents.checkpoint import load_checkpoint_bytes, serialize_weights
from agents.neural import NeuralPolicy, random_init_checkpoint
from arena.engine import play_matches
from arena.engine.plan import plan_matches
from arena.engine.replay import replay_record
from envs.hide_and_seek.rules import PHASES
from envs.registry import get_spec, make_env

ENV = "hide_and_seek-v1"


def test_v1_matches_replay_and_report_their_phases() -> None:
    state, spec = random_init_checkpoint(ENV, "mlp", {"hidden": [16]}, seed=2, role="hider")
    weights = serialize_weights(state)
    net = NeuralPolicy(load_checkpoint_bytes(weights, spec.to_json()))
    rnd = make_policy("random", ENV)
    policies = {rnd.agent_id: rnd, net.agent_id: net}
    jobs = plan_matches([rnd.agent_id, net.agent_id], get_spec(ENV), 4, seed=5)
    records = play_matches(ENV, jobs, policies)
    assert len(records) == 4 and all(r.termination == "normal" for r in records)
    assert all(len(r.actions) == 4 * 50 for r in records)
    seen = []
    for record in records:
        env = make_env(ENV)
        result = replay_record(record, env)
        assert result.ok, result.reason
        phases = env.phases()
        assert set(phases) == set(PHASES) and 0.0 <= phases["chasing"] <= 1.0
        seen.append(phases["chasing"])
    assert len(set(seen)) > 1  # the matches differ
    bad = replace(records[0], actions=[(s, (act + 1) % 7) for s, act in records[0].actions])
    assert not replay_record(bad).ok
