"""Evaluation: what a board of played matches says beyond the ratings (docs/evaluation.md).

* ``headtohead`` (the counts every measure starts from) and ``significance`` (shared tests).
* ``payoff`` (win-rate matrices, Nash mixtures), ``nash_averaging``, ``alpharank`` and
  ``board_rankings`` (the three rankings side by side).
* ``cycles`` (is the board a ladder?), ``seats`` (the first move's worth).
* ``integrity`` and ``rating_dependence`` (thrown games), ``fingerprints`` (clones).
* ``phases``: a training league's behaviour phases per generation.
"""
