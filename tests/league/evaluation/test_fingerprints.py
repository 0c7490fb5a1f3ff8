"""Clone fingerprints, the pure part: masked probabilities, agreement and KL (golden numbers),
near-duplicates by both thresholds, flags across owners and families within one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from league.evaluation.fingerprints import (
    PROB_FLOOR,
    CloneThresholds,
    clone_report,
    masked_probabilities,
    near_duplicates,
    similarity,
)


def test_masked_probabilities_are_a_softmax_over_the_legal_actions():
    logits = np.array([[1.0, 2.0, 3.0], [0.0, np.nan, 5.0], [np.inf, 0.0, 0.0], [1.0, 1.0, 1.0]])
    masks = np.array([[True, True, False], [True, False, True], [True, True, False], [False, False, False]])
    p = masked_probabilities(logits, masks)
    e = math.e
    assert p[0] == pytest.approx([1 / (1 + e), e / (1 + e), 0.0])
    assert p[1] == pytest.approx([1 / (1 + e**5), 0.0, e**5 / (1 + e**5)])  # an illegal NaN does not matter
    assert p[2] == pytest.approx([0.5, 0.5, 0.0])  # a non-finite legal logit: uniform over the legal ones
    assert p[3].tolist() == [0.0, 0.0, 0.0]  # no legal action
    with pytest.raises(ValueError, match="same"):
        masked_probabilities(logits[:, :2], masks)


def test_similarity_golden_numbers():
    p = np.array([[0.7, 0.2, 0.1], [0.5, 0.5, 0.0]])
    q = np.array([[0.6, 0.3, 0.1], [0.1, 0.9, 0.0]])
    agreement, kl = similarity(p, q)
    # Position 1: same best action. Position 2: q's best (1) is, for p, tied with p's best
    # (0.5 = 0.5), but p's best (0) is far from q's: not the same best action.
    assert agreement == 0.5
    first = 0.5 * (0.1 * math.log(0.7 / 0.6) + -0.1 * math.log(0.2 / 0.3))
    second = 0.5 * (0.4 * math.log(0.5 / 0.1) + -0.4 * math.log(0.5 / 0.9))
    assert kl == pytest.approx((first + second) / 2, rel=1e-12)
    assert similarity(p, p) == (1.0, 0.0)


def test_a_near_tie_is_the_same_best_action_and_zero_tails_are_floored():
    p = np.array([[0.5, 0.4999, 0.0001]])
    q = np.array([[0.4999, 0.5, 0.0001]])
    assert similarity(p, q)[0] == 1.0  # best actions 0 and 1 are within 1% of each other for both
    sharp, tail = np.array([[1.0, 0.0]]), np.array([[0.9, 0.1]])
    expected = 0.5 * (0.1 * math.log(1.0 / 0.9) + 0.1 * math.log(0.1 / PROB_FLOOR))
    assert similarity(sharp, tail)[1] == pytest.approx(expected)


def test_near_duplicates_need_both_agreement_and_a_small_kl():
    rng = np.random.default_rng(0)
    masks = rng.random((300, 7)) < 0.7
    masks[:, 3] = True
    base = rng.normal(size=(300, 7)) * 3
    fps = {
        1: masked_probabilities(base, masks),
        2: masked_probabilities(base + rng.normal(size=base.shape) * 1e-3, masks),  # a copy
        3: masked_probabilities(rng.normal(size=base.shape) * 3, masks),  # another policy
        # Same best moves, flatter distribution: agreement 1 but a large KL.
        4: masked_probabilities(base / 4, masks),
    }
    found = near_duplicates(fps)
    assert [(s.a, s.b) for s in found] == [(1, 2)]
    assert found[0].agreement == 1.0 and found[0].mean_kl < 1e-5 and found[0].positions == 300
    _, kl_flat = similarity(fps[1], fps[4])
    assert kl_flat > 0.1
    loose = near_duplicates(fps, CloneThresholds(min_agreement=0.99, max_kl=2 * kl_flat))
    assert {(s.a, s.b) for s in loose} == {(1, 2), (1, 4), (2, 4)}
    assert near_duplicates({1: fps[1]}) == []


def test_clone_report_flags_other_owners_and_joins_one_owners_versions():
    same = np.array([[0.9, 0.1], [0.2, 0.8]])
    other = np.array([[0.1, 0.9], [0.8, 0.2]])
    fps = {1: same, 2: same, 3: same, 4: same, 5: other, 6: other, 7: same}
    owners = {1: "ada", 2: "ada", 3: "bob", 4: "ada", 5: "ada", 6: "cy", 7: None}
    report = clone_report(near_duplicates(fps), owners)
    assert {(s.a, s.b) for s in report.flags} == {(1, 3), (2, 3), (3, 4), (1, 7), (2, 7), (3, 7), (4, 7), (5, 6)}
    [family] = report.families
    assert family.owner == "ada" and family.members == (1, 2, 4)
    assert {(s.a, s.b) for s in family.links} == {(1, 2), (1, 4), (2, 4)}
    assert all(s.agreement == 1.0 and s.mean_kl == 0.0 for s in report.flags)
