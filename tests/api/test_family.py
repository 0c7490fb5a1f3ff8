"""``GET /agents/{id}/family`` computes nothing (issue 29, item 6): it answers 202 ``pending`` and
queues one job per snapshot however many ask at once; the background service's worker computes
it, then the GET shows the family; a snapshot that cannot be fingerprinted is tried once, and its
reason is stored and shown."""

from __future__ import annotations

import httpx

from agents.checkpoint import serialize_weights
from arena.api.app import create_app
from arena.ladder.background import BackgroundService, ServiceConfig
from arena.runners import InProcessRunner
from arena.storage.db import repositories as repo
from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import API, ENV, auth, new_user, upload
from tests.api.test_clones import random_init, submit, with_noise, worker_of
from tests.client.live import LiveServer
from tests.races import race


def queued(services) -> int:
    return services.redis.llen(services.pool.keys.fingerprint_queue())


def test_concurrent_gets_queue_one_job_and_the_worker_computes_it(client, services):
    alice = new_user(client, "alice")
    state, spec = random_init(0)
    original = submit(client, alice, state, spec, "original")
    app = create_app(services)
    server = LiveServer(app)
    try:
        answers = race([lambda: httpx.get(f"{server.url}{API}/agents/{original}/family", timeout=30)] * 12)
    finally:
        server.stop()
    assert [a.status_code for a in answers] == [202] * 12
    assert {a.json()["status"] for a in answers} == {"pending"}
    assert all(a.json()["pending"] == [original] and a.json()["members"] == [] for a in answers)
    assert queued(services) == 1 and app.state.api.fingerprints.computed == 0  # one job, nothing computed here
    assert list(services.redis.scan_iter(f"{services.pool.keys.prefix}:fp:*")) == []

    worker = worker_of(services)
    assert worker.drain() == 1 and worker.store.computed == 1 and queued(services) == 0
    alone = client.get(f"{API}/agents/{original}/family")
    assert alone.status_code == 200, alone.text
    assert (alone.json()["status"], alone.json()["positions"], alone.json()["members"]) == ("ready", 512, [])

    version = submit(client, alice, with_noise(state, 1e-4, 1), spec, "original-v2")
    pending = client.get(f"{API}/agents/{original}/family")  # a new version: its fingerprint is queued
    assert pending.status_code == 202 and pending.json()["pending"] == [version]
    assert client.get(f"{API}/agents/{version}/family").status_code == 202 and queued(services) == 1
    assert worker.drain() == 1 and worker.store.computed == 2
    family = client.get(f"{API}/agents/{version}/family")
    assert family.status_code == 200 and family.json()["status"] == "ready" and family.json()["pending"] == []
    assert [(m["agent_id"], m["this"]) for m in family.json()["members"]] == [(original, False), (version, True)]


def test_a_failure_is_stored_with_its_reason_and_not_tried_again(client, services):
    bob = new_user(client, "bob")
    state, spec = random_init(1)
    broken = submit(client, bob, state, spec, "broken")
    with services.sessions() as session:
        sha = repo.get_agent(session, broken).snapshot_sha256
    # The snapshot is lost for good: out of Redis and out of the durable store.
    services.redis.delete(services.pool.keys.snapshot(sha), services.pool.keys.snapshot_meta(sha))
    for path in services.pool.durable.paths(sha):
        path.unlink(missing_ok=True)
    assert client.get(f"{API}/agents/{broken}/family").status_code == 202
    worker = worker_of(services)
    done = worker.run_one(0)
    assert done is not None and done.probs is None and worker.drain() == 0
    failed = client.get(f"{API}/agents/{broken}/family")
    assert failed.status_code == 200, failed.text
    body = failed.json()
    assert body["status"] == "failed" and sha[:16] in body["error"] and body["members"] == []
    assert client.get(f"{API}/agents/{broken}/family").json() == body and queued(services) == 0  # not queued again
    report = client.get(f"{API}/admin/integrity", params={"env": ENV}, headers=auth(ADMIN_TOKEN))
    assert report.status_code == 200, report.text
    clones = report.json()["clones"]
    assert [m["agent_id"] for m in clones["not_fingerprinted"]] == [broken] and clones["pending"] == []


def test_the_background_service_fingerprints_an_agent_when_it_passes_validation(client, services):
    carol = new_user(client, "carol")
    state, spec = random_init(2)
    response = upload(client, carol, serialize_weights(state), spec, name="validated")
    assert response.status_code == 201, response.text
    agent = response.json()["id"]
    service = BackgroundService(services, InProcessRunner(), ServiceConfig(envs=(ENV,)))
    try:
        assert service.process_submissions() == 1
        assert client.get(f"{API}/agents/{agent}").json()["status"] == "placement"
        assert queued(services) == 1  # queued at validation, before anyone asked
        assert service.fingerprints.drain() == 1
    finally:
        service.stop()
    family = client.get(f"{API}/agents/{agent}/family")
    assert family.status_code == 200 and family.json()["status"] == "ready" and family.json()["positions"] == 512
