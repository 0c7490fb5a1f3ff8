"""The environments Arena ships with.

Version history:
    connect_four-v3, tictactoe-v3, rps-v2: PettingZoo 1.27 classic envs of the same ids.
    simple_tag-v3: mpe2's predator-prey (3 predators, 1 prey, 2 obstacles, 25 cycles);
        predators win the match if they tagged the prey at least once.
    hide_and_seek-v1: hide-and-seek with ramps on the quadrant layout (hide_and_seek-v0 unchanged).

Plain data: :mod:`envs.registry` imports :data:`BUILTIN_ENVS` and registers them when it
loads; this module imports nothing of the registry.
"""

from __future__ import annotations

from typing import Any

from envs.spec import EnvEntry, EnvSpec


def _two_player(entry_point: str, env_id: str, seats: tuple[str, str], num_actions: int,
                obs_shape: tuple[int, ...], step_limit: int, description: str,
                vector_core: str | None = None, **spec: object) -> EnvEntry:
    """A PettingZoo classic game of two players, one a team, both in the role ``player``."""
    return EnvEntry(
        entry_point=entry_point,
        spec=EnvSpec(env_id=env_id, seats=seats, teams=((0,), (1,)), roles=("player", "player"),
                     num_actions=num_actions, obs_shapes=(obs_shape, obs_shape), step_limit=step_limit,
                     description=description, **spec),
        vector_core=vector_core,
    )


def _hide_and_seek(entry_point: str, env_id: str, obs_size: int, description: str, size: int,
                   **config: Any) -> EnvEntry:
    """A grid hide-and-seek env: 2 hiders against 2 seekers (and 2 boxes); ``config`` the rest of its
    settings, ``max_steps`` among them."""
    return EnvEntry(
        entry_point=entry_point,
        spec=EnvSpec(
            env_id=env_id,
            seats=("hider_0", "hider_1", "seeker_0", "seeker_1"),
            teams=((0, 1), (2, 3)),
            roles=("hider", "seeker"),
            num_actions=7,
            obs_shapes=((obs_size,),) * 4,
            api="parallel",
            outcome="higher_score",
            step_limit=4 * config["max_steps"],
            kwargs={"size": size, "n_hiders": 2, "n_seekers": 2, "n_boxes": 2, **config},
            description=description,
        ),
    )


BUILTIN_ENVS: tuple[EnvEntry, ...] = (
    _two_player("pettingzoo.classic.connect_four_v3:env", "connect_four-v3", ("player_0", "player_1"),
                7, (6, 7, 2), 42, "Connect Four, 6x7, two players alternate dropping pieces.",
                vector_core="envs.connect_four:ConnectFourCore"),
    _two_player("pettingzoo.classic.tictactoe_v3:env", "tictactoe-v3", ("player_1", "player_2"),
                9, (3, 3, 2), 9, "Tic-Tac-Toe, 3x3.", vector_core="envs.tictactoe:TicTacToeCore"),
    _two_player("pettingzoo.classic.rps_v2:env", "rps-v2", ("player_0", "player_1"), 3, (), 2 * 15,
                "Rock-paper-scissors, 15 simultaneous rounds; observation = opponent's last move.",
                kwargs={"num_actions": 3, "max_cycles": 15}),
    EnvEntry(
        entry_point="mpe2.simple_tag_v3:parallel_env",
        spec=EnvSpec(
            env_id="simple_tag-v3",
            seats=("adversary_0", "adversary_1", "adversary_2", "agent_0"),
            teams=((0, 1, 2), (3,)),
            roles=("predator", "prey"),
            num_actions=5,
            obs_shapes=((16,), (16,), (16,), (14,)),
            api="parallel",
            outcome="first_team_if_positive",
            step_limit=4 * 25,
            kwargs={"num_good": 1, "num_adversaries": 3, "num_obstacles": 2, "max_cycles": 25},
            description="MPE predator-prey: 3 predators chase 1 prey for 25 steps.",
        ),
    ),
    _hide_and_seek("envs.hide_and_seek.env:parallel_env", "hide_and_seek-v0", 493,
                   "Grid hide-and-seek, 2 hiders vs 2 seekers, boxes to push and lock, 60 steps (40% preparation).",
                   size=15, max_steps=60),
    _hide_and_seek("envs.hide_and_seek.env_v1:parallel_env", "hide_and_seek-v1", 575,
                   "Grid hide-and-seek with a ramp: quadrant room, 2 hiders vs 2 seekers, 2 boxes, "
                   "1 ramp to climb walls with, 50 steps (40% preparation).",
                   size=9, n_ramps=1, max_steps=50, layout="quadrant"),
)

BUILTIN_ENV_IDS: tuple[str, ...] = tuple(sorted(entry.spec.env_id for entry in BUILTIN_ENVS))
"""The ids declared above, sorted (third-party envs are registered later, by import path)."""
