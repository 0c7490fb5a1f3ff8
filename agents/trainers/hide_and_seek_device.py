"""Deprecated: moved to :mod:`agents.trainers.hide_and_seek.episodes`; this path re-exports it for one release."""

from agents.trainers.hide_and_seek.episodes import CURRICULUM, DeviceEpisodes, HostEpisodes

__all__ = ["CURRICULUM", "DeviceEpisodes", "HostEpisodes"]
