"""Which agents meet in the next batch: line-ups chosen for expected information.

A *slot* is one rating: an agent in one role (``("a", "player")``, ``("b", "hider")``).
Each slot carries its rating and a *need* weight (1 for agents still being measured,
small for settled ones). A candidate pairing of two slots is scored by the
need-weighted expected variance reduction of both ratings
(:func:`league.ratings.information.expected_variance_reduction`).

A batch is built greedily: take the best-scoring pairing (with a random perturbation
so near-ties and repeated batches differ), then *simulate* its effect by shrinking the
two slots' sigmas to their expected posterior values, rescore only the pairings that
touch those two slots, and repeat. The simulated shrinkage gives diminishing returns
within one batch, so a batch spreads over every pairing worth playing instead of
repeating the single best one.

Team layouts:

* symmetric 2-team envs (connect four, rps): pairs of distinct agents in one role;
* role envs (hiders vs seekers, predators vs prey): *bipartite* pairs, one slot of each
  role, each side rated in its own role; an agent may face itself across roles
  (``rate_match`` rates that);
* more than two teams: the best pair seeds the line-up, then every further team takes
  the slot with the highest summed score against the members already in (an
  approximation: free-for-all updates are scored as the 1v1s they contain).

All randomness comes from the ``rng`` passed in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from league.ratings.information import expected_sigma_after, expected_variance_reduction
from league.ratings.rating import RatingEnv

FULL_PAIRS_UP_TO = 400
"""Boards up to this many slots per role score every pair; larger ones a mu window."""
WINDOW = 24
"""Neighbours in mu order (each side) considered per slot on large boards."""
SHARPNESS = 8.0
"""Picks follow ``score ** SHARPNESS`` (Gumbel-perturbed greedy): near-greedy, no ties."""


@dataclass
class SlotBoard:
    """The ratings the scheduler works on, one entry per slot.

    Attributes:
        agents: Agent key of each slot.
        roles: Role of each slot.
        mu: Rating means.
        sigma: Rating standard deviations.
        need: How much measuring this slot is worth (1: unsettled, small: settled).
    """

    agents: list[str]
    roles: list[str]
    mu: np.ndarray
    sigma: np.ndarray
    need: np.ndarray

    def pool(self, role: str) -> np.ndarray:
        """Indices of the slots in ``role``."""
        return np.array([i for i, r in enumerate(self.roles) if r == role], dtype=np.int64)


def candidate_pairs(board: SlotBoard, role_a: str, role_b: str) -> tuple[np.ndarray, np.ndarray]:
    """Slot pairs that may meet as teams of ``role_a`` and ``role_b``.

    One role: every pair of distinct slots (on large boards only neighbours within
    :data:`WINDOW` places in mu order: distant pairs carry no information anyway).
    Two roles: every slot of ``role_a`` against every slot of ``role_b`` (a mu window
    on large boards).
    """
    pool_a, pool_b = board.pool(role_a), board.pool(role_b)
    if role_a == role_b:
        m = pool_a.size
        if m <= FULL_PAIRS_UP_TO:
            i, j = np.triu_indices(m, k=1)
        else:
            order = np.argsort(board.mu[pool_a], kind="stable")
            i = np.repeat(np.arange(m), WINDOW)
            j = i + np.tile(np.arange(1, WINDOW + 1), m)
            keep = j < m
            i, j = order[i[keep]], order[j[keep]]
        return pool_a[i], pool_a[j]
    if max(pool_a.size, pool_b.size) <= FULL_PAIRS_UP_TO:
        i, j = np.meshgrid(np.arange(pool_a.size), np.arange(pool_b.size), indexing="ij")
        return pool_a[i.ravel()], pool_b[j.ravel()]
    # Each slot of role_a meets the role_b slots nearest to it in mu.
    sorted_b = np.argsort(board.mu[pool_b], kind="stable")
    at = np.searchsorted(board.mu[pool_b][sorted_b], board.mu[pool_a])
    offsets = np.arange(-WINDOW, WINDOW)
    j = np.clip(at[:, None] + offsets[None, :], 0, pool_b.size - 1)
    i = np.broadcast_to(np.arange(pool_a.size)[:, None], j.shape)
    pairs = np.unique(np.stack([i.ravel(), sorted_b[j.ravel()]], axis=1), axis=0)
    return pool_a[pairs[:, 0]], pool_b[pairs[:, 1]]


def _scores(board: SlotBoard, sigma: np.ndarray, a: np.ndarray, b: np.ndarray,
            env: RatingEnv) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Need-weighted expected variance reduction of pairs ``(a, b)``, and the two drops."""
    drop_a, drop_b = expected_variance_reduction(board.mu[a], sigma[a], board.mu[b], sigma[b], env=env)
    score = board.need[a] * np.maximum(drop_a, 0.0) + board.need[b] * np.maximum(drop_b, 0.0)
    return score, drop_a, drop_b


def _touching(a: np.ndarray, b: np.ndarray, n_slots: int) -> list[np.ndarray]:
    """For every slot, the indices of the candidate pairs it is part of."""
    ends = np.concatenate([a, b])
    pair_of = np.concatenate([np.arange(a.size), np.arange(b.size)])
    order = np.argsort(ends, kind="stable")
    bounds = np.searchsorted(ends[order], np.arange(n_slots + 1))
    return [pair_of[order[bounds[s]:bounds[s + 1]]] for s in range(n_slots)]


def greedy_pairs(
    board: SlotBoard, a: np.ndarray, b: np.ndarray, n: int, rng: np.random.Generator,
    *, env: RatingEnv, sigma: np.ndarray | None = None,
) -> list[tuple[int, int]]:
    """``n`` pairings among candidates ``(a[k], b[k])``, greedy with simulated shrinkage.

    Args:
        board: The slots.
        a: First slot of every candidate pairing.
        b: Second slot of every candidate pairing.
        n: How many pairings to pick (pairings may repeat).
        rng: Source of randomness (the perturbation of the greedy choice).
        env: The ladder's rating environment.
        sigma: Working sigmas, updated in place by the simulated shrinkage (a copy of
            ``board.sigma`` when omitted).

    Returns:
        ``n`` pairs of slot indices, as ``(a[k], b[k])`` (the caller assigns seats).
    """
    if a.size == 0:
        raise ValueError("no candidate pairings: a ladder needs at least two agents")
    sigma = board.sigma.copy() if sigma is None else sigma
    score, drop_a, drop_b = _scores(board, sigma, a, b, env)
    touching = _touching(a, b, board.mu.size)
    # Gumbel-max: argmax(SHARPNESS * log(score) + Gumbel) samples ~ score ** SHARPNESS.
    # A candidate's noise is redrawn whenever it is rescored.
    key = SHARPNESS * np.log(np.maximum(score, 1e-300)) + rng.gumbel(size=a.size)
    picks: list[tuple[int, int]] = []
    for _ in range(n):
        k = int(np.argmax(key))
        sa, sb = int(a[k]), int(b[k])
        picks.append((sa, sb))
        sigma[sa] = math.sqrt(max(sigma[sa] ** 2 - drop_a[k], 1e-12))
        sigma[sb] = math.sqrt(max(sigma[sb] ** 2 - drop_b[k], 1e-12))
        hit = np.unique(np.concatenate([touching[sa], touching[sb]]))
        score[hit], drop_a[hit], drop_b[hit] = _scores(board, sigma, a[hit], b[hit], env)
        key[hit] = SHARPNESS * np.log(np.maximum(score[hit], 1e-300)) + rng.gumbel(size=hit.size)
    return picks


def _extend(board: SlotBoard, sigma: np.ndarray, lineup: list[int], pool: np.ndarray,
            taken_agents: set[str], env: RatingEnv) -> int:
    """The slot of ``pool`` with the highest summed score against ``lineup``'s members."""
    allowed = np.array([board.agents[s] not in taken_agents for s in pool])
    if not allowed.any():
        raise ValueError("not enough distinct agents to fill every team of a line-up")
    total = np.zeros(pool.size)
    for member in lineup:
        others = np.full(pool.size, member)
        total += _scores(board, sigma, pool, others, env)[0]
    total[~allowed] = -np.inf
    best = int(pool[int(np.argmax(total))])
    drop, _ = expected_variance_reduction(board.mu[best], sigma[best], board.mu[lineup],
                                          sigma[lineup], env=env)
    sigma[best] = expected_sigma_after(sigma[best], float(np.max(drop)))
    return best


def select_lineups(
    board: SlotBoard, team_roles: Sequence[str], n: int, rng: np.random.Generator, *, env: RatingEnv
) -> list[tuple[str, ...]]:
    """``n`` line-ups (one agent key per team, in team order) for the next batch.

    Args:
        board: The slots, with their needs.
        team_roles: The role of every team of the env, in team order.
        n: Number of matches to schedule.
        rng: Source of randomness.
        env: The ladder's rating environment.

    Returns:
        ``n`` tuples of agent keys, ready to be match jobs. Teams that share a role get
        their agents in random order, so seats stay balanced.
    """
    if n <= 0:
        return []
    a, b = candidate_pairs(board, team_roles[0], team_roles[1])
    sigma = board.sigma.copy()
    pairs = greedy_pairs(board, a, b, n, rng, env=env, sigma=sigma)
    lineups = []
    for first, second in pairs:
        slots = [first, second]
        for role in team_roles[2:]:
            taken = {board.agents[s] for s, r in zip(slots, team_roles) if r == role}
            slots.append(_extend(board, sigma, slots, board.pool(role), taken, env))
        lineups.append(_shuffle_same_roles(slots, team_roles, rng))
    return [tuple(board.agents[s] for s in slots) for slots in lineups]


def _shuffle_same_roles(slots: list[int], team_roles: Sequence[str],
                        rng: np.random.Generator) -> list[int]:
    """Randomly permute the slots among teams of the same role (seat balance)."""
    out = list(slots)
    for role in dict.fromkeys(team_roles):
        teams = [t for t, r in enumerate(team_roles) if r == role]
        for t, s in zip(teams, rng.permutation([slots[t] for t in teams])):
            out[t] = int(s)
    return out
