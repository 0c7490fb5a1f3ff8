"""An ONNX upload whose validation process dies: a clear 4xx, nothing stored, and the
server (and the next upload) carries on.

The validation runs in a worker process of the API process's sandbox
(:func:`agents.onnx_agents.sandbox.validation_sandbox`); here it is SIGKILLed from the
test while it runs a graph that loops. (A graph with one long operator, killed by the
sandbox itself at its probe deadline, is in the corpus that
``tests/api/test_onnx_uploads.py`` walks.)
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

from agents.onnx_agents.sandbox import validation_sandbox
from tests.agents.onnx_corpus import honest_model, hostile_corpus, spec_json
from tests.agents.sandbox_workers import burning_in_request
from tests.api.helpers import API, new_user, stored_state
from tests.api.test_onnx_uploads import send

PROBE_LIMIT_S = 30.0  # long enough to kill the looping probe from here, mid-run
LOOPING = next(c for c in hostile_corpus() if c.name == "endless_loop").data


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {"max_upload_bytes": 1 << 20, "onnx_probe_limit_s": PROBE_LIMIT_S}


def _kill_in_the_probe_run(pids: list[int], stop: threading.Event) -> None:
    """SIGKILL the validation worker once it is inside the probe run and looping (past the
    checker and the load: a run of the probe deadline that has burned CPU time of its own)."""
    sandbox = validation_sandbox()
    while not stop.is_set() and not pids:
        for pid in sandbox.pids(busy=True):
            if burning_in_request(pid, PROBE_LIMIT_S):
                os.kill(pid, signal.SIGKILL)
                pids.append(pid)
                break
        time.sleep(0.01)  # a bounded poll of the condition above (the upload ends it at the latest)


@pytest.mark.timeout(120)  # a hang guard, not a timing assert
def test_a_validation_process_killed_mid_run_stores_nothing(client, services):
    token = new_user(client, "ada")
    validation_sandbox().hello()  # a started worker: the kill must land in the probe, not the start
    before = stored_state(services)
    killed: list[int] = []
    stop = threading.Event()
    killer = threading.Thread(target=_kill_in_the_probe_run, args=(killed, stop))
    killer.start()
    try:
        response = send(client, token, LOOPING, spec_json(), name="looping")
    finally:
        stop.set()
        killer.join()
    assert len(killed) == 1 and killed[0] not in validation_sandbox().pids()
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert "validation process died" in detail and "killed by SIGKILL" in detail
    assert "Nothing was stored" in detail
    assert stored_state(services) == before
    assert client.get(f"{API}/health").json()["status"] == "ok"
    # ... and the next upload is validated and stored as usual.
    assert send(client, token, honest_model(seed=12), spec_json()).status_code == 201
