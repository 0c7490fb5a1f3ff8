"""The match loop for any registered PettingZoo env (AEC or parallel).

Many env instances run side by side. Each round, every env that awaits a decision
contributes its pending observations; observations are grouped by the policy that
drives the seat and answered by one ``act`` per policy. Envs are then stepped one
by one (they are ordinary Python objects), so the saving is in the policy calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.policy import MatchRng, Policy
from arena.engine.guard import ILLEGAL, OK, PolicyCaller
from arena.engine.records import TERMINATIONS, MatchJob, MatchRecord, Termination, forfeit_scores
from envs.adapters import direct
from envs.registry import flat_obs, make_env
from envs.spec import EnvSpec


@dataclass
class _Live:
    """One running match."""

    job: MatchJob
    env: Any
    scores: np.ndarray
    actions: list[tuple[int, int]] = field(default_factory=list)
    pending: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    done: bool = False
    termination: Termination = Termination.NORMAL
    forfeit_seat: int | None = None
    detail: str = ""


def action_mask(obs: Any, info: dict | None, num_actions: int) -> np.ndarray:
    """Legal-move mask from an ``action_mask`` in the observation or info, else all legal."""
    if isinstance(obs, dict) and "action_mask" in obs:
        return np.asarray(obs["action_mask"], dtype=bool)
    if info and "action_mask" in info:
        return np.asarray(info["action_mask"], dtype=bool)
    return np.ones(num_actions, dtype=bool)


def play_generic_matches(
    spec: EnvSpec,
    jobs: list[MatchJob],
    policies: dict[str, Policy],
    caller: PolicyCaller,
    envs: list[Any] | None = None,
) -> list[MatchRecord]:
    """Play ``jobs`` through real PettingZoo env instances, batching policy calls.

    Args:
        envs: Optional env instances to reuse (one per job, already passed through
            :func:`envs.adapters.direct` or not); created when omitted.
    """
    seat_of = {name: i for i, name in enumerate(spec.seats)}
    team_of = spec.seat_team
    matches = []
    for i, job in enumerate(jobs):
        env = envs[i] if envs is not None else direct(make_env(spec.env_id))
        matches.append(_Live(job=job, env=env, scores=np.zeros(spec.num_seats)))
        _reset(spec, matches[-1], seat_of)
    while True:
        live = [m for m in matches if not m.done]
        if not live:
            break
        _decide(spec, live, policies, caller, team_of)
        for m in live:
            if not m.done:
                _advance(spec, m, seat_of)
    return [_record(spec, m, policies) for m in matches]


def _reset(spec: EnvSpec, m: _Live, seat_of: dict[str, int]) -> None:
    seed = int(m.job.seed % (2**31))
    if spec.api == "parallel":
        obs, infos = m.env.reset(seed=seed)
        for name, o in obs.items():
            m.pending[seat_of[name]] = (flat_obs(o), action_mask(o, infos.get(name), spec.num_actions))
    else:
        m.env.reset(seed=seed)
        _collect_aec(spec, m, seat_of)


def _collect_aec(spec: EnvSpec, m: _Live, seat_of: dict[str, int]) -> None:
    name = m.env.agent_selection
    obs = m.env.observe(name)
    info = m.env.infos.get(name)
    m.pending = {seat_of[name]: (flat_obs(obs), action_mask(obs, info, spec.num_actions))}


def _decide(spec, live: list[_Live], policies, caller: PolicyCaller, team_of) -> None:
    """Answer every pending decision, one ``act`` per policy."""
    # Key by (agent, team): one agent may play several roles whose observations differ.
    groups: dict[tuple[str, int], list[tuple[_Live, int]]] = {}
    for m in live:
        for seat in m.pending:
            team = team_of[seat]
            groups.setdefault((m.job.agents[team], team), []).append((m, seat))
    for (agent_id, _), items in groups.items():
        obs = np.stack([m.pending[s][0] for m, s in items])
        mask = np.stack([m.pending[s][1] for m, s in items])
        seeds = np.array([m.job.seed for m, _ in items], dtype=np.int64)
        seats = np.array([s for _, s in items])
        plies = np.array([len(m.actions) for m, _ in items])
        res = caller.act(policies[agent_id], obs, mask, MatchRng(seeds, seats, plies))
        for (m, seat), a, code in zip(items, res.actions.tolist(), res.codes.tolist()):
            if m.done:  # an earlier seat of the same match already forfeited
                continue
            if code != OK:
                if code == ILLEGAL:
                    m.actions.append((seat, a))
                m.done, m.forfeit_seat, m.detail = True, seat, res.detail
                m.termination = TERMINATIONS[code]
            else:
                m.pending[seat] = (m.pending[seat][0], a)  # type: ignore[assignment]


def _advance(spec: EnvSpec, m: _Live, seat_of: dict[str, int]) -> None:
    """Step one env with its decided actions and collect what it asks next."""
    if spec.api == "parallel":
        acts = {spec.seats[s]: int(a) for s, (_, a) in sorted(m.pending.items())}
        m.actions.extend((seat_of[n], a) for n, a in acts.items())
        obs, rew, term, trunc, infos = m.env.step(acts)
        for name, r in rew.items():
            m.scores[seat_of[name]] += r
        m.pending = {
            seat_of[n]: (flat_obs(o), action_mask(o, infos.get(n), spec.num_actions))
            for n, o in obs.items()
            if not (term.get(n) or trunc.get(n))
        }
        finished = not m.pending or not m.env.agents
    else:
        (seat, (_, a)), = m.pending.items()
        m.actions.append((seat, int(a)))
        # AEC semantics: an agent's cumulative reward covers the time since it last
        # acted and is reset when it acts, so bank it just before the step.
        cumulative = m.env._cumulative_rewards
        m.scores[seat] += cumulative.get(spec.seats[seat], 0.0)
        m.env.step(int(a))
        finished = all(m.env.terminations[n] or m.env.truncations[n] for n in m.env.agents)
        if finished:
            for name, r in m.env._cumulative_rewards.items():
                m.scores[seat_of[name]] += r
        else:
            _collect_aec(spec, m, seat_of)
    if finished:
        m.done = True
    elif len(m.actions) >= spec.step_limit:
        m.done, m.termination = True, Termination.STEP_LIMIT


def _record(spec: EnvSpec, m: _Live, policies: dict[str, Policy]) -> MatchRecord:
    seat_agents = [m.job.agents[t] for t in spec.seat_team]
    if m.termination.is_forfeit:
        scores = forfeit_scores(spec.num_seats, spec.seat_team, m.forfeit_seat)
    else:
        scores = [float(x) for x in m.scores]
    winner = int(spec.winner(np.array(scores))[0])
    return MatchRecord(
        env=spec.env_id, seed=m.job.seed, seats=seat_agents,
        weights=[policies[a].weights_hash for a in seat_agents], actions=m.actions,
        scores=scores, winner=None if winner < 0 else winner, termination=m.termination.value,
        forfeit_seat=m.forfeit_seat, match_id=m.job.match_id, detail=m.detail,
    )
