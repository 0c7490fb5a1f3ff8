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

from envs.spec import EnvEntry, EnvSpec

BUILTIN_ENVS: tuple[EnvEntry, ...] = (
    EnvEntry(
        entry_point="pettingzoo.classic.connect_four_v3:env",
        spec=EnvSpec(
            env_id="connect_four-v3",
            seats=("player_0", "player_1"),
            teams=((0,), (1,)),
            roles=("player", "player"),
            num_actions=7,
            obs_shapes=((6, 7, 2), (6, 7, 2)),
            step_limit=42,
            description="Connect Four, 6x7, two players alternate dropping pieces.",
        ),
        vector_core="envs.connect_four:ConnectFourCore",
    ),
    EnvEntry(
        entry_point="pettingzoo.classic.tictactoe_v3:env",
        spec=EnvSpec(
            env_id="tictactoe-v3",
            seats=("player_1", "player_2"),
            teams=((0,), (1,)),
            roles=("player", "player"),
            num_actions=9,
            obs_shapes=((3, 3, 2), (3, 3, 2)),
            step_limit=9,
            description="Tic-Tac-Toe, 3x3.",
        ),
        vector_core="envs.tictactoe:TicTacToeCore",
    ),
    EnvEntry(
        entry_point="pettingzoo.classic.rps_v2:env",
        spec=EnvSpec(
            env_id="rps-v2",
            seats=("player_0", "player_1"),
            teams=((0,), (1,)),
            roles=("player", "player"),
            num_actions=3,
            obs_shapes=((), ()),
            step_limit=2 * 15,
            kwargs={"num_actions": 3, "max_cycles": 15},
            description="Rock-paper-scissors, 15 simultaneous rounds; observation = opponent's last move.",
        ),
    ),
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
    EnvEntry(
        entry_point="envs.hide_and_seek.env:parallel_env",
        spec=EnvSpec(
            env_id="hide_and_seek-v0",
            seats=("hider_0", "hider_1", "seeker_0", "seeker_1"),
            teams=((0, 1), (2, 3)),
            roles=("hider", "seeker"),
            num_actions=7,
            obs_shapes=((493,),) * 4,
            api="parallel",
            outcome="higher_score",
            step_limit=4 * 60,
            kwargs={"size": 15, "n_hiders": 2, "n_seekers": 2, "n_boxes": 2, "max_steps": 60},
            description="Grid hide-and-seek, 2 hiders vs 2 seekers, boxes to push and lock, "
            "60 steps (40% preparation).",
        ),
    ),
    EnvEntry(
        entry_point="envs.hide_and_seek.env_v1:parallel_env",
        spec=EnvSpec(
            env_id="hide_and_seek-v1",
            seats=("hider_0", "hider_1", "seeker_0", "seeker_1"),
            teams=((0, 1), (2, 3)),
            roles=("hider", "seeker"),
            num_actions=7,
            obs_shapes=((575,),) * 4,
            api="parallel",
            outcome="higher_score",
            step_limit=4 * 50,
            kwargs={"size": 9, "n_hiders": 2, "n_seekers": 2, "n_boxes": 2, "n_ramps": 1, "max_steps": 50,
                    "layout": "quadrant"},
            description="Grid hide-and-seek with a ramp: quadrant room, 2 hiders vs 2 seekers, 2 boxes, "
            "1 ramp to climb walls with, 50 steps (40% preparation).",
        ),
    ),
)

BUILTIN_ENV_IDS: tuple[str, ...] = tuple(sorted(entry.spec.env_id for entry in BUILTIN_ENVS))
"""The ids declared above, sorted (third-party envs are registered later, by import path)."""
