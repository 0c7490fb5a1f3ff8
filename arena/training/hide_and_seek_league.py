"""Deprecated: moved to :mod:`arena.training.hide_and_seek` (league, config, pools, evaluation,
state); this path re-exports it for one release."""

from arena.training.hide_and_seek.config import SHAPING, HideAndSeekLeagueConfig, default_v1_ppo
from arena.training.hide_and_seek.evaluation import GenerationSummary, generation_key, rate_generations
from arena.training.hide_and_seek.league import HideAndSeekLeague
from arena.training.hide_and_seek.pools import OTHER

__all__ = [
    "OTHER", "SHAPING", "GenerationSummary", "HideAndSeekLeague", "HideAndSeekLeagueConfig", "default_v1_ppo",
    "generation_key", "rate_generations",
]
