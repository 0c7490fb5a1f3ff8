"""Hide and seek on a grid: a 2D PettingZoo ParallelEnv after OpenAI's hide-and-seek.

A ``size x size`` walled grid (default 15) holds the hiders' room: an L-shaped inner
wall closes off a random corner, with one or two one-cell doors. Hiders (``hider_0``..)
start in the room with half of the movable boxes, seekers (``seeker_0``..) and the
other boxes outside. Layouts are drawn from the reset seed.

Actions (``Discrete(7)``): 0 noop, 1-4 move north/east/south/west, 5 grab/release an
adjacent box (a grabbed box moves with its agent: pushed ahead, pulled behind or
dragged sideways), 6 lock/unlock an adjacent box (or lock the held one). A locked box
cannot be moved by anyone and only the team that locked it can unlock it. Walls,
boxes and agents block movement. ``infos[agent]["action_mask"]`` (int8) says which
actions would succeed now; illegal actions act as noop.

The first ``prep_fraction`` of ``max_steps`` (default 40% of 60) is preparation:
seekers are frozen (only noop is legal) and nobody is rewarded. Afterwards, every
step, each hider gets +1 if no seeker sees any hider and -1 otherwise; each seeker the
opposite. Sight: within ``vision_radius`` (default 7, all around), blocked by walls
and boxes (Bresenham lines, see :mod:`envs.hide_and_seek.layouts`). The episode ends
(terminations) after ``max_steps`` steps; the team with the higher summed reward wins
the match (a draw when equal).

Observation (flat float32, length ``6 * view_size**2 + 7``, 493 by default): a
``view_size x view_size`` window (default 9) centred on the agent with channels
walls, boxes, boxes locked by own team, boxes locked by opponents, teammates,
opponents in line of sight; then phase flag (1 in preparation), time fraction,
is_hider, is_seeker, holding a box, row and column (scaled to [0, 1]).

``env.unwrapped.door_block_status(locked=False)`` reports whether, at the end of
preparation, every door of the hiders' room held a box (``locked=True``: a box locked
by the hiders), the usual first skill of hiders. ``reset(options={"layout": rows})``
starts from a hand-drawn layout (:func:`envs.hide_and_seek.layouts.parse_layout`).

The dynamics live in :class:`envs.hide_and_seek.core.HideAndSeekCore`, which steps
many episodes at once; this env wraps a core of one episode.

Version history:
    v0: initial release (grid 15, 2 hiders, 2 seekers, 2 boxes, 60 steps, 40% prep).
        Later added, defaults unchanged: the ``n_doors``, ``box_by_door`` and
        ``seekers_by_door`` options (force one or two doors; start a box inside, or the
        seekers outside, next to the door), for training curricula.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from envs.hide_and_seek.config import HideAndSeekConfig
from envs.hide_and_seek.core import HideAndSeekCore
from envs.hide_and_seek.layouts import parse_layout
from envs.hide_and_seek.rules import HIDERS, NOOP, NUM_ACTIONS, SEEKERS, UNLOCKED

CELL_PIXELS = 16
COLORS = {  # RGB
    "floor": (235, 235, 228),
    "wall": (60, 60, 66),
    "door": (200, 225, 200),
    "box": (196, 150, 90),
    "box_hiders": (110, 140, 210),
    "box_seekers": (210, 120, 110),
    "hider": (40, 90, 220),
    "seeker": (220, 50, 40),
    "seen_hider": (140, 200, 255),
}


class HideAndSeekEnv(ParallelEnv):
    """Hide and seek for teams of hiders and seekers (see the module docstring).

    Args:
        config: The game's settings (default: the registered env's), see
            :class:`envs.hide_and_seek.config.HideAndSeekConfig`.
        render_mode: ``None``, ``"rgb_array"`` or ``"ansi"``.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "hide_and_seek_v0",
        "render_modes": ["rgb_array", "ansi"],
        "is_parallelizable": True,
        "render_fps": 5,
    }
    core_type: ClassVar[type[HideAndSeekCore]] = HideAndSeekCore
    """the core of one episode this env wraps"""

    def __init__(self, config: HideAndSeekConfig | None = None, *, render_mode: str | None = None) -> None:
        core = self.core_type(1, config)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']} "
                f"or None, got {render_mode!r}"
            )
        self.core = core
        self.render_mode = render_mode
        self.possible_agents = [f"hider_{i}" for i in range(core.n_hiders)] + [
            f"seeker_{i}" for i in range(core.n_seekers)
        ]
        self.agents: list[str] = []
        self._obs_space = spaces.Box(0.0, 1.0, (core.obs_dim,), dtype=np.float32)
        self._act_space = {a: spaces.Discrete(NUM_ACTIONS) for a in self.possible_agents}
        self._rng = np.random.default_rng()

    def observation_space(self, agent: str) -> spaces.Box:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._act_space[agent]

    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start an episode; the layout follows from ``seed`` (or ``options["layout"]``)."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            layout_seed = int(seed)
        else:
            layout_seed = int(self._rng.integers(2**31))
        if options and "layout" in options:
            self.core.set_layout(0, parse_layout(options["layout"]))
            obs, masks = self.core.observe(), self.core.action_masks()
        else:
            obs, masks = self.core.reset([layout_seed])
        self.agents = self.possible_agents[:]
        return self._per_agent(obs[0]), self._infos(masks[0])

    def step(self, actions: dict[str, int]):
        """One simultaneous step; agents missing from ``actions`` do nothing."""
        if not self.agents:
            return {}, {}, {}, {}, {}
        arr = np.array([[int(actions.get(a, NOOP)) for a in self.possible_agents]])
        obs, rewards, dones, masks = self.core.step(arr)
        done = bool(dones[0])
        out = (
            self._per_agent(obs[0]),
            {a: float(r) for a, r in zip(self.possible_agents, rewards[0])},
            dict.fromkeys(self.possible_agents, done),
            dict.fromkeys(self.possible_agents, False),
            self._infos(masks[0]),
        )
        if done:
            self.agents = []
        return out

    def _per_agent(self, values: np.ndarray) -> dict[str, np.ndarray]:
        return {a: values[i] for i, a in enumerate(self.possible_agents)}

    def _infos(self, masks: np.ndarray) -> dict[str, dict]:
        seen = bool(self.core.seen[0])
        return {
            a: {"action_mask": masks[i].astype(np.int8), "hiders_seen": seen}
            for i, a in enumerate(self.possible_agents)
        }

    def door_block_status(self, locked: bool = False) -> bool:
        """Every door of the hiders' room held a box at the end of preparation.

        Before preparation has ended the current state is reported.

        Args:
            locked: Also require those boxes to be locked by the hiders.
        """
        return bool(self.core.door_block_status(locked)[0])

    def render(self) -> np.ndarray | str | None:
        if self.render_mode is None:
            warnings.warn(
                "render() called without a render_mode; pass render_mode="
                "'rgb_array' or 'ansi' to the constructor",
                stacklevel=2,
            )
            return None
        if self.render_mode == "ansi":
            return self._ansi()
        return self._rgb()

    def _cells(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-cell names (ansi characters) and colors of the current state."""
        core = self.core
        chars = np.where(core.walls[0], "#", ".").astype("<U1")
        colors = np.where(core.walls[0][..., None], COLORS["wall"], COLORS["floor"])
        door = core.doors[0]
        if not core.walls[0, door[:, 0], door[:, 1]].any():
            chars[door[:, 0], door[:, 1]] = "D"
            colors[door[:, 0], door[:, 1]] = COLORS["door"]
        for b in range(core.n_boxes):
            y, x = core.box_pos[0, b]
            lock = int(core.box_lock[0, b])
            chars[y, x] = {UNLOCKED: "o", HIDERS: "h", SEEKERS: "s"}[lock]
            colors[y, x] = COLORS[
                {UNLOCKED: "box", HIDERS: "box_hiders", SEEKERS: "box_seekers"}[lock]
            ]
        return chars, colors

    def _ansi(self) -> str:
        core = self.core
        chars, _ = self._cells()
        for i, (y, x) in enumerate(core.agent_pos[0]):
            chars[y, x] = "H" if core.team[i] == HIDERS else "S"
        t = int(core.t[0])
        phase = "preparation" if t < core.prep_steps else ("seen" if core.seen[0] else "hidden")
        rows = ["".join(r) for r in chars]
        return "\n".join([*rows, f"step {t}/{core.max_steps} {phase}"])

    def _rgb(self) -> np.ndarray:
        core, px = self.core, CELL_PIXELS
        _, colors = self._cells()
        img = colors.astype(np.uint8).repeat(px, 0).repeat(px, 1)
        seen = core.visibility()[0][core.team == SEEKERS].any(0)
        for i, (y, x) in enumerate(core.agent_pos[0]):
            name = "seeker" if core.team[i] == SEEKERS else ("seen_hider" if seen[i] else "hider")
            img[y * px + 3 : (y + 1) * px - 3, x * px + 3 : (x + 1) * px - 3] = COLORS[name]
        return img

    def close(self) -> None:
        pass


def parallel_env(render_mode: str | None = None, **settings: Any) -> HideAndSeekEnv:
    """The registered constructor of ``hide_and_seek-v0``: ``settings`` are :class:`HideAndSeekConfig`'s fields."""
    return HideAndSeekEnv(HideAndSeekConfig(**settings), render_mode=render_mode)
