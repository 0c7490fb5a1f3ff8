"""Stateful fuzzing of the live API (Schemathesis state machine), on SQLite and PostgreSQL.

A real server (uvicorn, real database, the embedded Redis) is driven by Schemathesis'
state machine: sequences of calls whose later steps reuse what earlier ones returned
(links inferred from the schema: a created agent's id feeds GET/DELETE/PATCH of that
agent, a challenge's id its status, ...), with every check Schemathesis has. The server
must never answer 5xx and every response must match the schema. Bounded so it stays
well under a minute per database.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from tests.api.helpers import checkpoint
from tests.api.test_schemathesis import CHECKS
from tests.client.conftest import Arena


@pytest.mark.slow
def test_the_live_api_survives_stateful_fuzzing(arena: Arena):
    import httpx

    token = httpx.post(f"{arena.url}/api/v1/users", json={"name": "stateful"}).json()["token"]
    weights, spec, _ = checkpoint()
    r = httpx.post(f"{arena.url}/api/v1/agents", headers={"Authorization": f"Bearer {token}"},
                   files=[("weights", ("agent.safetensors", weights, "application/octet-stream")),
                          ("spec", (None, spec)), ("env", (None, "tictactoe-v3")), ("name", (None, "seed"))])
    assert r.status_code == 201, r.text
    schema = schemathesis.openapi.from_url(f"{arena.url}/openapi.json")
    base = schema.as_state_machine()
    calls = {"n": 0}

    class Workflow(base):  # type: ignore[misc, valid-type]
        def get_call_kwargs(self, case):
            return {"headers": {"Authorization": f"Bearer {token}"}, "timeout": 30}

        def validate_response(self, response, case, **kwargs):
            calls["n"] += 1
            case.validate_response(response, checks=CHECKS)

    Workflow.run(settings=settings(max_examples=12, stateful_step_count=6, derandomize=True, deadline=None,
                                   database=None, suppress_health_check=list(HealthCheck)))
    assert calls["n"] >= 20
