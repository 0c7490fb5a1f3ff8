"""An agent's lifecycle: the one list of statuses and the moves allowed between them.

::

    queued ──> validating ──> placement <──> rated
       │            │  │          │            │
       │            │  └─> rejected            │
       └────────────┴───────┴──────┴─> retired <┘

* ``queued``: stored, waiting for validation (a new submission or league snapshot).
* ``validating``: playing its validation episodes; a crash of the service leaves it
  here, and the next run validates it again (``validating -> validating``).
* ``placement``: valid and on the ladder, its sigma still above the placement target.
* ``rated``: settled; it goes back to ``placement`` if its sigma grows again.
* ``rejected``: failed validation (the reason says why); it never plays again.
* ``retired``: its owner (or an admin) took it off the ladder; its history stays.

:func:`can_move` is the only judge of a transition: the database applies a status
change only where it is allowed from the status the row has at that moment, so a
ladder finishing a batch can never bring back an agent that was retired meanwhile.
"""

from __future__ import annotations

from enum import StrEnum


class AgentStatus(StrEnum):
    """Where an agent is in its lifecycle (stored as its string value)."""

    QUEUED = "queued"
    VALIDATING = "validating"
    PLACEMENT = "placement"
    RATED = "rated"
    REJECTED = "rejected"
    RETIRED = "retired"

    @property
    def plays_rated(self) -> bool:
        """On the ladder: scheduled for rated matches and challengeable for rated ones."""
        return self in ACTIVE

    @property
    def waiting(self) -> bool:
        """Waiting to be validated (it has a place in the queue)."""
        return self in WAITING

    @property
    def finished(self) -> bool:
        """Plays no more matches (rejected or retired); left off the leaderboards."""
        return self in FINISHED


ACTIVE = frozenset({AgentStatus.PLACEMENT, AgentStatus.RATED})
WAITING = frozenset({AgentStatus.QUEUED, AgentStatus.VALIDATING})
FINISHED = frozenset({AgentStatus.REJECTED, AgentStatus.RETIRED})

TRANSITIONS: dict[AgentStatus, frozenset[AgentStatus]] = {
    AgentStatus.QUEUED: frozenset({AgentStatus.VALIDATING, AgentStatus.REJECTED, AgentStatus.RETIRED}),
    AgentStatus.VALIDATING: frozenset({AgentStatus.VALIDATING, AgentStatus.PLACEMENT,
                                       AgentStatus.REJECTED, AgentStatus.RETIRED}),
    AgentStatus.PLACEMENT: frozenset({AgentStatus.PLACEMENT, AgentStatus.RATED, AgentStatus.RETIRED}),
    AgentStatus.RATED: frozenset({AgentStatus.RATED, AgentStatus.PLACEMENT, AgentStatus.RETIRED}),
    AgentStatus.REJECTED: frozenset({AgentStatus.RETIRED}),
    AgentStatus.RETIRED: frozenset(),
}
"""``{from: the statuses it may move to}``; staying put counts as a move where listed."""


def can_move(current: AgentStatus | str, new: AgentStatus | str) -> bool:
    """Whether an agent in ``current`` may move to ``new``."""
    return AgentStatus(new) in TRANSITIONS[AgentStatus(current)]


def sources_of(new: AgentStatus | str) -> frozenset[AgentStatus]:
    """Every status from which an agent may move to ``new``."""
    target = AgentStatus(new)
    return frozenset(s for s, allowed in TRANSITIONS.items() if target in allowed)
