"""Property-based tests of the whole API against its own OpenAPI schema (Schemathesis).

``schemathesis run`` with every check and every phase (examples, coverage, fuzzing, stateful)
against a live server (uvicorn in a thread, as ``arena serve`` serves the app) with a user's
token, over a database with a played ladder and an uploaded agent. The server must never
answer 5xx, and every finding must be one of :data:`KNOWN`: a 422 for a rule that an OpenAPI
schema cannot state (it depends on stored data or on the env, or ties several fields
together), each named with why (or :data:`KNOWN_OTHER`: a retired agent stays readable).
Anything else fails the test: fix the server or say the rule in the schema. Bounded
(``--max-examples``, a fixed ``--seed``) so it runs in about a minute.

The last line printed is a JSON line: cases sent, 5xx answers, findings (known and new).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import schemathesis

from arena.api import create_app
from tests.api.conftest import ADMIN_TOKEN
from tests.api.helpers import ENV, auth, checkpoint, new_user, seed_ladder, upload
from tests.client.live import LiveServer

CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_headers_conformance,
    schemathesis.checks.response_schema_conformance,
]
"""Checks of a response alone (tests/client/test_schemathesis_stateful.py's state machine)."""
MAX_EXAMPLES = 10
SEED = 1

KNOWN: dict[tuple[str, str], str] = {
    ("GET /api/v1/agents/{agent_id}/history", "ST202"):
        "role must be one of the agent's env's roles (the env is the stored agent's)",
    ("GET /api/v1/leaderboard", "ST202"): "role must be one of the env's roles (the env is another parameter)",
    ("GET /api/v1/envs/{env}/humans", "ST202"): "only envs that people play have a humans board",
    ("GET /api/v1/envs/{env}/payoff", "ST202"): "payoff matrices exist for symmetric envs only",
    ("GET /api/v1/matches", "ST202"): "a cursor is an opaque value from a previous page",
    ("PATCH /api/v1/agents/{agent_id}", "ST202"):
        "only an agent with weights can be published (the kind is the stored agent's)",
    ("POST /api/v1/agents", "ST202"): "the files (agent.json, weights) are validated in full: no schema "
        "says a file is a checkpoint of its spec",
    ("POST /api/v1/leagues/{league_id}/snapshots", "ST202"): "as POST /agents: the uploaded files are validated",
    ("POST /api/v1/agents/connected", "ST202"):
        "role must be one of the env's roles, and is required where the env has several",
    ("POST /api/v1/challenges", "ST202"): "exactly one agent per team of the env, each of that env",
    ("POST /api/v1/competitions", "ST202"): "the dates must come in order (opens_at < deadline < final_ends_at)",
    ("POST /api/v1/tournaments", "ST202"):
        "entrants, or competition_id with top; rounds for a Swiss tournament only (fields tied together)",
    ("POST /api/v1/leagues", "ST202"): "the league API takes symmetric envs only",
    ("POST /api/v1/competitions/{competition_id}/entries", "ST202"): "as POST /agents: the files are validated",
    ("POST /api/v1/competitions/{competition_id}/entries/connected", "ST202"):
        "the paths a competition takes (weights, onnx, connected) are its stored settings",
    ("POST /api/v1/competitions/{competition_id}/teams/join", "ST202"): "a join code must be a team's (stored)",
    ("POST /api/v1/competitions/{competition_id}/teams/merge", "ST202"): "a join code must be a team's (stored)",
    ("POST /api/v1/leagues/{league_id}/results", "ST202"):
        "results are reported against the opponents the league drew (stored agents of its env)",
}
"""``(operation, Schemathesis code) -> why``: findings that may stay, all answered 422."""
KNOWN_OTHER: dict[tuple[str, str], tuple[int, str]] = {
    ("DELETE /api/v1/agents/{agent_id}", "ST301"): (
        200, "DELETE retires an agent: it stays readable with status retired, as its matches and ratings do (README)"),
}
"""Findings that are the API's design, not a rule: ``(operation, code) -> (status answered, why)``.
The stateful phase finds the retired agent only with some seeds."""


def schemathesis_run(url: str, token: str, report_dir: Path) -> list[dict]:
    """``schemathesis run`` (all checks, all phases) against ``url``; its NDJSON events."""
    command = [sys.executable, "-m", "schemathesis.cli", "run", f"{url}/openapi.json", "--url", url,
               "-H", f"Authorization: Bearer {token}", "--checks", "all", "--workers", "1",
               "--max-examples", str(MAX_EXAMPLES), "--seed", str(SEED), "--suppress-health-check", "all",
               "--report", "ndjson", "--report-dir", str(report_dir), "--no-color"]
    report_dir.mkdir(parents=True, exist_ok=True)  # also its working directory: its example database stays there
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False, cwd=report_dir)
    reports = sorted(report_dir.glob("*.ndjson"))
    assert reports, done.stdout[-3000:] + done.stderr[-3000:]
    return [json.loads(line) for line in reports[0].read_text().splitlines()]


def findings(events: list[dict]) -> tuple[int, int, dict[tuple[str, str], set[int]]]:
    """``(cases, 5xx answers, {(operation, code): statuses answered})`` of a run's events."""
    cases = server_errors = 0
    found: dict[tuple[str, str], set[int]] = {}
    for event in events:
        scenario = event.get("ScenarioFinished")
        if scenario is None:
            continue
        recorder = scenario["recorder"]
        statuses = {case_id: (interaction.get("response") or {}).get("status_code")
                    for case_id, interaction in recorder.get("interactions", {}).items()}
        cases += len(statuses)
        server_errors += sum(1 for s in statuses.values() if s is not None and s >= 500)
        for case_id, checks in recorder.get("checks", {}).items():
            for check in checks:
                if check["status"] == "failure":
                    failure = check["failure_info"]["failure"]
                    key = (failure.get("operation") or recorder["label"], failure["code"])
                    found.setdefault(key, set()).add(statuses.get(case_id))
    return cases, server_errors, found


def test_findings_are_read_from_a_report():
    """The parser sees a finding, its answer's status and a 5xx (else the test below passes blind)."""
    failed = {"name": "positive_data_acceptance", "status": "failure",
              "failure_info": {"failure": {"code": "ST202", "operation": "POST /api/v1/challenges"}}}
    events = [{"ScenarioFinished": {"recorder": {
        "label": "POST /api/v1/challenges",
        "interactions": {"a": {"response": {"status_code": 422}}, "b": {"response": {"status_code": 500}}},
        "checks": {"a": [{"name": "not_a_server_error", "status": "success"}, failed]},
    }}}, {"EngineFinished": {}}]
    assert findings(events) == (2, 1, {("POST /api/v1/challenges", "ST202"): {422}})


def seed_a_competition_and_a_tournament(client, token: str) -> None:
    """An open competition and a tournament, both id 1 (the ids Schemathesis tries first), so their
    operations get past the 404 of an unknown id."""
    assert client.put("/api/v1/competitions/organizers/schemathesis", headers=auth(ADMIN_TOKEN)).status_code == 200
    now = datetime.now(UTC)
    body = {"env": ENV, "title": "cup", "opens_at": (now - timedelta(days=1)).isoformat(),
            "deadline": (now + timedelta(days=30)).isoformat()}
    competition = client.post("/api/v1/competitions", json=body, headers=auth(token))
    assert competition.status_code == 201, competition.text
    assert client.post(f"/api/v1/competitions/{competition.json()['id']}/open", headers=auth(token)).status_code == 200
    body = {"title": "round", "kind": "round_robin", "entrants": [1, 2], "env": ENV}
    tournament = client.post("/api/v1/tournaments", json=body, headers=auth(token))
    assert tournament.status_code in (201, 202), tournament.text


@pytest.mark.slow
def test_api_conforms_to_its_schema(services, client, tmp_path):
    seed_ladder(services, ["heuristic", "random"], 40)
    token = new_user(client, "schemathesis")
    assert upload(client, token, *checkpoint()[:2]).status_code == 201
    seed_a_competition_and_a_tournament(client, token)
    server = LiveServer(create_app(services))
    try:
        events = schemathesis_run(server.url, token, tmp_path / "report")
    finally:
        server.stop()
    cases, server_errors, found = findings(events)
    allowed = {key: {status} for key, (status, _) in KNOWN_OTHER.items()} | {key: {422} for key in KNOWN}
    new = {f"{operation} {code}": sorted(map(str, statuses))
           for (operation, code), statuses in found.items() if (operation, code) not in allowed}
    print(json.dumps({"cases": cases, "5xx": server_errors, "findings": len(found), "known": len(found) - len(new),
                      "new": new, "checks": Counter(code for _, code in found)}))
    assert cases >= 1000, "Schemathesis sent too few requests: did it reach the server?"
    assert server_errors == 0
    assert not new, f"Schemathesis findings beyond the known ones: {new}"
    assert all(statuses <= allowed[key] for key, statuses in found.items() if key in allowed), found


def test_a_405_allows_every_method_of_its_path(client):
    """Each FastAPI route has one method; the Allow header lists those of all routes of the path,
    and ``/agents/connected`` is no ``/agents/{agent_id}`` (its id is an int)."""
    answer = client.options("/api/v1/agents/1")
    assert (answer.status_code, answer.headers["allow"]) == (405, "DELETE, GET, PATCH")
    answer = client.patch("/api/v1/agents/connected", json={"published": True})
    assert (answer.status_code, answer.headers["allow"]) == (405, "POST")
    assert client.get("/api/v1/agents/connected").status_code == 405
    assert client.get("/api/v1/agents/x1").status_code == 404


def test_the_schema_says_where_a_token_is_optional(client):
    paths = client.get("/openapi.json").json()["paths"]
    bearer = {"HTTPBearer": []}
    assert paths["/api/v1/competitions"]["get"]["security"] == [bearer, {}]
    assert paths["/api/v1/matches/{match_id}"]["get"]["security"] == [bearer, {}]
    assert paths["/api/v1/agents/{agent_id}/play"]["post"]["security"] == [bearer, {}]
    assert paths["/api/v1/competitions"]["post"]["security"] == [bearer]
    assert paths["/api/v1/agents/{agent_id}"]["patch"]["security"] == [bearer]
    assert paths["/api/v1/admin/integrity"]["get"]["security"] == [bearer]
    assert "/api/v1/agents/{agent_id}" in paths and "/api/v1/agents/{agent_id:int}" not in paths
