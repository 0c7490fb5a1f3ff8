"""Clone fingerprints: who plays exactly like whom. Pure (numpy only).

An agent's **fingerprint** is its action distribution - the masked softmax of its
logits - on a fixed, seeded set of positions of its env and role; every agent of that
env and role is fingerprinted on the same positions (``arena.evaluation.fingerprints``
builds them and asks the policies for their logits). Two fingerprints ``p`` and ``q``
(``(positions, actions)`` each) are compared by

* **agreement**: the share of positions where both pick the same best action, up to
  ties: each one's best action is, for the other, within :data:`TIE_NATS` of its own
  best in log-probability (a near-uniform policy's best action is decided by rounding
  noise: without this, a copy of a fresh network with 1e-3 weight noise "disagrees" on
  3% of the positions while its distribution has not moved);
* **mean KL**: the symmetric Kullback-Leibler divergence
  ``(KL(p || q) + KL(q || p)) / 2`` over the legal actions of a position (nats),
  averaged over the positions, with every probability floored at :data:`PROB_FLOOR`
  so a tail that one network rounds to zero does not make it infinite.

A pair is a **near-duplicate** when agreement is at least ``min_agreement`` *and* the
mean KL is at most ``max_kl`` (:class:`CloneThresholds`). Both are needed: two fresh
networks play close to uniformly (small KL) but disagree on the best move; two strong
independently trained ones may agree on most best moves but not on the rest of the
distribution. Near-duplicates of different owners are **clone flags**; those of one
owner are joined into **families** (its versions), connected components of the
near-duplicate graph.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np

PROB_FLOOR = 1e-6
"""Smallest probability used in the KL divergence (nats: at most ~14 per action)."""
TIE_NATS = 0.01
"""Log-probability margin within which two actions count as tied best (1% in probability)."""


@dataclass(frozen=True)
class CloneThresholds:
    """When two fingerprints count as the same policy.

    Attributes:
        min_agreement: Least share of positions with the same best action.
        max_kl: Largest mean symmetric KL divergence (nats per position).
    """

    min_agreement: float = 0.99
    max_kl: float = 0.01


DEFAULT_THRESHOLDS = CloneThresholds()


@dataclass(frozen=True)
class Similarity:
    """How alike two agents' fingerprints are (``a < b``: ``a`` was registered first)."""

    a: Hashable
    b: Hashable
    agreement: float
    mean_kl: float
    positions: int


@dataclass(frozen=True)
class Family:
    """One owner's agents that play as one policy (its versions), oldest first."""

    owner: Hashable
    members: tuple[Hashable, ...]
    links: tuple[Similarity, ...]


@dataclass(frozen=True)
class CloneReport:
    """Near-duplicates split by owner: ``flags`` across owners, ``families`` within one."""

    flags: tuple[Similarity, ...]
    families: tuple[Family, ...]


def masked_probabilities(logits: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Softmax of ``logits`` over the legal actions of each row (illegal ones get 0).

    A row whose legal logits are not all finite becomes uniform over its legal
    actions (such a policy forfeits those positions on the ladder; as a fingerprint it
    carries no behaviour). A row with no legal action is all zeros.

    Args:
        logits: ``(n, actions)``.
        masks: ``(n, actions)`` legal-action mask.

    Returns:
        ``(n, actions)`` float64 probabilities.
    """
    logits = np.asarray(logits, dtype=np.float64)
    masks = np.asarray(masks, dtype=bool)
    if logits.shape != masks.shape or logits.ndim != 2:
        raise ValueError(f"logits {logits.shape} and masks {masks.shape} must be the same (n, actions)")
    broken = ~np.where(masks, np.isfinite(logits), True).all(axis=1)
    scores = np.where(masks & ~broken[:, None], logits, 0.0)
    scores = np.where(masks, scores, -np.inf)
    top = np.max(scores, axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        weights = np.where(masks, np.exp(scores - np.where(np.isfinite(top), top, 0.0)), 0.0)
    total = weights.sum(axis=1, keepdims=True)
    return np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)


def best_actions(probs: np.ndarray) -> np.ndarray:
    """``(n,)`` the most probable action of each position (the lowest index on ties)."""
    return np.asarray(probs).argmax(axis=1)


def _log(p: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(p, PROB_FLOOR))


def _agreement(lp: np.ndarray, lq: np.ndarray) -> np.ndarray:
    """Agreement of log-fingerprint ``lp (n, A)`` with each of ``lq (m, n, A)``: ``(m,)``."""
    rows = np.arange(lp.shape[0])
    bp, bq = lp.argmax(axis=1), lq.argmax(axis=2)
    p_at_bq = lp[rows[None, :], bq]  # (m, n): p's log-probability of q's best action
    q_at_bp = np.take_along_axis(lq, np.broadcast_to(bp[None, :, None], (*lq.shape[:2], 1)), 2)[..., 0]
    same = (p_at_bq >= lp.max(axis=1) - TIE_NATS) & (q_at_bp >= lq.max(axis=2) - TIE_NATS)
    return same.mean(axis=1)


def _mean_kl(p: np.ndarray, q: np.ndarray, lp: np.ndarray, lq: np.ndarray) -> np.ndarray:
    """Mean symmetric KL of ``p (n, A)`` against each of ``q (m, n, A)``: ``(m,)``."""
    legal = (p > 0) | (q > 0)
    per_position = 0.5 * np.where(legal, (p - q) * (lp - lq), 0.0).sum(axis=-1)
    return per_position.mean(axis=-1)


def similarity(p: np.ndarray, q: np.ndarray) -> tuple[float, float]:
    """``(agreement, mean KL)`` of two fingerprints of the same positions."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if p.shape != q.shape or p.ndim != 2 or not len(p):
        raise ValueError(f"fingerprints {p.shape} and {q.shape} must be the same non-empty (positions, actions)")
    lp, lq = _log(p), _log(q)[None]
    return float(_agreement(lp, lq)[0]), float(_mean_kl(p, q[None], lp, lq)[0])


def near_duplicates(fingerprints: Mapping[Hashable, np.ndarray],
                    thresholds: CloneThresholds = DEFAULT_THRESHOLDS) -> list[Similarity]:
    """Every pair of fingerprints at or past both thresholds.

    Args:
        fingerprints: ``{agent: (positions, actions) probabilities}``, all on the same
            positions; agents must be orderable (``a < b`` in each result).

    Returns:
        The near-duplicate pairs, ordered by ``(a, b)``.
    """
    ids = sorted(fingerprints)
    if len(ids) < 2:
        return []
    probs = np.stack([np.asarray(fingerprints[i], dtype=np.float64) for i in ids])
    logs = _log(probs)
    found = []
    for i in range(len(ids) - 1):  # one vector comparison against every later agent
        agreement = _agreement(logs[i], logs[i + 1:])
        close = np.flatnonzero(agreement >= thresholds.min_agreement)
        if not len(close):
            continue
        kl = _mean_kl(probs[i], probs[i + 1 + close], logs[i], logs[i + 1 + close])
        found += [Similarity(ids[i], ids[i + 1 + j], float(agreement[j]), float(k), probs.shape[1])
                  for j, k in zip(close, kl, strict=True) if k <= thresholds.max_kl]
    return found


def clone_report(pairs: list[Similarity], owners: Mapping[Hashable, Hashable]) -> CloneReport:
    """Split near-duplicate pairs into clone flags (different owners) and families (one owner).

    Args:
        pairs: From :func:`near_duplicates`.
        owners: Owner of every agent in ``pairs`` (``None`` is an owner too: the
            service's own agents are one family, not flags against each other).

    Returns:
        Flags in the order of ``pairs``; families as the connected components of the
        same-owner pairs, each with its links, ordered by their oldest member.
    """
    flags = tuple(s for s in pairs if owners[s.a] != owners[s.b])
    parent: dict[Hashable, Hashable] = {}

    def root(x: Hashable) -> Hashable:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    own = [s for s in pairs if owners[s.a] == owners[s.b]]
    for s in own:
        ra, rb = root(s.a), root(s.b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[Hashable, list[Hashable]] = {}
    for x in parent:
        groups.setdefault(root(x), []).append(x)
    families = [Family(owners[r], tuple(sorted(members)), tuple(s for s in own if root(s.a) == r))
                for r, members in groups.items()]
    return CloneReport(flags, tuple(sorted(families, key=lambda f: f.members[0])))
