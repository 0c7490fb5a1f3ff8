"""Planned hide-and-seek teams: is a strategy possible at all within the game's timing?

==================  ===============================================================
:mod:`.model`       a planning copy of v1's rules for the hiders (stepped beside the core in the tests)
:mod:`.bounds`      admissible bounds of the remaining steps (fort, ramp)
:mod:`.planner`     exact A* per hider, a team planned one hider around the other
:mod:`.feasibility` the plans played in the real core, whose detectors decide
==================  ===============================================================

The trainer lives in :mod:`agents.trainers.hide_and_seek`, the rules in :mod:`envs.hide_and_seek`.
"""
