"""Deprecated: moved to :mod:`agents.trainers.hide_and_seek.generations` and
:mod:`agents.trainers.hide_and_seek.evaluation`; this path re-exports them for one release."""

from agents.trainers.hide_and_seek.evaluation import (
    EpisodeResults,
    evaluate_generation,
    evaluation_actions,
    play_episodes,
)
from agents.trainers.hide_and_seek.generations import GenerationReport, train_generations
from envs.hide_and_seek.rules import HIDERS as HIDER_TEAM
from envs.hide_and_seek.rules import SEEKERS as SEEKER_TEAM

__all__ = [
    "HIDER_TEAM", "SEEKER_TEAM", "EpisodeResults", "GenerationReport", "evaluate_generation", "evaluation_actions",
    "play_episodes", "train_generations",
]
