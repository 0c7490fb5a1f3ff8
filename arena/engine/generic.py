"""The match loop for any registered PettingZoo env (AEC or parallel).

Many env instances run side by side. Each round, every match that awaits a decision
contributes its pending observations; observations are grouped by the policy (and
team) that drives the seat and answered by one ``act`` per group. Envs are then
stepped through an env set (:mod:`arena.engine.envpool`), in this process or sharded
over worker processes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from agents.policy import MatchRng, Policy
from arena.engine.envpool import InlineEnvs, Pending, ProcessEnvs
from arena.engine.guard import ILLEGAL, OK, PolicyCaller
from arena.engine.records import TERMINATIONS, MatchJob, MatchRecord, Termination, forfeit_scores
from envs.spec import EnvSpec


@dataclass
class _Live:
    """One running match (the env itself lives in the env set, at ``slot``)."""

    job: MatchJob
    slot: int
    scores: np.ndarray
    pending: Pending = field(default_factory=dict)
    decided: dict[int, int] = field(default_factory=dict)
    actions: list[tuple[int, int]] = field(default_factory=list)
    done: bool = False
    termination: Termination = Termination.NORMAL
    forfeit_seat: int | None = None
    detail: str = ""


def play_generic_matches(
    spec: EnvSpec,
    jobs: list[MatchJob],
    policies: dict[str, Policy],
    caller: PolicyCaller,
    envs: InlineEnvs | ProcessEnvs,
) -> list[MatchRecord]:
    """Play ``jobs`` through real PettingZoo env instances, batching policy calls."""
    matches = [_Live(job=job, slot=i, scores=np.zeros(spec.num_seats)) for i, job in enumerate(jobs)]
    firsts = envs.reset(spec.env_id, [(m.slot, m.job.seed) for m in matches])
    for m, pending in zip(matches, firsts):
        m.pending = pending
    while True:
        live = [m for m in matches if not m.done]
        if not live:
            break
        _decide(spec, live, policies, caller)
        stepping = [m for m in live if not m.done]
        outs = envs.step(spec.env_id, [(m.slot, m.decided) for m in stepping])
        for m, out in zip(stepping, outs):
            _advance(spec, m, out)
    return [_record(spec, m, policies) for m in matches]


def _decide(spec: EnvSpec, live: list[_Live], policies, caller: PolicyCaller) -> None:
    """Answer every pending decision, one ``act`` per (agent, team)."""
    team_of = spec.seat_team
    # Key by (agent, team): one agent may play several roles whose observations differ.
    groups: dict[tuple[str, int], list[tuple[_Live, int]]] = {}
    for m in live:
        m.decided = {}
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
                m.decided[seat] = a


def _advance(spec: EnvSpec, m: _Live, out) -> None:
    """Book one env step: actions in seat order, rewards, next decisions, limits."""
    m.actions.extend(sorted(m.decided.items()))
    m.scores += out.rewards
    m.pending = out.pending
    if out.finished:
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
