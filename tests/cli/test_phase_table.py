"""``arena league status`` shows the strategy phases per generation next to hider and seeker ratings."""

from __future__ import annotations

from rich.console import Console

from arena.cli.leagues import phase_table
from arena.training.state import LeagueDir, LeagueState
from league.evaluation.phases import PhaseTimeline
from tests.cli.test_ladder_cli import run


def timeline() -> PhaseTimeline:
    t = PhaseTimeline()
    t.add_rates(1, {"chasing": 0.75, "fort": 0.0}, episodes=100)
    t.add_rates(2, {"chasing": 0.25, "fort": 0.5}, episodes=100)
    t.add_episode(2, {"chasing": 0.0, "fort": 1.0, "ramp_use": 1.0}, match_id="m-ramp")
    t.set_rating(1, "hider", 25.0, 8.0)
    t.set_rating(1, "seeker", 24.0, 7.5)
    t.set_rating(2, "seeker", 27.25, 3.0)
    return t


def rendered(t: PhaseTimeline) -> list[list[str]]:
    console = Console(width=200, record=True)
    console.print(phase_table(t, ("hider", "seeker")))
    lines = [ln.replace("┃", "│") for ln in console.export_text().splitlines() if "│" in ln or "┃" in ln]
    return [[c.strip() for c in ln.strip("│ ").split("│")] for ln in lines]


def test_phase_table_columns_and_rows():
    header, g1, g2 = rendered(timeline())
    assert header == ["generation", "episodes", "chasing", "fort", "ramp use", "hider mu±sigma", "seeker mu±sigma"]
    assert g1 == ["1", "100", "0.75", "0.00", "-", "25.00±8.00", "24.00±7.50"]
    # Generation 2: 101 episodes; fort and ramp use first happened (*) in its recorded match.
    assert g2 == ["2", "101", f"{25 / 101:.2f}", f"{51 / 101:.2f}*", f"{1 / 101:.2f}*", "-", "27.25±3.00"]


def test_league_status_prints_the_phase_table(tmp_path):
    state = LeagueState("hs", "hide_and_seek-v0", {}, [], [], phases=timeline())
    LeagueDir(tmp_path, "hs").save_state(state)
    res = run("league", "status", "--name", "hs", data_dir=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "strategy phases" in res.stdout and "ramp use" in res.stdout and "27.25±3.00" in res.stdout
    assert "first ramp_use: generation 2, match m-ramp" in res.stdout
