"""The batched match loop for built-in board games (vectorized cores).

All matches of a call advance together, one ply per iteration (a *tick*). At each tick,
the rows whose mover is driven by the same policy are answered by one ``act`` call, so
a batch of 4,096 matches between two agents costs two forwards per ply.

An agent that answers over the wire (a connected agent) plays the first seat in some
matches and the second in others, so in step it would move at every tick: a round trip
per ply. Its matches as the second seat start one tick late instead, so its moves in all
its matches fall on the same ticks: one round trip every other tick, half as many. Each
row draws from its own match's random stream, so this changes no match.

At those ticks the engine waits out the round trip with nothing else to do. Splitting the
batch into two lanes ticking half a cycle apart (one lane's opponents played while the other
lane's request is on the wire) was measured and lost (issue 29, docs/connected.md): twice the
requests at half the rows each, and every policy called twice as often, cost the engine, the
API process and the client more CPU than the overlap saved on a 2-core machine.
"""

from __future__ import annotations

import numpy as np

from agents.policy import MatchRng, Policy
from arena.engine.guard import ILLEGAL, OK, PolicyCaller, answers_later
from arena.engine.records import (
    TERMINATION_CODE,
    TERMINATIONS,
    MatchJob,
    MatchRecord,
    Termination,
    forfeit_scores,
    gc_paused,
)
from envs.board_core import BoardCore
from envs.spec import EnvSpec

STEP_LIMIT = TERMINATION_CODE[Termination.STEP_LIMIT]
ALTERNATE = [0, 1] * 512  # seat of each ply in an alternating two-player game


def play_board_matches(
    spec: EnvSpec,
    core: BoardCore,
    jobs: list[MatchJob],
    policies: dict[str, Policy],
    caller: PolicyCaller,
    align_wire: bool = True,
) -> list[MatchRecord]:
    """Play ``jobs`` on a vectorized two-player core and return their records.

    ``align_wire``: start the matches where an over-the-wire agent plays the second seat one
    tick late (module docstring); the records are the same either way.
    """
    n = len(jobs)
    ids = sorted({a for job in jobs for a in job.agents})
    index = {a: i for i, a in enumerate(ids)}
    agent_idx = np.array([[index[a] for a in job.agents] for job in jobs], dtype=np.int64)
    start = _wire_starts(agent_idx, [policies[a] for a in ids]) if align_wire and n else np.zeros(n, np.int64)
    seeds = np.array([job.seed for job in jobs], dtype=np.int64)
    batch = core.new_batch(n)
    max_plies = spec.step_limit + 1
    actlog = np.full((n, max_plies), -1, dtype=np.int16)
    codes = np.full(n, TERMINATION_CODE[Termination.NORMAL], dtype=np.int8)
    forfeit_seat = np.full(n, -1, dtype=np.int8)
    live = np.ones(n, dtype=bool)
    details: dict[int, str] = {}

    tick = 0
    while live.any():
        rows = np.flatnonzero(live & (start <= tick))
        tick += 1
        if rows.size == 0:
            continue
        obs, mask = core.observe(batch, rows)
        seat = batch.to_move[rows]
        plies = batch.plies[rows]
        who = agent_idx[rows, seat]
        actions = np.empty(rows.size, dtype=np.int64)
        row_codes = np.empty(rows.size, dtype=np.int8)
        streams = MatchRng(seeds[rows], seat, plies)
        asked = []
        # Policies that answer over the wire go first: their round trips overlap the others' work.
        for p in sorted(np.unique(who).tolist(), key=lambda p: not hasattr(policies[ids[p]], "submit")):
            if len(ids) == 1:
                sel, rng = slice(None), streams
            else:
                sel = np.flatnonzero(who == p)
                rng = streams.subset(sel)
            asked.append((sel, caller.begin(policies[ids[p]], obs[sel], mask[sel], rng)))
        for sel, answer in asked:
            res = answer()
            actions[sel], row_codes[sel] = res.actions, res.codes
            if res.detail:
                bad = rows[sel][res.codes != OK]
                details.update(dict.fromkeys(bad.tolist(), res.detail))
        logged = (row_codes == OK) | (row_codes == ILLEGAL)
        actlog[rows[logged], plies[logged]] = actions[logged]
        ok = row_codes == OK
        bad = rows[~ok]
        codes[bad], forfeit_seat[bad], live[bad] = row_codes[~ok], seat[~ok], False
        good = rows[ok]
        finished = core.play(batch, good, actions[ok])
        live[good[finished]] = False
        over = good[~finished & (batch.plies[good] >= spec.step_limit)]
        codes[over], live[over] = STEP_LIMIT, False

    rewards = core.rewards(batch, np.arange(n))
    with gc_paused():
        return _records(spec, jobs, batch.winner, batch.plies, actlog, rewards, codes, forfeit_seat,
                        details, policies)


def _wire_starts(agent_idx: np.ndarray, policies: list[Policy]) -> np.ndarray:
    """``(n,)`` the tick each match starts at: 1 where the second seat is an over-the-wire
    agent and the first is not (its moves then fall on the same ticks as in the matches where
    it plays the first seat), else 0."""
    wire = np.array([answers_later(p) for p in policies])
    seat_wire = wire[agent_idx]
    return (seat_wire[:, 1] & ~seat_wire[:, 0]).astype(np.int64)


_TERM_VALUES = [t.value for t in TERMINATIONS]
_TERM_FORFEIT = [t.is_forfeit for t in TERMINATIONS]


def _records(spec, jobs, winner, plies, actlog, rewards, codes, forfeit_seat, details, policies):
    """Assemble :class:`MatchRecord` objects (the only per-match Python loop)."""
    seat_team = spec.seat_team
    weights = {a: policies[a].weights_hash for a in {a for j in jobs for a in j.agents}}
    n_logged = (plies + (codes == ILLEGAL)).tolist()
    actlog_l, rewards_l = actlog.tolist(), rewards.tolist()
    codes_l, winner_l, offender_l = codes.tolist(), winner.tolist(), forfeit_seat.tolist()
    out = []
    for i, job in enumerate(jobs):
        code = codes_l[i]
        n = n_logged[i]
        actions = list(zip(ALTERNATE[:n], actlog_l[i][:n]))
        if _TERM_FORFEIT[code]:
            offender = offender_l[i]
            scores = forfeit_scores(spec.num_seats, seat_team, offender)
            win = 1 - offender
        else:
            offender = None
            scores = rewards_l[i]
            win = winner_l[i] if winner_l[i] >= 0 else None
        agents = job.agents
        out.append(MatchRecord(
            env=spec.env_id, seed=job.seed, seats=list(agents),
            weights=[weights[a] for a in agents], actions=actions, scores=scores,
            winner=win, termination=_TERM_VALUES[code], forfeit_seat=offender,
            match_id=job.match_id, detail=details.get(i, "") if details else "",
        ))
    return out
