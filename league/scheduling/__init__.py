"""Scheduling: who plays whom next, on the ladder and in training leagues.

* ``scheduler``: the ladder's :class:`LadderScheduler` (phases active, check, settled).
* ``lineups``: a batch of line-ups chosen for expected information.
* ``matchmaking``: match quality, the ladder's pair sampling, PFSP weights and the
  decayed :class:`WinRateTable`.
* ``roles``: AlphaStar's league roles and their opponent distributions.
* ``outside_draws``: the opponent draws of a league trained outside Arena (league API).
"""
