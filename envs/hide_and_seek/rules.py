"""Hide-and-seek's ids, defined once: actions, teams, roles, observation layout, phases.

Every layer of the game (layouts, numpy and torch cores, PettingZoo envs, the planner,
the scripted baselines, trainers and leagues) reads these names from here.

Actions (``Discrete(NUM_ACTIONS)``): ``NOOP``, the moves ``NORTH``, ``EAST``, ``SOUTH``,
``WEST`` (``MOVES[action - 1]`` is the move's ``(row, col)`` step), ``GRAB`` (grab or
release an adjacent box) and ``LOCK`` (lock or unlock one).

Teams are indices: ``HIDERS`` 0 and ``SEEKERS`` 1, also the value of a lock held by
that team (``UNLOCKED`` -1 otherwise) and of the winner in an outcome (-1 a draw);
``ROLES[team]`` is the team's role name.

An observation is ``len(CHANNELS)`` planes of ``view_size x view_size`` cells around the
agent, flattened channel by channel, then the ``FLAT`` features; v1 appends
``CHANNELS_V1`` planes and ``FLAT_V1`` features (:func:`obs_dim`).
"""

from __future__ import annotations

import numpy as np

NOOP, NORTH, EAST, SOUTH, WEST, GRAB, LOCK = range(7)
NUM_ACTIONS = 7
ACTIONS = tuple(range(NUM_ACTIONS))
MOVES = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]], dtype=np.int64)
"""row/column steps of the move actions 1-4: north, east, south, west"""

HIDERS, SEEKERS, UNLOCKED = 0, 1, -1
ROLES = ("hider", "seeker")
"""role name of each team index"""

VIEW_SIZE = 9
"""side of the egocentric window of the registered envs"""
CHANNELS = ("walls", "boxes", "locked_own", "locked_opponent", "teammates", "visible_opponents")
FLAT = ("prep_phase", "time_fraction", "is_hider", "is_seeker", "holding", "row", "col")
CHANNELS_V1 = ("ramps",)
FLAT_V1 = ("on_ramp",)

PHASES = ("chasing", "fort", "ramp_use", "ramp_defense")
"""v1's emergent strategy phases, in the order they appear (its per-episode detectors)"""


def obs_dim(view_size: int = VIEW_SIZE, v1: bool = False) -> int:
    """Length of one agent's observation (v0: 493 with the default window, v1: 575)."""
    channels, flat = len(CHANNELS) + v1 * len(CHANNELS_V1), len(FLAT) + v1 * len(FLAT_V1)
    return channels * view_size**2 + flat


def flat_index(name: str, view_size: int = VIEW_SIZE) -> int:
    """Index of the ``FLAT`` feature ``name`` in a (v0 or v1) observation."""
    return len(CHANNELS) * view_size**2 + FLAT.index(name)


__all__ = [
    "ACTIONS", "CHANNELS", "CHANNELS_V1", "EAST", "FLAT", "FLAT_V1", "GRAB", "HIDERS", "LOCK", "MOVES", "NOOP",
    "NORTH", "NUM_ACTIONS", "PHASES", "ROLES", "SEEKERS", "SOUTH", "UNLOCKED", "VIEW_SIZE", "WEST", "flat_index",
    "obs_dim",
]
