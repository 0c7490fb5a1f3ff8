"""The ONNX sandbox fails closed, and code inside a worker cannot reach out of it.

Every escape runs inside a real confined process (:mod:`tests.agents.onnx_escapes`: the
worker's own confinement, spawned by the test, never by the API) against a stand-in for
the service, which must come through alive with its limits unchanged. The refusal of a
required layer is provoked for real: the stand-in runs under a filter that refuses
``unshare``, as a container runtime's would. Descriptors past 1024 are real too.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.onnx_agents import seccomp
from agents.onnx_agents.confine import MODE_VARIABLE, REQUIRED, kernel_confines, resolve_mode
from agents.onnx_agents.process import ConfinementRefused, SandboxLimits, WorkerProcess
from agents.onnx_agents.wire import Deadline, recv_frame, send_frame
from arena.api.errors import status_code_of
from tests.agents.onnx_corpus import honest_model
from tests.agents.onnx_escapes import ATTEMPTS, CONTROLS, FILE_ATTEMPTS

ROOT = Path(__file__).resolve().parents[2]
REFUSED = {"EPERM", "EACCES", "ENOSYS", "killed by SIGSYS"}
PROFILES = ("cpu", "gpu", "seccomp-allow", "seccomp-deny")


def _escapes(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "tests.agents.onnx_escapes", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"the stand-in died ({done.returncode}): {done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def escapes() -> dict[str, dict]:
    return _escapes("stand-in", *PROFILES, "none")  # one stand-in: any escape kills it


@pytest.mark.timeout(600)  # a hang guard, not a timing assert
@pytest.mark.parametrize("profile", PROFILES)
def test_every_escape_from_inside_a_worker_is_refused(escapes: dict[str, dict], profile: str) -> None:
    run = escapes[profile]
    assert run["parent_alive"] and run["limits_unchanged"]  # the stand-in lived, its limits held
    expected = [a for a in ATTEMPTS if not (profile in ("gpu", "seccomp-deny") and a in FILE_ATTEMPTS)]
    assert sorted(run["results"]) == sorted(expected)
    allowed = {name: got for name, got in run["results"].items() if got not in REFUSED}
    assert not allowed, f"{profile}: {allowed}"
    child = run["child"]
    if profile in ("cpu", "gpu"):  # a working worker: onnxruntime ran under the same filter
        assert child["ran"] == [4, 9]
        assert all(child["report"][name]["active"] for name in REQUIRED), child["report"]
        if os.geteuid() == 0:
            assert child["uid"] != 0
    else:  # the filter alone, in a child that stays root: nothing else refused these calls
        assert child["report"]["seccomp"]["active"] and child["uid"] == os.geteuid()


def test_unconfined_the_same_attempts_work(escapes: dict[str, dict]) -> None:
    """The control: without confinement the harmless attempts succeed, so the refusals
    above are the sandbox's doing, not a broken attempt."""
    run = escapes["none"]
    assert run["results"] == dict.fromkeys(CONTROLS, "ALLOWED") and run["limits_unchanged"]


@pytest.mark.timeout(300)
def test_required_runs_no_model_where_the_kernel_refuses_a_layer() -> None:
    out = _escapes("refusal")
    refused = out["required"]
    assert "sandbox is unavailable" in refused["refused"] and "network" in refused["refused"]
    assert f"{MODE_VARIABLE}=best-effort" in refused["refused"]
    assert refused["again"] == refused["refused"] and refused["workers_after"] == []
    best_effort = out["best-effort"]
    layers = best_effort["confinement"]["layers"]
    assert best_effort["validated"] and not layers["network"]["active"]
    assert "not isolated" in layers["network"]["detail"] and layers["seccomp"]["active"]


def test_a_refused_confinement_is_the_servers_fault() -> None:
    assert status_code_of(ConfinementRefused("no network namespace")) == 503


def test_the_mode_comes_from_the_setting_or_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODE_VARIABLE, raising=False)
    assert resolve_mode() == ("required" if kernel_confines() else "best-effort")
    monkeypatch.setenv(MODE_VARIABLE, "best-effort")
    assert resolve_mode() == "best-effort" and resolve_mode("required") == "required"
    with pytest.raises(ValueError, match="'required' or 'best-effort'"):
        resolve_mode("off")


def test_the_filters_build_for_both_architectures() -> None:
    """Jumps in range, and the allow-list shares no call with what the deny-list names."""
    assert not set(seccomp.CPU_ALLOWED) & set(seccomp.DENIED)
    assert not set(seccomp.CPU_ALLOWED) & {"clone", "clone3", "prlimit64", "tgkill", "kill", "ioctl"}
    for machine in seccomp.ARCHES:
        for allow_list in (True, False):
            program = seccomp.program(machine, allow_list=allow_list, pid=12345)
            assert len(program) % 8 == 0 and 0 < len(program) // 8 < 4096


@pytest.mark.timeout(120)
def test_the_pipes_past_descriptor_1024() -> None:
    """select() refuses descriptors from 1024 on; the parent's waits must not."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1400:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1400, hard), hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    worker = None
    try:
        read, write = os.pipe()
        assert min(read, write) > 1024
        os.set_blocking(read, False)
        with pytest.raises(Deadline):  # nothing written: the wait ends at the deadline
            recv_frame(read, time.monotonic() + 0.05)
        send_frame(write, time.monotonic() + 5, {"op": "x"}, b"abc")
        header, payload = recv_frame(read, time.monotonic() + 5, max_payload=3)
        assert header == {"op": "x"} and bytes(payload) == b"abc"
        os.close(read)
        os.close(write)
        worker = WorkerProcess(SandboxLimits(confinement="best-effort"))  # the pipes are the point
        assert min(worker.req, worker.resp) > 1024
        assert worker.ready(60)["op"] == "hello"
        reply, _ = worker.request({"op": "check"}, honest_model(seed=2), 10.0, 0.25)
        assert reply == {"ok": True}
    finally:
        if worker is not None:
            worker.kill()
            worker.close()
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
