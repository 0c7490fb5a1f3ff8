"""Property-based tests of the whole API against its own OpenAPI schema (Schemathesis).

Every operation gets generated requests, valid (positive) and schema-violating
(negative), sent with a valid token; the server must never answer 5xx, and every
response must match the schema: a documented status code, content type and headers,
and a body of the documented shape. Bounded (a fixed number of derandomized examples
per operation and mode) so the whole run stays well under a minute.

Why not ``schemathesis.pytest.from_fixture``: with pytest 9 its wrapper reads
``request.node._nodeid``, which pytest no longer has; driving each operation's
strategy with Hypothesis directly uses only the stable public API.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation import GenerationMode

from arena.api import create_app
from tests.api.helpers import auth, checkpoint, new_user, seed_ladder, upload

CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_headers_conformance,
    schemathesis.checks.response_schema_conformance,
]
EXAMPLES = {GenerationMode.POSITIVE: 15, GenerationMode.NEGATIVE: 15}


def fuzz(operation, mode: GenerationMode, headers: dict[str, str]) -> None:
    """Send ``EXAMPLES[mode]`` generated requests to ``operation`` and check each response."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES[mode], derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case) -> None:
        case.call_and_validate(headers=headers, checks=CHECKS)

    try:
        run()
    except Unsatisfiable:
        # No request can violate the schema of an operation without parameters.
        assert mode is GenerationMode.NEGATIVE, operation.label


@pytest.mark.slow
def test_api_conforms_to_its_schema(services, client):
    seed_ladder(services, ["heuristic", "random"], 40)
    token = new_user(client, "schemathesis")
    assert upload(client, token, *checkpoint()[:2]).status_code == 201
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(services))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    for operation in operations:
        for mode in EXAMPLES:
            fuzz(operation, mode, auth(token))
