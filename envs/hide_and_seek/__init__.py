"""Hide-and-seek, one package per layer (``hide_and_seek-v0`` and ``hide_and_seek-v1``).

=====================  ===========================================================
:mod:`.rules`          action, team and role ids, observation layout, phases: once
:mod:`.config`         each version's settings (frozen): what cores and envs take
:mod:`.layouts`        v0's grids: random rooms, hand-drawn layouts, line of sight
:mod:`.layouts_v1`     v1's quadrant and random-room layouts with ramps
:mod:`.curriculum`     start-state curriculum (where training episodes start)
:mod:`.core`           v0's numpy core, many episodes at once
:mod:`.core_v1`        v1's numpy core (ramps, pushing) and its phase detectors: the reference
:mod:`.kernels_v1`     v1's step, masks, sight and observations compiled (numba)
:mod:`.compiled_v1`    v1's compiled core (the default on the host) and ``v1_core``, where v1
                       cores are built
:mod:`.env`            v0's PettingZoo ``ParallelEnv`` (a core of one episode)
:mod:`.env_v1`         v1's PettingZoo env (the compiled core)
:mod:`.device`         the torch cores (``cpu`` or ``cuda``), step for step the numpy ones
=====================  ===========================================================

Arrows point down the table: rules, config <- layouts <- cores <- envs; nothing here imports a
trainer or a league. The package itself imports nothing: import the layer you need.
"""
