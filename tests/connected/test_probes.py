"""Exploitability probes never query a connected agent unless its owner asks."""

from __future__ import annotations

import httpx

from tests.connected.conftest import ADMIN_TOKEN


def probe(live, agent_id: int, token: str) -> httpx.Response:
    return httpx.post(f"{live.url}/api/v1/agents/{agent_id}/probes", json={"budget_env_steps": 20000},
                      headers={"Authorization": f"Bearer {token}"})


def test_only_the_owner_may_probe_a_connected_agent(live):
    owner = live.user("dora")
    agent = live.connected_agent(owner, "probe-me")
    assert probe(live, agent["id"], ADMIN_TOKEN).status_code == 403
    assert "owner" in probe(live, agent["id"], ADMIN_TOKEN).json()["detail"]
    assert probe(live, agent["id"], live.user("eve")).status_code == 403
    assert probe(live, agent["id"], owner).status_code == 202
