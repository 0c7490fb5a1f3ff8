"""Deprecated: moved to :mod:`agents.trainers.hide_and_seek.ppo`; this path re-exports it for one release.

``python -m agents.trainers.ppo_hide_and_seek`` still runs the trainer's command line
(now ``python -m agents.trainers.hide_and_seek``).
"""

from agents.trainers.hide_and_seek.__main__ import main
from agents.trainers.hide_and_seek.ppo import (
    ENV_ID,
    ENV_IDS,
    HideAndSeekPPO,
    HideAndSeekPPOConfig,
    Rollout,
    StateDict,
    TeamModel,
    UpdateStats,
    make_core,
    team_rewards,
)
from agents.trainers.ppo_core import masked_sample
from envs.hide_and_seek.rules import ROLES

__all__ = [
    "ENV_ID", "ENV_IDS", "ROLES", "HideAndSeekPPO", "HideAndSeekPPOConfig", "Rollout", "StateDict", "TeamModel",
    "UpdateStats", "main", "make_core", "masked_sample", "team_rewards",
]

if __name__ == "__main__":
    main()
