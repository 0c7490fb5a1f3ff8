"""GET /envs/{env}/matches/export: a board's rated matches with their ratings as Parquet or CSV,
row for row the match log (SQLite and PostgreSQL); a GET that writes nothing."""

from __future__ import annotations

import csv
import gc
import io
import math
from typing import Any

import pyarrow.parquet as pq
import pytest

from agents.catalog import make_policy
from arena.api.state import DownloadSlots
from arena.engine import MatchEngine
from arena.engine.plan import plan_matches
from arena.ladder.recorder import record_unrated
from arena.storage.db import repositories as repo
from envs.registry import get_spec
from tests.api.helpers import API, ENV, every_row_and_key, new_user, seed_ladder

URL = f"{API}/envs/{ENV}/matches/export"
sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def expected_rows(services, env_id: str) -> list[dict[str, Any]]:
    """The rated matches of ``env_id`` as the table should hold them, from the log and the rating history."""
    spec = get_spec(env_id)
    with services.sessions() as session:
        agents = {a.key: a for a in repo.list_agents(session, env_id)}
        matches = [m for m in repo.iter_matches(session, env_id) if m.rated]
        events = {(e["match_seq"], a.id, e["role"]): e for a in agents.values()
                  for e in repo.rating_history(session, a.id)}
    rows = []
    for m in matches:
        row = {"match_seq": m.seq, "match_id": m.id, "created_at": m.created_at, "seed": m.seed,
               "league_id": m.league_id, "winner": m.winner, "termination": m.termination,
               "forfeit_seat": m.forfeit_seat}
        for seat, key in enumerate(m.seats):
            agent = agents[key]
            event = events[(m.seq, agent.id, spec.roles[spec.seat_team[seat]])]
            row |= {f"seat{seat}_agent_id": agent.id, f"seat{seat}_agent": agent.name,
                    f"seat{seat}_score": m.scores[seat], f"seat{seat}_mu": event["mu_before"],
                    f"seat{seat}_sigma": event["sigma_before"], f"seat{seat}_mu_after": event["mu_after"],
                    f"seat{seat}_sigma_after": event["sigma_after"]}
        rows.append(row)
    return rows


def record_unrated_matches(services, ids: dict[str, int], n: int) -> None:
    """``n`` unrated matches (validation-style) between random and heuristic: not in the download."""
    policies = {k: make_policy(k, ENV) for k in ("random", "heuristic")}
    with MatchEngine(time_budget_s=None) as engine:
        records = engine.play(ENV, plan_matches(list(policies), get_spec(ENV), n, seed=99), policies)
    record_unrated(services.sessions, get_spec(ENV), records, ids)


def parquet_rows(response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    return pq.read_table(io.BytesIO(response.content)).to_pylist()


def test_the_parquet_download_is_the_rated_match_log_with_its_ratings(client, services):
    ids = seed_ladder(services, ["heuristic", "random", "heuristic:epsilon=0.5"], 24)
    record_unrated_matches(services, ids, 4)
    want = expected_rows(services, ENV)
    assert len(want) == 24
    response = client.get(URL, params={"format": "parquet"})
    assert response.headers["content-type"] == "application/vnd.apache.parquet"
    assert response.headers["content-disposition"] == f'attachment; filename="{ENV}-matches.parquet"'
    table = pq.read_table(io.BytesIO(response.content))
    assert table.schema.field("created_at").type.tz == "UTC"
    assert table.to_pylist() == want
    assert all(r["seat0_sigma_after"] < r["seat0_sigma"] for r in want[:3])  # early games settle sigma
    # In parts: limit, then after = the last row's match_seq, as docs/datasets.md says.
    parts, after = [], 0
    while rows := parquet_rows(client.get(URL, params={"limit": 10, "after": after})):
        parts.append(rows)
        after = rows[-1]["match_seq"]
    assert [len(p) for p in parts] == [10, 10, 4] and [r for p in parts for r in p] == want


def test_the_csv_download_parses_to_the_same_rows(client, services):
    seed_ladder(services, ["heuristic", "random"], 12)
    want = expected_rows(services, ENV)
    response = client.get(URL, params={"format": "csv"})
    assert response.status_code == 200 and response.headers["content-type"] == "text/csv; charset=utf-8"
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == 12 and list(rows[0]) == list(want[0])
    for got, row in zip(rows, want, strict=True):
        assert got["match_id"] == row["match_id"] and int(got["seed"]) == row["seed"]
        assert got["created_at"] == row["created_at"].strftime("%Y-%m-%d %H:%M:%S.%fZ")
        assert got["winner"] == ("" if row["winner"] is None else str(row["winner"]))
        for seat in (0, 1):
            assert int(got[f"seat{seat}_agent_id"]) == row[f"seat{seat}_agent_id"]
            assert got[f"seat{seat}_agent"] == row[f"seat{seat}_agent"]
            for name in ("score", "mu", "sigma", "mu_after", "sigma_after"):
                assert math.isclose(float(got[f"seat{seat}_{name}"]), row[f"seat{seat}_{name}"], rel_tol=1e-12)


def test_an_empty_board_gives_files_with_the_columns_and_no_rows(client):
    table = pq.read_table(io.BytesIO(client.get(URL).content))
    assert table.num_rows == 0 and "seat1_sigma_after" in table.column_names
    header = client.get(URL, params={"format": "csv"}).text
    assert header.splitlines() == [",".join(f'"{c}"' for c in table.column_names)]


def test_an_anonymous_download_changes_nothing(client, services):
    seed_ladder(services, ["heuristic", "random"], 6)
    new_user(client, "ada")  # something in Redis: the sign-up limit's counters
    before = every_row_and_key(services)
    assert before["tables"]["matches"] and before["redis"]
    for fmt in ("parquet", "csv", "parquet"):
        assert client.get(URL, params={"format": fmt}).status_code == 200
    assert every_row_and_key(services) == before


@sqlite_only
@pytest.mark.parametrize(("url", "status", "says"), [
    (f"{API}/envs/chess-v9/matches/export", 404, "chess-v9"),
    (f"{URL}?format=xlsx", 422, "format"),
    (f"{URL}?limit=0", 422, "limit"),
    (f"{URL}?after=-1", 422, "after"),
])
def test_bad_requests_are_4xx_with_a_reason(client, url, status, says):
    response = client.get(url)
    assert response.status_code == status and says in response.json()["detail"]


@sqlite_only
def test_downloads_past_the_slots_are_429_and_a_dropped_stream_gives_its_slot_back(client):
    state = client.app.state.api
    slots, state.downloads = state.downloads, DownloadSlots(1)
    try:
        held = state.downloads.stream(iter([b"x"]))
        busy = client.get(URL)
        assert busy.status_code == 429 and busy.headers["retry-after"] == "10"
        del held  # never read: a client gone before the first byte
        gc.collect()
        assert client.get(URL).status_code == 200
        assert client.get(URL).status_code == 200  # a finished stream gave its slot back too
    finally:
        state.downloads = slots
