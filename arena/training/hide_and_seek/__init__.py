"""The hide-and-seek league, one module per concern.

==================  ===============================================================
:mod:`.config`      league settings, the trainer's defaults (rewards: team or shaped)
:mod:`.pools`       hider and seeker populations: per-role snapshot pools, PFSP
:mod:`.evaluation`  phase rates per generation, the ramp stage, TrueSkill per role
:mod:`.state`       the versioned saved state (and the reader of earlier versions)
:mod:`.league`      :class:`~.league.HideAndSeekLeague`: generations from those parts
:mod:`.service`     the league on the services: agents, replays, the web timeline
==================  ===============================================================

The curriculum's rules are the env's (:mod:`envs.hide_and_seek.curriculum`), the trainer
is :mod:`agents.trainers.hide_and_seek`; arrows point one way (arena -> league -> agents -> envs).
"""
