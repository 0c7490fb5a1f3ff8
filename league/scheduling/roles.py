"""AlphaStar league roles: who each learner trains against, when it snapshots, when it resets.

Pure functions over plain values; randomness comes from the ``rng`` passed in.

Roles (Vinyals et al. 2019, "Grandmaster level in StarCraft II"):

* **main agent** - the agent the league exists to produce. 35% of its games are
  self-play against its current weights; the rest are drawn by PFSP (``squared``)
  over every past player of the league (all roles' snapshots) and the scripted
  baselines, so it keeps beating everything it has beaten before. Optionally
  (``baseline_share``) a fixed part of those PFSP games is drawn among the scripted
  baselines alone: anchors of known strength that keep the games varied while the
  pool is still a crowd of near-copies of the learner.
* **main exploiter** - plays the *current* main agents, to find their weaknesses.
  When it beats them (or hits its update limit without getting there, i.e. it stopped
  improving) it is snapshotted and reset to the initial weights.
* **league exploiter** - PFSP over the whole league, to find strategies no one beats.
  After a snapshot it is reset with probability 0.25 (AlphaStar's value).

Snapshot rule: a learner is frozen into the pool when its expected win rate against
its current opponent distribution reaches ``threshold`` (0.7), or at least every
``max_updates`` (50) updates, never more often than every ``min_updates``.

Opponent ids are plain strings; :data:`SELF` stands for the learner's current weights
and ``main:<name>`` ids for the live main agents (see :func:`current_main_id`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from league.scheduling.matchmaking import PFSPWeighting, pfsp_weights

Role = Literal["main", "main_exploiter", "league_exploiter"]
ROLES: tuple[Role, ...] = ("main", "main_exploiter", "league_exploiter")
SELF = "self"
"""Opponent id of the learner's own current weights (self-play)."""


def current_main_id(name: str) -> str:
    """Opponent id of the live (current-weights) main agent ``name``."""
    return f"main:{name}"


def check_role(role: str) -> Role:
    """``role`` if it is one of :data:`ROLES`; a ``ValueError`` naming them otherwise."""
    if role not in ROLES:
        raise ValueError(f"unknown league role {role!r}; use one of {', '.join(ROLES)}")
    return role  # type: ignore[return-value]


def learner_names(roles: Sequence[str]) -> list[tuple[str, Role]]:
    """``(learner name, role)`` per entry of a league's ``roles``: the role's name, numbered
    when the role repeats (``main_exploiter0``, ``main_exploiter1``).

    Raises:
        ValueError: An unknown role, no role, or a main exploiter without a main agent.
    """
    checked = [check_role(r) for r in roles]
    if not checked:
        raise ValueError("a league needs at least one role")
    if "main_exploiter" in checked and "main" not in checked:
        raise ValueError("a main exploiter needs a main agent to exploit: add 'main' to the roles")
    return [(r if checked.count(r) == 1 else f"{r}{checked[:i].count(r)}", r) for i, r in enumerate(checked)]


@dataclass(frozen=True)
class RoleConfig:
    """AlphaStar's constants, adjustable per league.

    Attributes:
        self_play: Share of a main agent's games against its current weights.
        baseline_share: Share of a main agent's other (not self-play) games drawn by
            PFSP among the scripted baselines alone; the rest is PFSP over everyone
            past, baselines included (AlphaStar: 0, it has no scripted opponents).
        weighting: PFSP weighting of main agents and league exploiters.
        exploiter_weighting: PFSP weighting of a main exploiter over past main
            snapshots when it cannot yet win against the current main agents.
        exploiter_floor: Below this win rate against the current main agents, a main
            exploiter also plays past main snapshots (AlphaStar: 0.1).
        league_exploiter_reset: Probability that a league exploiter resets after a snapshot.
    """

    self_play: float = 0.35
    baseline_share: float = 0.0
    weighting: PFSPWeighting = "squared"
    exploiter_weighting: PFSPWeighting = "variance"
    exploiter_floor: float = 0.1
    league_exploiter_reset: float = 0.25

    def __post_init__(self) -> None:
        for name in ("self_play", "baseline_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")


@dataclass(frozen=True)
class SnapshotRule:
    """When a learner is frozen into the pool.

    Attributes:
        threshold: Expected win rate against the current opponents that triggers it.
        max_updates: Snapshot at least this often (in updates).
        min_updates: ...and at most this often.
    """

    threshold: float = 0.7
    max_updates: int = 50
    min_updates: int = 5

    def due(self, win_rate: float, updates_since: int) -> str | None:
        """Why a snapshot is due now (``"beaten"`` or ``"timeout"``), or ``None``."""
        if updates_since >= self.max_updates:
            return "beaten" if win_rate >= self.threshold else "timeout"
        if updates_since >= self.min_updates and win_rate >= self.threshold:
            return "beaten"
        return None


def _mix(parts: Sequence[tuple[Sequence[str], np.ndarray, float]]) -> tuple[list[str], np.ndarray]:
    """Mixture of distributions ``(ids, probs, weight)``; ids appearing twice are merged."""
    total: dict[str, float] = {}
    for ids, probs, weight in parts:
        for i, p in zip(ids, probs):
            total[i] = total.get(i, 0.0) + weight * float(p)
    ids = list(total)
    probs = np.array([total[i] for i in ids])
    return ids, probs / probs.sum()


def _pfsp(ids: Sequence[str], win_rates: Mapping[str, float], weighting: PFSPWeighting) -> np.ndarray:
    return pfsp_weights([win_rates.get(i, 0.5) for i in ids], weighting)


def opponent_distribution(
    role: Role,
    *,
    past: Sequence[str],
    baselines: Sequence[str],
    main_agents: Sequence[str],
    past_main: Sequence[str],
    win_rates: Mapping[str, float],
    config: RoleConfig = RoleConfig(),
) -> tuple[list[str], np.ndarray]:
    """Probabilities of the opponents a learner of ``role`` plays next.

    Args:
        role: The learner's role.
        past: Snapshot ids of every past player of the league (all roles).
        baselines: Scripted opponent ids (``random``, ``heuristic:epsilon=0.2``...).
        main_agents: Ids of the current main agents (:func:`current_main_id`); a main
            agent may find its own id here: self-play is :data:`SELF` instead.
        past_main: Snapshot ids of main agents only.
        win_rates: The learner's win rate against each id (missing: 0.5).
        config: Role constants.

    Returns:
        ``(ids, probs)``; ``probs`` sums to 1.
    """
    role = check_role(role)
    if role == "main":
        others = [*past, *baselines]
        if not others:
            return [SELF], np.ones(1)
        p_self = config.self_play
        p_base = (1.0 - p_self) * config.baseline_share if baselines else 0.0
        parts = [([SELF], np.ones(1), p_self),
                 (baselines, _pfsp(baselines, win_rates, config.weighting) if baselines else np.ones(0), p_base),
                 (others, _pfsp(others, win_rates, config.weighting), 1.0 - p_self - p_base)]
        return _mix([part for part in parts if part[2] > 0.0])
    if role == "main_exploiter":
        if not main_agents:
            raise ValueError("a main exploiter needs at least one main agent to exploit")
        current = min(win_rates.get(m, 0.5) for m in main_agents)
        if current >= config.exploiter_floor or not past_main:
            return list(main_agents), np.full(len(main_agents), 1.0 / len(main_agents))
        # Cannot beat the current main agents yet: learn from their past, near its level.
        return _mix([(main_agents, np.full(len(main_agents), 1.0 / len(main_agents)), 0.5),
                     (past_main, _pfsp(past_main, win_rates, config.exploiter_weighting), 0.5)])
    others = [*past, *baselines, *main_agents]
    if not others:
        raise ValueError("a league exploiter needs opponents: snapshots, baselines or main agents")
    return others, _pfsp(others, win_rates, config.weighting)


def expected_win_rate(ids: Sequence[str], probs: np.ndarray, win_rates: Mapping[str, float]) -> float:
    """The learner's win rate against its opponent distribution, self-play left out.

    Self-play always reads 0.5, so it says nothing about progress; with nothing but
    self-play the result is 0.5.
    """
    pairs = [(p, win_rates.get(i, 0.5)) for i, p in zip(ids, probs) if i != SELF]
    mass = sum(p for p, _ in pairs)
    return sum(p * x for p, x in pairs) / mass if mass > 0 else 0.5


def reset_after_snapshot(role: Role, reason: str, rng: np.random.Generator,
                         config: RoleConfig = RoleConfig()) -> bool:
    """Whether a learner goes back to its initial weights after a snapshot.

    Main agents never reset. A main exploiter resets after every snapshot: either it
    beat the main agents (its exploit is now in the pool) or it timed out, i.e. it
    stopped improving. A league exploiter resets with probability
    ``config.league_exploiter_reset``.
    """
    role = check_role(role)
    if role == "main":
        return False
    if role == "main_exploiter":
        return reason in ("beaten", "timeout")
    return bool(rng.random() < config.league_exploiter_reset)


def snapshot_name(league: str, role: Role, generation: int) -> str:
    """Display name of a snapshot agent: ``<league>-<role>-g<generation>``."""
    return f"{league}-{check_role(role)}-g{generation}"
