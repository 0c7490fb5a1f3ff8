"""Torch cores of the built-in games: batched tensor programs on ``cpu`` or ``cuda``.

:mod:`envs.device.boards` holds connect four and tictactoe, :mod:`envs.hide_and_seek.device.core`
hide-and-seek-v0 and :mod:`envs.hide_and_seek.device.core_v1` hide-and-seek-v1. Each mirrors a
numpy core (and so a PettingZoo env) exactly and is checked against it by a differential
test over 10,000 random games.
"""
