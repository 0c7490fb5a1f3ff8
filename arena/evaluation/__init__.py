"""Evaluation beyond the rating, wired into the service: exploitability probes run in the
background (:mod:`~arena.evaluation.probes`); clone fingerprints of snapshots on seeded
positions (:mod:`~arena.evaluation.fingerprint_positions`,
:mod:`~arena.evaluation.fingerprints`); the measures themselves are pure, in ``league/``
and ``agents/trainers/exploit_probe.py`` (see docs/evaluation.md)."""
