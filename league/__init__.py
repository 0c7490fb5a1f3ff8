"""The brains, pure: plain values and an ``rng`` in, no SQL, no HTTP, no clock.

* ``ratings/``: TrueSkill ratings, the closed-form fast path, the rating book.
* ``scheduling/``: who plays whom next (the ladder's scheduler, matchmaking, league roles).
* ``evaluation/``: what a board says beyond its ratings (payoff, alpha-Rank, cycles, ...).
* ``competitions/``: final evaluations, tournaments, divisions.
"""
