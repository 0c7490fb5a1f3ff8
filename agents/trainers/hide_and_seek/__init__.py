"""Hide-and-seek PPO self-play: one learning hider network, one seeker network.

==================  ===============================================================
:mod:`.ppo`         the trainer: config, team models, rollouts, the update (on
                    :mod:`agents.trainers.ppo_core`, the PPO every trainer shares)
:mod:`.episodes`    where the episodes run: the numpy core, or the torch core on a device
:mod:`.shaping`     optional reward bonuses (off by default)
:mod:`.evaluation`  whole episodes between frozen generations, phase rates
:mod:`.generations` train within a budget, freezing and evaluating generations
``__main__``        ``python -m agents.trainers.hide_and_seek``
==================  ===============================================================

Imports point down the table; :mod:`arena.training.hide_and_seek` builds the league on top.
"""
