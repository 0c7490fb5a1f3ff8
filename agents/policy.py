"""The one batched Policy interface, and the per-match random streams it draws from.

A policy answers a batch of decisions at once::

    actions = policy.act(obs_batch, mask_batch, rng)

``obs_batch`` is ``(k, *obs_shape)``, ``mask_batch`` is ``(k, num_actions)`` bool,
and ``rng`` is a :class:`MatchRng` holding one independent random stream per row.
Streams are keyed by (match seed, seat, ply), so a match draws the same numbers
whether it is played alone or inside a batch of 4,096: that is what makes every
match record replayable on its own.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """Vectorized SplitMix64 finalizer: a bijective, well-mixed hash of uint64."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def derive_seed(master_seed: int, index: int | np.ndarray) -> np.ndarray | int:
    """Seed of match ``index`` under ``master_seed`` (63-bit, JSON-safe)."""
    idx = np.asarray(index, dtype=np.uint64)
    base = splitmix64(np.uint64(master_seed & 0xFFFFFFFFFFFFFFFF))
    with np.errstate(over="ignore"):
        out = splitmix64(base ^ splitmix64(idx)) >> np.uint64(1)
    return int(out) if out.ndim == 0 else out.astype(np.int64)


class MatchRng:
    """Independent uniform streams for a batch of decisions.

    Args:
        seeds: ``(k,)`` match seeds.
        seats: ``(k,)`` seat deciding in each row.
        plies: ``(k,)`` move counter of each match.

    The rows' ``seeds``, ``seats`` and ``plies`` stay readable: a policy that must
    say which match a row belongs to (a connected agent's request) finds them there.
    """

    def __init__(self, seeds: np.ndarray, seats: np.ndarray, plies: np.ndarray) -> None:
        self.seeds = np.asarray(seeds, dtype=np.int64)
        self.seats = np.asarray(seats, dtype=np.int64)
        self.plies = np.asarray(plies, dtype=np.int64)
        with np.errstate(over="ignore"):
            self._keys = splitmix64(splitmix64(self.seeds.astype(np.uint64))
                                    ^ (self.seats.astype(np.uint64) << np.uint64(48))
                                    ^ self.plies.astype(np.uint64))
        self._draws = 0

    def __len__(self) -> int:
        return len(self._keys)

    def subset(self, rows: np.ndarray) -> MatchRng:
        """The streams of ``rows`` only (same draw counter), for per-row retries."""
        out = MatchRng.__new__(MatchRng)
        out.seeds, out.seats, out.plies = self.seeds[rows], self.seats[rows], self.plies[rows]
        out._keys = self._keys[rows]
        out._draws = self._draws
        return out

    def uniform(self, n: int = 1) -> np.ndarray:
        """``(k, n)`` floats in ``[0, 1)``; successive calls give fresh numbers."""
        j = np.arange(self._draws, self._draws + n, dtype=np.uint64)
        self._draws += n
        with np.errstate(over="ignore"):
            bits = splitmix64(self._keys[:, None] ^ splitmix64(j)[None, :])
        return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))

    def choice(self, mask: np.ndarray) -> np.ndarray:
        """One uniformly random ``True`` column per row of ``mask`` (``-1`` if none)."""
        mask = np.asarray(mask, dtype=bool)
        counts = mask.sum(axis=1)
        pick = np.floor(self.uniform(1)[:, 0] * np.maximum(counts, 1)).astype(np.int64)
        ranks = np.cumsum(mask, axis=1) - 1
        hit = mask & (ranks == pick[:, None])
        return np.where(counts > 0, hit.argmax(axis=1), -1)

    def gumbel(self, n: int) -> np.ndarray:
        """``(k, n)`` standard Gumbel noise (for sampling from logits)."""
        u = self.uniform(n)
        return -np.log(-np.log(np.clip(u, 1e-12, 1 - 1e-12)))


class PolicyCrashed(Exception):
    """``act`` failed as a whole, for a reason retrying its rows one by one would repeat.

    Raised by a policy whose runtime died under it (an ONNX model that crashed or
    was killed in its sandboxed worker process): the engine forfeits every row of
    the call with ``error`` at once instead of retrying each row alone, which would
    crash a fresh process per row.
    """


@runtime_checkable
class Policy(Protocol):
    """Anything that answers a batch of decisions.

    Attributes:
        agent_id: Stable id, e.g. ``heuristic:epsilon=0.3`` or ``mlp-<sha256[:16]>``.
        weights_hash: sha256 of the weights file for neural agents, else ``None``.
        bounded_runtime: (optional) ``True`` for policies whose ``act`` cannot hang
            (Arena's own); the engine then times them without a watchdog thread.
    """

    agent_id: str
    weights_hash: str | None

    def act(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        """Return ``(k,)`` actions for ``(k, ...)`` observations and ``(k, A)`` masks."""
        ...
