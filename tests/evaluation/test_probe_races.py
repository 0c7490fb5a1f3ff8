"""Probe quotas hold when requests race (issue 29 item 5): 20 requests at once against a live
server, on SQLite and PostgreSQL, never pass the per-user quotas and never make two probes of
one agent at one budget."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from arena.core.settings import Settings
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from tests.api.helpers import RAISED_LIMITS
from tests.client.live import serving
from tests.races import race

API = "/api/v1"
ENV = "connect_four-v3"
QUEUED_PER_USER = 3
PER_DAY = 5
RACERS = 20


@dataclass
class Live:
    url: str
    services: Services


@pytest.fixture
def live(tmp_path: Path, migrated_db_url: str, redis_url: str) -> Iterator[Live]:
    settings = Settings(page_cache_s=0.0, data_dir=tmp_path / "server", database_url=migrated_db_url,
                        redis_url=redis_url, probes_queued_per_user=QUEUED_PER_USER,
                        probes_per_user_per_day=PER_DAY, **RAISED_LIMITS)
    with serving(settings) as (url, services):
        yield Live(url, services)


def _user(live: Live, name: str) -> dict[str, str]:
    r = httpx.post(f"{live.url}{API}/users", json={"name": name})
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


def _agents(live: Live, auth: dict[str, str], n: int) -> list[int]:
    ids = []
    for k in range(n):
        r = httpx.post(f"{live.url}{API}/agents/connected", json={"env": ENV, "name": f"racer-{k}"}, headers=auth)
        assert r.status_code in (200, 201), r.text
        ids.append(r.json()["id"])
    return ids


def _race(live: Live, auth: dict[str, str], agent_ids: list[int]) -> Counter:
    """``POST /agents/{id}/probes`` for each of ``agent_ids``, all at once; the status codes."""
    def ask(agent_id: int) -> int:
        with httpx.Client(base_url=live.url, headers=auth, timeout=60) as client:
            return client.post(f"{API}/agents/{agent_id}/probes", json={"budget_env_steps": 20000}).status_code

    return Counter(race([functools.partial(ask, a) for a in agent_ids]))


def _requested(session, name: str) -> list[repo.ProbeInfo]:
    """Every probe ``name`` asked for."""
    return [p for status in ("queued", "running", "done", "failed")
            for p in repo.probes_by_status(session, status) if p.requested_by == name]


def test_racing_requests_never_pass_the_queued_or_the_daily_quota(live):
    auth = _user(live, "racer")
    agents = _agents(live, auth, RACERS)

    codes = _race(live, auth, agents)
    assert codes == Counter({202: QUEUED_PER_USER, 429: RACERS - QUEUED_PER_USER})
    with live.services.sessions() as session:
        queued = _requested(session, "racer")
        assert len(queued) == QUEUED_PER_USER and {p.status for p in queued} == {"queued"}
        assert repo.count_requested_probes(session, "racer", open_only=True) == QUEUED_PER_USER

    # Those end (failed: a failed probe may be asked for again), so only the daily quota is left.
    live.services.sessions.write_transaction(
        lambda s: [repo.fail_probe(s, p.id, "ended by the test") for p in queued], what="failing")
    codes = _race(live, auth, agents)
    assert codes == Counter({202: PER_DAY - QUEUED_PER_USER, 429: RACERS - (PER_DAY - QUEUED_PER_USER)})
    with live.services.sessions() as session:
        assert len(_requested(session, "racer")) == PER_DAY  # the day's quota, exactly
        assert repo.count_requested_probes(session, "racer", open_only=True) == PER_DAY - QUEUED_PER_USER


def test_racing_requests_for_one_agent_at_one_budget_make_one_probe(live):
    auth = _user(live, "twin")
    [agent_id] = _agents(live, auth, 1)

    codes = _race(live, auth, [agent_id] * RACERS)
    assert codes == Counter({202: 1, 200: RACERS - 1})  # one queued, the others answered with it
    with live.services.sessions() as session:
        [probe] = _requested(session, "twin")
        assert (probe.agent_id, probe.budget_env_steps, probe.status) == (agent_id, 20000, "queued")
