"""Re-simulate match records through the reference PettingZoo env.

The engine plays built-in games on vectorized cores and drives other envs through
unwrapped adapters; replay deliberately uses the plain registered PettingZoo env
(with its wrappers) so it is an independent check of both: every recorded action is
applied in order, turn order and legality are checked, and the outcome (scores,
winner, termination) must come out identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from arena.engine.envpool import action_mask
from arena.engine.records import MatchRecord, Termination, forfeit_scores
from envs.registry import get_spec, make_env
from envs.spec import EnvSpec


@dataclass
class ReplayResult:
    """Outcome of re-simulating one record."""

    ok: bool
    reason: str = ""
    scores: list[float] | None = None
    winner: int | None = None


class _Mismatch(Exception):
    pass


def replay_record(record: MatchRecord, env: Any | None = None) -> ReplayResult:
    """Re-simulate ``record`` and compare the outcome with what it claims."""
    try:
        spec = get_spec(record.env)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return ReplayResult(False, str(exc))
    if len(record.seats) != spec.num_seats:
        return ReplayResult(False, f"record has {len(record.seats)} seats, {spec.env_id} has {spec.num_seats}")
    env = env if env is not None else make_env(spec.env_id)
    try:
        if spec.api == "parallel":
            over, scores = _replay_parallel(spec, record, env)
        else:
            over, scores = _replay_aec(spec, record, env)
        scores = _final_scores(spec, record, over, scores)
    except _Mismatch as exc:
        return ReplayResult(False, str(exc))
    win = int(spec.winner(np.array(scores))[0])
    winner = None if win < 0 else win
    if scores != [float(x) for x in record.scores]:
        return ReplayResult(False, f"scores differ: replay {scores}, record {record.scores}", scores, winner)
    if winner != record.winner:
        return ReplayResult(False, f"winner differs: replay {winner}, record {record.winner}", scores, winner)
    return ReplayResult(True, "", scores, winner)


def _final_scores(spec: EnvSpec, record: MatchRecord, over: bool, scores: np.ndarray) -> list[float]:
    term = Termination(record.termination)
    if term.is_forfeit:
        if over:
            raise _Mismatch(f"record says {term.value} but the game was already over")
        if record.forfeit_seat is None:
            raise _Mismatch(f"{term.value} record has no forfeit_seat")
        return forfeit_scores(spec.num_seats, spec.seat_team, record.forfeit_seat)
    if term is Termination.STEP_LIMIT:
        if over or len(record.actions) < spec.step_limit:
            raise _Mismatch("record says step_limit but the game ended or the limit was not reached")
    elif not over:
        raise _Mismatch("record says the game ended normally but it was still running")
    return [float(x) for x in scores]


def _check_illegal_last(record: MatchRecord, i: int, mask: np.ndarray, action: int) -> bool:
    """True if action ``i`` is the recorded illegal final move (and it is illegal)."""
    if record.termination != Termination.ILLEGAL_ACTION.value or i != len(record.actions) - 1:
        return False
    if 0 <= action < len(mask) and mask[action]:
        raise _Mismatch(f"recorded illegal action {action} is legal")
    return True


def _replay_aec(spec: EnvSpec, record: MatchRecord, env: Any) -> tuple[bool, np.ndarray]:
    env.reset(seed=int(record.seed % (2**31)))
    scores = np.zeros(spec.num_seats)
    over = False
    for i, (seat, action) in enumerate(record.actions):
        if over:
            raise _Mismatch(f"action {i} was played after the game ended")
        name = env.agent_selection
        if spec.seats[seat] != name:
            raise _Mismatch(f"action {i}: seat {seat} moved but it was {name}'s turn")
        mask = action_mask(env.observe(name), env.infos.get(name), spec.num_actions)
        if _check_illegal_last(record, i, mask, action):
            return False, scores
        if not mask[action]:
            raise _Mismatch(f"action {i} ({action}) is illegal")
        scores[seat] += env._cumulative_rewards.get(name, 0.0)
        env.step(action)
        over = all(env.terminations[n] or env.truncations[n] for n in env.agents)
        if over:
            for n, r in env._cumulative_rewards.items():
                scores[spec.seats.index(n)] += r
    return over, scores


def _replay_parallel(spec: EnvSpec, record: MatchRecord, env: Any) -> tuple[bool, np.ndarray]:
    obs, infos = env.reset(seed=int(record.seed % (2**31)))
    scores = np.zeros(spec.num_seats)
    i = 0
    actions = record.actions
    while i < len(actions):
        if not env.agents:
            raise _Mismatch(f"action {i} was played after the game ended")
        live = [spec.seats.index(n) for n in env.agents]
        cycle = actions[i : i + len(live)]
        seats = sorted(s for s, _ in cycle)
        if record.termination == Termination.ILLEGAL_ACTION.value and i + len(live) >= len(actions):
            seat, action = actions[-1]
            name = spec.seats[seat]
            mask = action_mask(obs[name], infos.get(name), spec.num_actions)
            if _check_illegal_last(record, len(actions) - 1, mask, action):
                return False, scores
        if seats != sorted(live):
            raise _Mismatch(f"cycle at action {i}: seats {seats} acted, live seats are {sorted(live)}")
        obs, rew, _, _, infos = env.step({spec.seats[s]: a for s, a in cycle})
        for n, r in rew.items():
            scores[spec.seats.index(n)] += r
        i += len(live)
    return not env.agents, scores
