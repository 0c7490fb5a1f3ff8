"""Ratings: how results become skill beliefs, and what the beliefs say.

* ``rating``: :class:`Rating`, the ladder's :class:`RatingEnv` (an explicit TrueSkill
  object) and the package's updates (1v1, teams, free-for-all).
* ``closed_form``: the 1v1 fast path (scalar and vectorized), equal to the package's.
* ``book``: :func:`rate_match` (the one place a result becomes ratings) and
  :class:`RatingBook` (ratings and W/D/L of a ladder, rated in waves).
* ``ranking``: rank ranges from the 95% intervals.
* ``information``: expected variance reduction of a 1v1 (what a match would teach).
"""
