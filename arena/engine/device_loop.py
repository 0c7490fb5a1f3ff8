"""The device-resident match loop: two-player board matches played entirely on one device.

:func:`play_on_device` is the device twin of :func:`arena.engine.board.play_board_matches`:
all matches advance together, one ply per iteration, and the rows whose mover is driven
by the same policy are answered by one ``act_device`` call. Boards, observations,
masks, the random streams, sampling, legality checks, forfeits and the action log all
stay on the device; the results are tensors on it (:class:`DeviceResults`) and leave
it in bulk, when and as much as the caller decides.

Lockstep makes the bookkeeping host-free: every live match has played exactly ``ply``
moves at iteration ``ply``, so the seat to move is ``ply % 2`` for all of them, and
which policy answers which row is known on the host from the line-ups alone.

Finished matches are dropped from the working set every ``compact_every`` plies (the
one host synchronisation: how many are left). On a CPU that costs nothing and every
ply is compacted, so no forward is wasted on a finished board; on a GPU compacting
every few plies keeps the device busy while the host queues work.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

from agents.device_policies import DevicePolicy
from agents.device_rng import DeviceMatchRng
from arena.engine.records import TERMINATION_CODE, Termination
from envs.device.boards import TorchBoardCore, TorchBoards

OK = TERMINATION_CODE[Termination.NORMAL]
ILLEGAL = TERMINATION_CODE[Termination.ILLEGAL_ACTION]
ERROR = TERMINATION_CODE[Termination.ERROR]
INVALID = TERMINATION_CODE[Termination.INVALID_OUTPUT]
STEP_LIMIT = TERMINATION_CODE[Termination.STEP_LIMIT]

Groups = list[list[tuple[int, torch.Tensor | None]]]  # per seat: (policy, rows or None = all)


@dataclass
class DeviceResults:
    """Per-match outcomes of one batch, as tensors on the device.

    Attributes:
        winner: ``(n,)`` int64 winning seat on the board (``-1``: none; forfeits aside).
        plies: ``(n,)`` int64 legal moves played.
        codes: ``(n,)`` int8 termination code (:data:`arena.engine.records.TERMINATIONS`).
        forfeit_seat: ``(n,)`` int8 seat that forfeited, ``-1`` if none.
        actions: ``(n, max_plies)`` int16 action log, ``-1`` after the last logged move.
    """

    winner: torch.Tensor
    plies: torch.Tensor
    codes: torch.Tensor
    forfeit_seat: torch.Tensor
    actions: torch.Tensor

    def take(self, rows: torch.Tensor) -> DeviceResults:
        """The results of ``rows`` (an index tensor), still on the device."""
        return DeviceResults(*(getattr(self, f.name)[rows] for f in fields(self)))

    def to_host(self) -> dict[str, np.ndarray]:
        """One bulk copy of every field to numpy."""
        return {f.name: getattr(self, f.name).cpu().numpy() for f in fields(self)}


def policy_groups(lineups: np.ndarray, device: torch.device) -> Groups:
    """For each seat, which rows each policy answers (``None``: the policy has every row)."""
    groups: Groups = []
    for seat in (0, 1):
        column = lineups[:, seat]
        present = np.unique(column)
        if len(present) == 1:
            groups.append([(int(present[0]), None)])
            continue
        groups.append([(int(p), torch.as_tensor(np.flatnonzero(column == p), device=device))
                       for p in present])
    return groups


def _validated(raw: object, mask: torch.Tensor) -> tuple[torch.Tensor, str]:
    """``(k,)`` int64 actions (``-2``: invalid output) of a policy's answer, and what was malformed."""
    k = len(mask)
    actions, invalid = raw if isinstance(raw, tuple) and len(raw) == 2 else (raw, None)
    ok = (
        isinstance(actions, torch.Tensor) and isinstance(invalid, torch.Tensor)
        and actions.shape == (k,) and invalid.shape == (k,) and not actions.is_floating_point()
        and actions.device == mask.device and invalid.device == mask.device
    )
    if not ok:  # worded like arena.engine.guard.validate_actions
        dtype = str(getattr(actions, "dtype", type(actions).__name__)).removeprefix("torch.")
        shape = tuple(getattr(actions, "shape", ()))
        return (torch.full((k,), -2, device=mask.device),
                f"returned {dtype} array of shape {shape}, expected ({k},) ints")
    return torch.where(invalid.to(torch.bool), -2, actions.to(torch.int64)), ""


def _answer(policy: DevicePolicy, p: int, obs: torch.Tensor, mask: torch.Tensor,
            seeds: torch.Tensor, seat: int, ply: int,
            problems: dict[tuple[int, int], str]) -> tuple[torch.Tensor, torch.Tensor]:
    """One policy call: actions (``-2``: invalid output) and which rows raised.

    Like :class:`arena.engine.guard.PolicyCaller`, a call that raises is retried row by
    row, so one poisoned position forfeits only its own match (and a match ends the same
    way alone or in a batch). Arena's own device policies never raise on a single row.
    """
    k = len(mask)
    try:
        raw = policy.act_device(obs, mask, DeviceMatchRng(seeds, seat, ply))
        actions, reason = _validated(raw, mask)
        if reason:
            problems[p, INVALID] = reason
        return actions, torch.zeros(k, dtype=torch.bool, device=mask.device)
    except Exception as exc:  # noqa: BLE001 - a policy failure is a forfeit, never a crash
        if k == 1:
            problems[p, ERROR] = f"raised {type(exc).__name__}: {exc}"
            return (torch.full((1,), -1, device=mask.device),
                    torch.ones(1, dtype=torch.bool, device=mask.device))
        parts = [_answer(policy, p, obs[i:i + 1], mask[i:i + 1], seeds[i:i + 1], seat, ply, problems)
                 for i in range(k)]
        return torch.cat([a for a, _ in parts]), torch.cat([r for _, r in parts])


def decide(policies: list[DevicePolicy], group: list[tuple[int, torch.Tensor | None]],
           obs: torch.Tensor, mask: torch.Tensor, seeds: torch.Tensor, seat: int, ply: int,
           problems: dict[tuple[int, int], str]) -> tuple[torch.Tensor, torch.Tensor]:
    """One ply's actions ``(m,)`` and per-row termination codes ``(m,)`` int8.

    ``problems`` collects a reason per (policy, code) for the records' ``detail``.
    """
    if len(group) == 1 and group[0][1] is None:
        actions, raised = _answer(policies[group[0][0]], group[0][0], obs, mask, seeds, seat,
                                  ply, problems)
    else:
        actions = torch.full((len(mask),), -1, dtype=torch.int64, device=mask.device)
        raised = torch.zeros(len(mask), dtype=torch.bool, device=mask.device)
        for p, rows in group:
            actions[rows], raised[rows] = _answer(policies[p], p, obs[rows], mask[rows],
                                                  seeds[rows], seat, ply, problems)
    n_act = mask.shape[1]
    legal = (actions >= 0) & (actions < n_act)
    legal &= mask.gather(1, actions.clamp(0, n_act - 1)[:, None])[:, 0]
    codes = torch.where(legal, OK, torch.where(actions == -2, INVALID, ILLEGAL))
    return actions, torch.where(raised, ERROR, codes).to(torch.int8)


def play_on_device(core: TorchBoardCore, step_limit: int, seeds: torch.Tensor,
                   lineups: np.ndarray, policies: list[DevicePolicy],
                   compact_every: int = 1) -> tuple[DeviceResults, dict[tuple[int, int], str]]:
    """Play ``len(seeds)`` matches on ``core.device``.

    Args:
        core: The game's torch core.
        step_limit: The env's limit on moves per match.
        seeds: ``(n,)`` int64 match seeds on the device.
        lineups: ``(n, 2)`` host array: index into ``policies`` of each seat.
        policies: Device policies.
        compact_every: Drop finished matches from the working set every this many plies.

    Returns:
        The results on the device, and reasons per (policy index, termination code).
    """
    n, dev = len(seeds), core.device
    max_plies = min(step_limit, core.num_cells)
    boards = core.new_boards(n)
    out = DeviceResults(boards.winner.clone(), boards.plies.clone(),
                        torch.zeros(n, dtype=torch.int8, device=dev),
                        torch.full((n,), -1, dtype=torch.int8, device=dev),
                        torch.full((n, max_plies), -1, dtype=torch.int16, device=dev))
    codes, forfeit_seat = out.codes.clone(), out.forfeit_seat.clone()  # of the working rows
    rows, rows_np = torch.arange(n, device=dev), np.arange(n)
    live = torch.ones(n, dtype=torch.bool, device=dev)
    groups, problems = policy_groups(lineups, dev), {}
    for ply in range(max_plies):
        if ply and ply % compact_every == 0:
            keep = live.nonzero()[:, 0]  # the host learns how many matches are left
            if len(keep) == 0:
                break
            if len(keep) < len(rows):
                _store(out, rows, boards, codes, forfeit_seat)
                boards, codes, forfeit_seat = boards.take(keep), codes[keep], forfeit_seat[keep]
                live, seeds, rows = live[keep], seeds[keep], rows[keep]
                rows_np = rows_np[keep.cpu().numpy()]
                groups = policy_groups(lineups[rows_np], dev)
        seat = ply % 2
        obs, mask = core.observe(boards, torch.float32)
        actions, step = decide(policies, groups[seat], obs, mask, seeds, seat, ply, problems)
        bad = live & (step != OK)
        logged = live & ((step == OK) | (step == ILLEGAL))
        out.actions[rows, ply] = torch.where(logged, actions, -1).to(torch.int16)
        codes = torch.where(bad, step, codes)
        forfeit_seat = torch.where(bad, seat, forfeit_seat)
        finished = core.play(boards, actions, live & ~bad)
        live &= ~bad & ~finished
        if ply + 1 >= step_limit:
            codes = torch.where(live, STEP_LIMIT, codes).to(torch.int8)
            live &= False
    _store(out, rows, boards, codes, forfeit_seat)
    return out, problems


def _store(out: DeviceResults, rows: torch.Tensor, boards: TorchBoards, codes: torch.Tensor,
           forfeit_seat: torch.Tensor) -> None:
    """Write the working rows' outcomes into the full-size results (the action log is there already)."""
    out.winner[rows], out.plies[rows] = boards.winner, boards.plies
    out.codes[rows], out.forfeit_seat[rows] = codes, forfeit_seat
