"""Published agents: private by default, the owner publishes, anyone downloads the exact bytes."""

from __future__ import annotations

import hashlib
import json

from agents.checkpoint import load_checkpoint_bytes
from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import API, auth, checkpoint, new_user, seed_ladder, upload


def _submit(client, token: str, seed: int = 0) -> tuple[int, bytes, dict]:
    weights, spec, _ = checkpoint(seed=seed)
    r = upload(client, token, weights, spec)
    assert r.status_code == 201, r.text
    assert r.json()["published"] is False  # private by default
    return r.json()["id"], weights, json.loads(spec)


def test_private_agent_is_403_for_others_then_published_downloads_the_uploaded_bytes(client):
    ada, bob = new_user(client, "ada"), new_user(client, "bob")
    agent_id, weights, spec = _submit(client, ada)

    for headers in ({}, auth(bob)):
        for part in ("weights", "spec"):
            r = client.get(f"{API}/agents/{agent_id}/{part}", headers=headers)
            assert r.status_code == 403, r.text
            assert "private" in r.json()["detail"] and "publish" in r.json()["detail"]
    # Its owner and admins may always download it.
    assert client.get(f"{API}/agents/{agent_id}/weights", headers=auth(ada)).content == weights
    assert client.get(f"{API}/agents/{agent_id}/weights", headers=auth(ADMIN_TOKEN)).content == weights

    refused = client.patch(f"{API}/agents/{agent_id}", json={"published": True}, headers=auth(bob))
    assert refused.status_code == 403 and "not yours" in refused.json()["detail"]
    assert client.get(f"{API}/agents/{agent_id}").json()["published"] is False
    assert client.patch(f"{API}/agents/{agent_id}", json={"published": True}).status_code == 401

    published = client.patch(f"{API}/agents/{agent_id}", json={"published": True}, headers=auth(ada))
    assert published.status_code == 200, published.text
    assert published.json()["published"] is True
    assert client.get(f"{API}/agents/{agent_id}").json()["published"] is True
    assert any(a["id"] == agent_id and a["published"] for a in client.get(f"{API}/agents").json()["data"])

    download = client.get(f"{API}/agents/{agent_id}/weights")  # anonymous
    assert download.status_code == 200
    assert download.content == weights
    assert download.headers["x-arena-sha256"] == hashlib.sha256(weights).hexdigest()
    assert f'filename="agent-{agent_id}.safetensors"' in download.headers["content-disposition"]
    got_spec = client.get(f"{API}/agents/{agent_id}/spec", headers=auth(bob))
    assert got_spec.status_code == 200 and got_spec.json() == spec
    assert load_checkpoint_bytes(download.content, got_spec.json()).sha256 == download.headers["x-arena-sha256"]

    unpublished = client.patch(f"{API}/agents/{agent_id}", json={"published": False}, headers=auth(ada))
    assert unpublished.status_code == 200 and unpublished.json()["published"] is False
    assert client.get(f"{API}/agents/{agent_id}/weights", headers=auth(bob)).status_code == 403


def test_agents_without_weights_are_404_and_cannot_be_published(client, services):
    ids = seed_ladder(services, ["random", "heuristic"], 4)
    random_id = ids["random"]
    for part in ("weights", "spec"):
        r = client.get(f"{API}/agents/{random_id}/{part}", headers=auth(ADMIN_TOKEN))
        assert r.status_code == 404 and "no weights" in r.json()["detail"]
    r = client.patch(f"{API}/agents/{random_id}", json={"published": True}, headers=auth(ADMIN_TOKEN))
    assert r.status_code == 422 and "no weights to publish" in r.json()["detail"]
    assert client.get(f"{API}/agents/424242/weights").status_code == 404
    ada = new_user(client, "ada")
    connected = client.post(f"{API}/agents/connected", json={"env": "tictactoe-v3", "name": "remote"},
                            headers=auth(ada)).json()
    assert client.get(f"{API}/agents/{connected['id']}/weights", headers=auth(ada)).status_code == 404
    bad = client.patch(f"{API}/agents/{connected['id']}", json={"published": "yes please"}, headers=auth(ada))
    assert bad.status_code == 422
    extra = client.patch(f"{API}/agents/{connected['id']}", json={"published": True, "name": "x"},
                         headers=auth(ada))
    assert extra.status_code == 422


def test_the_agent_page_shows_the_download_of_a_published_agent(client):
    ada = new_user(client, "ada")
    agent_id, _, _ = _submit(client, ada)
    assert "agent-published" not in client.get(f"/agents/{agent_id}").text
    client.patch(f"{API}/agents/{agent_id}", json={"published": True}, headers=auth(ada))
    page = client.get(f"/agents/{agent_id}").text
    assert "agent-published" in page and f"{API}/agents/{agent_id}/weights" in page
