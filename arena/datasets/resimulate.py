"""Re-simulating recorded matches into per-seat transitions: observations, masks, actions, rewards.

A match record holds the seed and the actions; what every seat saw is re-simulated:

* built-in board games (a vectorized core): every match of a chunk at once, one ply per
  iteration over all boards still running, as numpy arrays (:func:`resimulate_boards`);
* every other env: through the registered PettingZoo env driven like the match engine
  drives it (the engine's ``reset_env``/``step_env``), one match after another
  (:func:`resimulate_matches`).

Every match is checked on the way (turn order, legality, the recorded ending and, for
games that end normally, the winner or scores), as ``arena replay`` does; a match that
does not re-simulate to its record is left out and counted.

Rewards: a row's reward is what its seat received from that decision until its next
one; every seat's rewards sum to its recorded score (forfeits included: the offender's
last row carries -1, everyone else's +1). Board games pay only at each seat's last row.
``terminated`` marks each seat's last row when the match ended by the rules or a forfeit,
``truncated`` when Arena's step limit ended it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arena.datasets.log import LogChunk
from arena.engine.envpool import reset_env, step_env
from envs.adapters import direct
from envs.board_core import BoardCore
from envs.registry import flat_obs, make_env
from envs.spec import EnvSpec

NORMAL, STEP_LIMIT, ILLEGAL = "normal", "step_limit", "illegal_action"


@dataclass
class Steps:
    """The decisions of the kept seats of a chunk's valid matches, in (match, step) order.

    Attributes:
        match: ``(T,)`` index of the row's match in its chunk.
        step: ``(T,)`` index of the row's action in the match record.
        seat: ``(T,)`` the deciding seat.
        obs: ``(T, *obs_shape)`` what the seat observed.
        mask: ``(T, num_actions)`` its legal actions.
        action: ``(T,)`` the recorded action.
        legal: ``(T,)`` False only for a recorded illegal final action.
        reward: ``(T,)`` float32 (module docstring).
        terminated: ``(T,)`` the seat's last row of a match that ended by the rules or a forfeit.
        truncated: ``(T,)`` the seat's last row of a match Arena's step limit ended.
        final_obs: ``(n, seats, *obs_shape)`` each seat's observation after the end (parallel
            envs: its last observation, as their envs give none after the end).
        valid: ``(n,)`` the match had moves and re-simulated to its record.
        invalid_reason: Why each left-out match was left out (``""`` for valid ones).
    """

    match: np.ndarray
    step: np.ndarray
    seat: np.ndarray
    obs: np.ndarray
    mask: np.ndarray
    action: np.ndarray
    legal: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray
    valid: np.ndarray
    invalid_reason: list[str]

    def __len__(self) -> int:
        return len(self.match)

    @classmethod
    def empty(cls, obs_shape: tuple[int, ...], obs_dtype: np.dtype, num_actions: int) -> Steps:
        """No rows (an export of a board without matches still writes its tables)."""
        none = np.zeros(0, dtype=np.int64)
        flags = np.zeros(0, dtype=bool)
        return cls(none, none, none, np.zeros((0, *obs_shape), obs_dtype), np.zeros((0, num_actions), bool),
                   none, flags, np.zeros(0, np.float32), flags, flags, np.zeros((0, 1, *obs_shape), obs_dtype),
                   flags, [])


def _seat_ends(chunk: LogChunk, match: np.ndarray, seat: np.ndarray, num_seats: int,
               reward: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Put every seat's remaining score on its last row; mark those rows terminated or truncated.

    ``match``/``seat``/``reward`` are every row of the chunk's matches in (match, step) order.
    """
    key = match * num_seats + seat
    owners, first_from_end = np.unique(key[::-1], return_index=True)
    rows = len(key) - 1 - first_from_end  # each (match, seat)'s last row
    got = np.bincount(key, weights=reward, minlength=len(chunk) * num_seats)
    reward[rows] += (chunk.scores.reshape(-1)[owners] - got[owners]).astype(np.float32)
    limit = np.asarray(chunk.columns.termination, dtype=object)[match[rows]] == STEP_LIMIT
    terminated = np.zeros(len(match), dtype=bool)
    truncated = np.zeros(len(match), dtype=bool)
    terminated[rows[~limit]] = True
    truncated[rows[limit]] = True
    return terminated, truncated


def _kept(rows: np.ndarray, **columns: np.ndarray) -> dict[str, np.ndarray]:
    """The ``rows`` (a bool mask or indices) of every column; no copy when the mask keeps them all."""
    if rows.dtype == bool and rows.all():
        return columns
    return {name: values[rows] for name, values in columns.items()}


def resimulate_boards(spec: EnvSpec, core: BoardCore, chunk: LogChunk, keep_seats: np.ndarray) -> Steps:
    """Re-simulate a chunk of two-player board matches with the vectorized core, all at once.

    One pass over the plies places every match's pieces (the core's ``legal_mask`` and
    ``target_cells`` on all boards still playing) and notes when each cell was filled.
    Pieces never move, so every row's board before its move follows from those times,
    and the core observes all rows in one call; the winning lines of the final boards,
    ordered by when they were completed, give each match's end and winner.

    Args:
        spec: The env.
        core: Its vectorized core.
        chunk: The matches.
        keep_seats: ``(seats,)`` bool, which seats' rows to return (a role's seats).
    """
    n, lengths, starts = len(chunk), chunk.lengths, chunk.starts
    match = np.repeat(np.arange(n), lengths)
    step = np.arange(int(lengths.sum())) - starts[match]
    seat = chunk.seats.astype(np.int64)
    out_of_turn = np.zeros(n, dtype=bool)
    out_of_turn[match[seat != step % 2]] = True  # board games alternate 0, 1, 0, ...
    batch, filled_at, legal = _place_all(core, chunk)
    cells = batch.cells.reshape(n, -1)[match]
    cells *= filled_at[match] < step[:, None].astype(np.int16)  # every row's board before its move
    rows = core.new_batch(0)
    rows.cells, rows.to_move, rows.plies = cells.reshape(-1, *core.shape), (step % 2).astype(np.int8), step
    obs, mask = core.observe(rows, np.arange(len(step)))
    ended_at, winner = _line_ends(core, batch.cells.reshape(n, -1), filled_at)
    valid = lengths > 0
    full = (filled_at < _NEVER).all(axis=1)
    reasons = _board_verdicts(spec, chunk, legal, match, step, valid, out_of_turn, ended_at, winner, full)
    reward = np.zeros(len(step), dtype=np.float32)
    terminated, truncated = _seat_ends(chunk, match, seat, spec.num_seats, reward)
    me = np.arange(spec.num_seats, dtype=np.int8)[None, :, None, None] + 1
    final_cells = batch.cells[:, None]
    final = np.stack([final_cells == me, final_cells == 3 - me], axis=-1).astype(np.int8)
    fields = _kept(valid[match] & keep_seats[seat], match=match, step=step, seat=seat, obs=obs, mask=mask,
                   action=chunk.actions, legal=legal, reward=reward, terminated=terminated, truncated=truncated)
    return Steps(**fields, final_obs=final, valid=valid, invalid_reason=reasons)


_NEVER = np.iinfo(np.int16).max  # "never filled" (boards have fewer plies)


def _place_all(core: BoardCore, chunk: LogChunk):
    """Play every legal recorded move; return the final boards, each cell's fill ply and each move's legality."""
    n, lengths, starts, actions = len(chunk), chunk.lengths, chunk.starts, chunk.actions
    batch = core.new_batch(n)
    flat = batch.cells.reshape(n, -1)
    filled_at = np.full(flat.shape, _NEVER, dtype=np.int16)
    legal = np.ones(len(actions), dtype=bool)
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths[order]
    for ply in range(int(lengths.max(initial=0))):
        rows = order[: int(np.count_nonzero(sorted_lengths > ply))]
        idx = starts[rows] + ply
        a = actions[idx]
        ok = np.flatnonzero((a >= 0) & (a < core.num_actions))
        ok = ok[core.legal_mask(batch, rows[ok])[np.arange(ok.size), a[ok]]]
        legal[idx] = False
        legal[idx[ok]] = True
        moved = rows[ok]
        target = core.target_cells(batch, moved, a[ok])
        flat[moved, target] = ply % 2 + 1
        filled_at[moved, target] = ply
    return batch, filled_at, legal


def _line_ends(core: BoardCore, cells: np.ndarray, filled_at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per final board, the ply that first completed a line (``_NEVER``: none) and its owner seat (-1: none)."""
    lines = np.unique(np.sort(core.windows_through.reshape(-1, core.windows_through.shape[-1]), axis=1), axis=0)
    owners = cells[:, lines]  # (n, lines, length)
    complete = (owners == owners[..., :1]).all(-1) & (owners[..., 0] > 0)
    when = np.where(complete, filled_at[:, lines].max(-1), _NEVER)
    first = when.argmin(-1)
    ended_at = when[np.arange(len(cells)), first]
    winner = np.where(ended_at < _NEVER, owners[np.arange(len(cells)), first, 0].astype(np.int64) - 1, -1)
    return ended_at, winner


def _board_verdicts(spec: EnvSpec, chunk: LogChunk, legal: np.ndarray, match: np.ndarray, step: np.ndarray,
                    valid: np.ndarray, out_of_turn: np.ndarray, ended_at: np.ndarray, winner: np.ndarray,
                    full: np.ndarray) -> list[str]:
    """Check each match's re-simulation against its record; clear ``valid`` where it differs."""
    term = np.asarray(chunk.columns.termination, dtype=object)
    recorded = np.array([-1 if w is None else w for w in chunk.columns.winner], dtype=np.int64)
    lengths = chunk.lengths
    last = step == lengths[match] - 1
    moved_badly = out_of_turn.copy()
    moved_badly[match[~legal & ~(last & (term[match] == ILLEGAL))]] = True
    moved_badly[match[step > ended_at[match]]] = True  # a move after a line was completed
    over = (ended_at < _NEVER) | full
    wrong = np.where(term == NORMAL, ~over | (winner != recorded),
                     np.where(term == STEP_LIMIT, over | (lengths < spec.step_limit), over))
    reasons = ["" if v else "no moves kept" for v in valid.tolist()]
    for i in np.flatnonzero(valid & (moved_badly | wrong)).tolist():
        reasons[i] = ("an illegal or out-of-turn move" if moved_badly[i]
                      else f"the re-simulated end differs from {term[i]}")
        valid[i] = False
    return reasons


def resimulate_matches(spec: EnvSpec, chunk: LogChunk, keep_seats: np.ndarray, obs_shape: tuple[int, ...],
                       obs_dtype: np.dtype) -> Steps:
    """Re-simulate a chunk of any env's matches through its PettingZoo env, one match after another.

    Args:
        spec: The env.
        chunk: The matches.
        keep_seats: ``(seats,)`` bool, which seats' rows to return.
        obs_shape: The kept seats' observation shape (one shape for all of them).
        obs_dtype: Their observation dtype.
    """
    env = direct(make_env(spec.env_id))
    rows: dict[str, list] = {k: [] for k in _ROW_FIELDS}
    n = len(chunk)
    final = np.zeros((n, spec.num_seats, *obs_shape), dtype=obs_dtype)
    valid = chunk.lengths > 0
    reasons = ["" if v else "no moves kept" for v in valid.tolist()]
    try:
        for i in np.flatnonzero(valid).tolist():
            try:
                match_rows = _replay_one(spec, env, chunk, i, final[i], keep_seats)
            except _Mismatch as exc:
                valid[i], reasons[i] = False, str(exc)
                continue
            for key, values in match_rows.items():
                rows[key].extend(values)
    finally:
        env.close()
    match = np.asarray(rows["match"], dtype=np.int64)
    seat = np.asarray(rows["seat"], dtype=np.int64)
    reward = np.asarray(rows["reward"], dtype=np.float32)
    terminated, truncated = _seat_ends(chunk, match, seat, spec.num_seats, reward)
    keep = np.flatnonzero(keep_seats[seat]) if len(seat) else np.zeros(0, dtype=np.int64)
    obs = np.zeros((len(keep), *obs_shape), dtype=obs_dtype)
    mask = np.zeros((len(keep), spec.num_actions), dtype=bool)
    for k, r in enumerate(keep.tolist()):  # only kept seats: roles may observe different shapes
        obs[k] = np.reshape(rows["obs"][r], obs_shape)
        mask[k] = rows["mask"][r]
    fields = _kept(keep, match=match, step=np.asarray(rows["step"], dtype=np.int64), seat=seat,
                   action=np.asarray(rows["action"], dtype=np.int64), legal=np.asarray(rows["legal"], bool),
                   reward=reward, terminated=terminated, truncated=truncated)
    return Steps(**fields, obs=obs, mask=mask, final_obs=final, valid=valid, invalid_reason=reasons)


_ROW_FIELDS = ("match", "step", "seat", "obs", "mask", "action", "legal", "reward")


class _Mismatch(Exception):
    pass


def _replay_one(spec: EnvSpec, env, chunk: LogChunk, i: int, final: np.ndarray,
                keep_seats: np.ndarray) -> dict[str, list]:
    """Rows of match ``i`` (every seat); fills ``final`` with each kept seat's observation after the end."""
    start, length = int(chunk.starts[i]), int(chunk.lengths[i])
    seats = chunk.seats[start:start + length].tolist()
    actions = chunk.actions[start:start + length].tolist()
    termination = chunk.columns.termination[i]
    out: dict[str, list] = {k: [] for k in _ROW_FIELDS}
    last_row: dict[int, int] = {}
    scores = np.zeros(spec.num_seats)
    pending = reset_env(spec, env, chunk.columns.seed[i])
    j, finished = 0, False
    while j < length:
        if finished or not pending:
            raise _Mismatch(f"action {j} was played after the game ended")
        cycle = list(zip(seats[j:j + len(pending)], actions[j:j + len(pending)]))
        if sorted(s for s, _ in cycle) != sorted(pending):
            if j + len(cycle) < length or termination != ILLEGAL or cycle[-1][0] not in pending:
                raise _Mismatch(f"action {j}: seats {[s for s, _ in cycle]} moved, {sorted(pending)} were to move")
            cycle = cycle[-1:]  # the forfeit cut the cycle short: only the illegal move is recorded
        before = dict(last_row)
        for offset, (seat, action) in enumerate(cycle):
            obs, mask = pending[seat]
            legal = 0 <= action < spec.num_actions and bool(mask[action])
            if not legal and not (j + offset == length - 1 and termination == ILLEGAL):
                raise _Mismatch(f"action {j + offset} ({action}) is illegal")
            last_row[seat] = len(out["match"])
            for key, value in zip(out, (i, j + offset, seat, obs, mask, action, legal, 0.0)):
                out[key].append(value)
        if not all(out["legal"][-len(cycle):]):
            break
        banked = _banked(spec, env, cycle)
        result = step_env(spec, env, dict(cycle))
        _credit(out["reward"], last_row, result.rewards, banked, cycle, previous=before)
        scores += result.rewards
        pending, finished, j = result.pending, result.finished, j + len(cycle)
    _check_end(spec, chunk, i, finished, length, scores)
    for seat in np.flatnonzero(keep_seats).tolist():
        if spec.api == "aec":
            final[seat] = np.reshape(flat_obs(env.observe(spec.seats[seat])), final[seat].shape)
        elif seat in last_row:  # parallel envs give no observation after the end: the last one
            final[seat] = np.reshape(out["obs"][last_row[seat]], final[seat].shape)
    return out


def _banked(spec: EnvSpec, env, cycle) -> float:
    """AEC: the reward the acting seat collected since its previous decision (``step_env`` adds it now)."""
    if spec.api != "aec":
        return 0.0
    return float(env._cumulative_rewards.get(spec.seats[cycle[0][0]], 0.0))


def _credit(rewards: list, last_row: dict[int, int], step_rewards: list[float], banked: float, cycle,
            previous: dict[int, int]) -> None:
    """Book a step's rewards on the rows they belong to (see the module docstring)."""
    acting = cycle[0][0]
    if banked and previous.get(acting, -1) >= 0:
        rewards[previous[acting]] += banked
        step_rewards = list(step_rewards)
        step_rewards[acting] -= banked
    for seat, r in enumerate(step_rewards):
        if r and seat in last_row:
            rewards[last_row[seat]] += r


def _check_end(spec: EnvSpec, chunk: LogChunk, i: int, finished: bool, length: int, scores: np.ndarray) -> None:
    termination = chunk.columns.termination[i]
    if termination == NORMAL and not finished:
        raise _Mismatch("the record says the game ended normally but it was still running")
    if termination == STEP_LIMIT and (finished or length < spec.step_limit):
        raise _Mismatch("the record says step_limit but the game ended or the limit was not reached")
    if termination not in (NORMAL, STEP_LIMIT) and finished:
        raise _Mismatch(f"the record says {termination} but the game was already over")
    if termination in (NORMAL, STEP_LIMIT) and not np.allclose(scores, chunk.columns.scores[i]):
        raise _Mismatch(f"scores differ: re-simulated {scores.tolist()}, recorded {chunk.columns.scores[i]}")
