"""Strategy phases per generation: rates are means, first occurrences need a replayable match."""

from __future__ import annotations

import json

import pytest

from league.evaluation.phases import HAPPENED, ExploiterEntry, PhaseTimeline, order_phases


def test_rates_are_means_of_the_episode_values():
    t = PhaseTimeline()
    t.add_episode(1, {"chasing": 0.5, "fort": 1.0})
    t.add_episode(1, {"chasing": 0.25, "fort": 0.0})
    t.add_episode(2, {"chasing": 1.0})
    assert t.record(1).rates == {"chasing": 0.375, "fort": 0.5}
    assert t.record(2).rates == {"chasing": 1.0}
    assert [r.generation for r in t.rows()] == [1, 2]


def test_trainer_rates_merge_weighted_by_episodes():
    t = PhaseTimeline()
    t.add_episode(3, {"fort": 1.0})
    t.add_rates(3, {"fort": 0.5, "ramp_use": 0.2}, episodes=9)
    rec = t.record(3)
    assert rec.episodes == 10
    assert rec.rates["fort"] == pytest.approx((1.0 + 4.5) / 10)
    assert rec.rates["ramp_use"] == pytest.approx(0.18)


def test_first_occurrence_is_the_earliest_generation_with_a_recorded_match():
    t = PhaseTimeline()
    t.add_episode(5, {"fort": 1.0}, match_id="m5")
    t.add_episode(4, {"fort": HAPPENED - 0.01}, match_id="m4-below")  # did not happen
    t.add_episode(3, {"fort": 1.0})  # happened, but no replay to link to
    t.add_episode(2, {"fort": 1.0}, match_id="m2")
    t.add_episode(2, {"fort": 1.0}, match_id="m2-later")  # same generation: the first one stays
    t.add_rates(1, {"fort": 1.0}, episodes=5)  # trainer counts carry no match
    first = t.firsts["fort"]
    assert (first.generation, first.match_id, first.value) == (2, "m2", 1.0)


def test_ratings_and_phases_survive_json():
    t = PhaseTimeline()
    t.add_episode(1, {"ramp_defense": 1.0, "chasing": 0.75, "zeta": 0.0}, match_id="a")
    t.set_rating(1, "hider", 27.5, 3.25)
    t.set_rating(2, "seeker", 22.0, 4.0)
    back = PhaseTimeline.from_json(json.loads(json.dumps(t.to_json())))
    assert back == t
    assert back.phases == ["chasing", "ramp_defense", "zeta"]
    assert back.record(2).episodes == 0 and back.record(2).rates == {}
    assert back.record(1).ratings == {"hider": [27.5, 3.25]}


def test_exploiters_survive_json_and_an_old_timeline_without_them_loads():
    t = PhaseTimeline()
    t.set_rating(3, "hider", 25.0, 8.0)
    # a trainer's event as JSON: its own extra fields are dropped, an empty snapshot is no snapshot
    t.set_exploiters(3, [{"role": "hider", "index": 0, "score": 0.75, "edge": 0.25, "snapshot": "x0",
                          "reset": False, "extra": 1},
                         {"role": "seeker", "index": 0, "score": 0.5, "edge": -0.125, "snapshot": "",
                          "reset": True}])
    assert t.record(3).exploiters == [ExploiterEntry("hider", 0, 0.75, 0.25, "x0", False),
                                      ExploiterEntry("seeker", 0, 0.5, -0.125, None, True)]
    saved = json.loads(json.dumps(t.to_json()))
    assert PhaseTimeline.from_json(saved) == t
    for g in saved["generations"]:  # a timeline saved before exploiters
        del g["exploiters"]
    old = PhaseTimeline.from_json(saved)
    assert old.record(3).exploiters == [] and old.record(3).ratings == {"hider": [25.0, 8.0]}


def test_values_outside_unit_interval_are_refused():
    t = PhaseTimeline()
    with pytest.raises(ValueError, match="outside"):
        t.add_episode(1, {"fort": 1.5})
    with pytest.raises(ValueError, match="episodes"):
        t.add_rates(1, {"fort": 0.5}, episodes=0)
    with pytest.raises(ValueError, match="generation"):
        t.record(-1)


def test_known_phases_come_in_the_order_they_emerge():
    assert order_phases({"b", "ramp_defense", "fort", "a", "chasing", "ramp_use"}) == [
        "chasing", "fort", "ramp_use", "ramp_defense", "a", "b"]
