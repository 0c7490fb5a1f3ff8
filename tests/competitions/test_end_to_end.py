"""A background service SIGKILLed during a competition's final evaluation, against a live arena
(SQLite and PostgreSQL): the next service resumes it, and nothing is lost or recorded twice.

The API is served live by the test; the service runs in a process of its own
(:mod:`tests.competitions.service_process`) whose runner hangs on a final-evaluation batch once
:data:`HANG_AFTER` of its matches are recorded, so the kill lands while that batch is queued
and unplayed. A second service process replays it (its ids and seeds) and plays on to
certification: every match id once, the published count equal to the log's, the queue empty,
the final board's ratings rebuilt from the log equal to the live ones, and ``arena competition
verify`` (the real CLI) equal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from arena.client import ArenaClient
from arena.competitions.rules import final_board_key
from arena.ladder.dispatch import queue_lane
from arena.ladder.recorder import rebuild_ratings
from arena.storage.db import repositories as repo
from envs.registry import get_spec
from league.competitions.certification import FINAL_RATING_ENV
from tests.client.live import run_cli
from tests.competitions.end_to_end import (
    ADMIN_TOKEN,
    ENV,
    entry,
    live_arena,
    post_entry,
    release,
    season_held_open,
    service,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.slow
SEASON_S = 5
"""From creation to the deadline, held open (:func:`season_held_open`, this its margin) while three entries
are submitted and validated: after them, the season ends at most about this long later (one second more).
The margin is a stall of five seconds of the holder's thread (50 of its polls in a row) at the worst
moment: far beyond a loaded machine's scheduling delays, and each second of it is waited out."""
HANG_AFTER = 48
"""Final-evaluation matches recorded before the service hangs (three batches of 16)."""


def _final_state(arena, cid: int) -> tuple[list[str], set[str]]:
    """The final board's recorded match ids (log order) and the ids queued in its lane."""
    board = final_board_key(cid)
    with arena.services.sessions() as session:
        recorded = [m.id for m in repo.iter_matches(session, env_id=ENV, board=board)]
        queued = {q.match_id for q in repo.queued_matches(session, ENV) if queue_lane(q.batch_key) == board}
    return recorded, queued


def test_a_service_killed_in_the_final_evaluation_resumes_it_exactly_once(tmp_path: Path, redis_url: str,
                                                                          db_url: str) -> None:
    # The doomed service starts up (imports) while the users and the competition are made.
    with live_arena(tmp_path, redis_url, db_url) as arena, service(arena, hang_after=HANG_AFTER) as doomed:
        url = arena.url
        with ArenaClient(url, token="") as anonymous:
            tokens = {n: anonymous.create_user(n)["token"] for n in ("ann", "ben", "cat")}
        now = datetime.now(UTC)
        deadline = now + timedelta(seconds=SEASON_S)
        with ArenaClient(url, token=ADMIN_TOKEN) as admin:
            cid = admin.create_competition({
                "env": ENV, "title": "Kill cup", "opens_at": (now - timedelta(minutes=1)).isoformat(),
                "deadline": deadline.isoformat(), "top_k": 2, "final_floor": 6, "tie_margin": 0.2,
                "final_match_budget": 3000}, open_now=True)["id"]
        pool = []
        # The admin extends the deadline while the entries are sent and validated, however slow the machine.
        with season_held_open(url, ADMIN_TOKEN, cid, SEASON_S) as season:
            for k, name in enumerate(tokens):
                with ArenaClient(url, token=tokens[name]) as client:
                    client.create_team(cid, f"team-{name}")
                sent = post_entry(url, tokens[name], cid, *entry(k + 1, strong=k == 0), f"{name}-entry")
                assert sent.status_code == 201, sent.text
                pool.append(sent.json()["agent"]["id"])
            wait_for("the entries' validation", lambda: all(
                httpx.get(f"{url}/api/v1/agents/{a}").json()["status"] in ("placement", "rated") for a in pool),
                timeout_s=120, procs=[doomed])
        assert season.deadline >= deadline  # extended or not, never brought forward

        # Its successor starts up (imports) while the season ends and the final is played; it plays only
        # once released, after the kill.
        with service(arena, gated=True) as successor:
            # The service hangs on a queued final batch after HANG_AFTER matches: killed there.
            def hanging():
                recorded, queued = _final_state(arena, cid)
                return (recorded, queued) if len(recorded) >= HANG_AFTER and queued else None
            before, lost = wait_for("the final evaluation's hanging batch", hanging, timeout_s=SEASON_S + 60,
                                    procs=[doomed])
            # Past the deadline, during the final evaluation: a submission is refused, saying why; nothing stored.
            stored = arena.stored_agents()
            late = post_entry(url, tokens["cat"], cid, *entry(9), "cat-late")
            assert late.status_code == 409 and "deadline of competition" in late.json()["detail"], late.text
            assert f"passed at {season.deadline.isoformat()}" in late.json()["detail"]  # the extended one
            with ArenaClient(url) as reader:
                assert arena.stored_agents() == stored and len(reader.entries(cid)["data"]) == 3
            doomed.kill()
            doomed.wait(timeout=30)
            with ArenaClient(url) as reader:
                assert reader.competition(cid)["state"] == "final"
            assert _final_state(arena, cid) == (before, lost)  # the kill lost nothing recorded

            release(successor)
            wait_for("the final evaluation to end", lambda: httpx.get(
                f"{url}/api/v1/competitions/{cid}").json()["state"] == "finished", timeout_s=120,
                procs=[successor])
        recorded, queued = _final_state(arena, cid)
        with ArenaClient(url) as reader:
            published = reader.standings(cid)
            frozen = sorted(e["agent_id"] for e in reader.entries(cid)["data"] if e["frozen"])
        result = published["result"]
        assert frozen == sorted(pool) and result["stopped"] == "certified", result["stopped"]
        assert recorded[:len(before)] == before  # nothing recorded before the kill changed
        assert set(recorded[len(before):len(before) + len(lost)]) == lost  # the lost batch, replayed first
        assert len(recorded) == len(set(recorded)) == result["matches"] == published["matches"]
        assert sum(s["games"] for s in result["standings"]) == 2 * len(recorded)
        assert queued == set()
        assert rebuild_ratings(arena.services.sessions, get_spec(ENV), board=final_board_key(cid),
                               rating_env=FINAL_RATING_ENV).equal
        home = tmp_path / "home"
        home.mkdir()
        verified = run_cli("competition", "verify", str(cid), home=home, server=url)
        assert verified.returncode == 0 and "equal" in verified.stdout and "NOT" not in verified.stdout, \
            verified.stdout + verified.stderr
