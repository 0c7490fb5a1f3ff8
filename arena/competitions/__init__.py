"""Competitions on the service: seasons with deadlines, teams and quotas, a board of their own,
and a final evaluation whose ranks are certified.

- ``rules``: the settings a competition is created with, what may change once it opens,
  its states, the daily quota's window and Kaggle's merge rule (pure).
- ``service``: who may see and organize a competition; creating, changing, opening, joining.
- ``teams``, ``entries``: teams (create, join, merge) and entries (the daily quota, the
  submission path's tag, connected entries): each one transaction whose gating counts are
  checked under a lock.
- ``season``: a competition's board, played by the background service with the ladder's
  pacer, dispatch and recorder (board key ``competition:<id>``).
- ``final``: the final evaluation driver (frozen pool, ratings from the prior, batches from
  :mod:`league.competitions.final_schedule` until :mod:`league.competitions.certification`
  certifies, or the budget or the end date stops it), resumable from the match log.
- ``tournaments``, ``tournament_games``: tournaments among chosen agents or a competition's
  top N (created by organizers, derived from their recorded games on board ``tournament:<id>``)
  and their games, each an item of the durable queue played by the background service.

The pure parts (certification, schedules, tournaments, divisions) are :mod:`league.competitions`.
"""
