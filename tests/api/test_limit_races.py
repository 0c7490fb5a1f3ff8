"""The Redis limits hold when requests race (issue 29 item 5): 20 requests at once against a
live server, on SQLite and PostgreSQL. Challenges in flight and submissions per day are never
passed, and nothing refused is stored or stays counted."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from arena.core.settings import Settings
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from tests.api.helpers import API, ENV, RAISED_LIMITS, checkpoint, seed_ladder, upload
from tests.client.live import serving
from tests.races import race

IN_FLIGHT = 2
PER_DAY = 3
RACERS = 20


@pytest.fixture
def live(tmp_path: Path, migrated_db_url: str, redis_url: str) -> Iterator[tuple[str, Services]]:
    limits = {**RAISED_LIMITS, "challenges_in_flight": IN_FLIGHT, "submissions_per_day": PER_DAY}
    settings = Settings(page_cache_s=0.0, data_dir=tmp_path / "server", database_url=migrated_db_url,
                        redis_url=redis_url, **limits)
    with serving(settings) as live:
        yield live


def _user(url: str, name: str) -> tuple[dict[str, str], int]:
    r = httpx.post(f"{url}{API}/users", json={"name": name})
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}, r.json()["id"]


def test_racing_challenges_never_pass_the_in_flight_limit(live):
    url, services = live
    ids = seed_ladder(services, ["heuristic", "random"], 4)
    auth, user_id = _user(url, "chall")
    body = {"env": ENV, "agents": [ids["heuristic"], ids["random"]], "matches": 2}

    def ask() -> int:
        with httpx.Client(base_url=url, headers=auth, timeout=60) as client:
            return client.post(f"{API}/challenges", json=body).status_code

    # No service plays them: every challenge accepted stays in flight.
    assert Counter(race([ask] * RACERS)) == Counter({202: IN_FLIGHT, 429: RACERS - IN_FLIGHT})
    keys = services.pool.keys
    challenges = keys.work_queue("challenges")
    assert services.redis.llen(challenges.queue) == IN_FLIGHT
    assert services.redis.scard(challenges.open_set) == IN_FLIGHT
    assert services.redis.get(keys.busy("challenges", str(user_id))) == str(IN_FLIGHT).encode()
    [matches_key] = services.redis.keys(f"{keys.prefix}:limit:challenge-matches:{user_id}:*")
    assert services.redis.get(matches_key) == str(IN_FLIGHT * body["matches"]).encode()  # the refused gave back


def test_racing_submissions_never_pass_the_daily_quota(live):
    url, services = live
    auth, user_id = _user(url, "subm")
    uploads = [checkpoint(seed=k) for k in range(RACERS)]

    def submit(k: int) -> int:
        weights, spec, _ = uploads[k]
        with httpx.Client(base_url=url, headers=auth, timeout=120) as client:
            return upload(client, None, weights, spec, name=f"racer-{k}").status_code  # type: ignore[arg-type]

    assert Counter(race([functools.partial(submit, k) for k in range(RACERS)])) == \
        Counter({201: PER_DAY, 429: RACERS - PER_DAY})
    with services.sessions() as session:
        mine = [a for a in repo.list_agents(session, ENV) if a.owner_id == user_id]
    assert len(mine) == PER_DAY  # nothing refused was stored
    [quota_key] = services.redis.keys(f"{services.pool.keys.prefix}:limit:submissions:{user_id}:{ENV}:*")
    assert services.redis.get(quota_key) == str(PER_DAY).encode()
