"""The ONNX sandbox: user graphs run in confined worker processes, never in ours.

Real processes and real failures throughout: a worker is SIGKILLed from here while it
runs a graph that loops, a single long operator overruns its deadline, a sandbox
cannot start its workers in time. Each costs one call (or one match batch) and the
next call is served by a replacement; the sandboxed logits equal onnxruntime's in
this process bit for bit, so matches play exactly as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from agents.catalog import make_policy
from agents.checkpoint import LoadedCheckpoint, serialize_weights
from agents.neural import random_init_checkpoint
from agents.onnx_agents.confine import REQUIRED
from agents.onnx_agents.export import export_onnx, onnx_spec
from agents.onnx_agents.policy import OnnxPolicy, stored_onnx, validate_onnx_bytes
from agents.onnx_agents.process import SandboxCrashed, SandboxLimits, SandboxTimeout, SandboxUnavailable
from agents.onnx_agents.sandbox import OnnxSandbox
from agents.onnx_agents.session import TimedSession, load_session
from agents.policy import MatchRng, PolicyCrashed
from arena.api.errors import status_code_of
from arena.engine import MatchJob, play_matches
from tests.agents.onnx_corpus import ENV, honest_model, long_operator, play_time_hostiles, spec_json
from tests.agents.sandbox_workers import burning_in_request, wait_until_dead

LOOP_LIMIT_S = 60.0  # the looping model's deadline: long enough to kill it from here, mid-run


@pytest.fixture(scope="module")
def sandbox() -> Iterator[OnnxSandbox]:
    box = OnnxSandbox(SandboxLimits(workers=2))
    yield box
    box.close()


def _policy(data: bytes, box: OnnxSandbox, **kwargs) -> OnnxPolicy:
    return OnnxPolicy(stored_onnx(data, spec_json()), device="cpu", sandbox=box, **kwargs)


def _obs(rows: int, shape: tuple[int, ...] = (3, 3, 2), seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).random((rows, *shape)) < 0.3).astype(np.float32)


def _kill_looping_workers(box: OnnxSandbox, stop: threading.Event, killed: list[int], limit_s: float) -> None:
    """SIGKILL every worker inside a run of deadline ``limit_s`` that has burned CPU time of
    its own (a model that loops), until ``stop``."""
    while not stop.is_set():
        for pid in box.pids(busy=True):
            if pid not in killed and burning_in_request(pid, limit_s):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        time.sleep(0.01)  # a bounded poll: the caller sets ``stop`` when its call returns


def test_sandboxed_logits_equal_in_process_onnxruntime(sandbox: OnnxSandbox) -> None:
    """Same session options, same graph: bit-identical logits, so identical moves."""
    state, spec = random_init_checkpoint("connect_four-v3", "cnn", {"channels": [8], "hidden": 32}, seed=3)
    checkpoint = LoadedCheckpoint(spec, state, hashlib.sha256(serialize_weights(state)).hexdigest())
    for data, spec_ in ((honest_model(seed=5), spec_json()),
                        (export_onnx(checkpoint), onnx_spec(checkpoint))):
        model = stored_onnx(data, spec_)
        policy = OnnxPolicy(model, device="cpu", sandbox=sandbox)
        local = TimedSession(load_session(data), model.input_name, model.output_name)
        for rows in (1, 7, 4096):
            obs = _obs(rows, model.spec.obs_shape, seed=rows)
            np.testing.assert_array_equal(policy.logits(obs), local.run(obs, 10.0).astype(np.float64))


def test_workers_are_confined_as_their_hello_says(sandbox: OnnxSandbox) -> None:
    hello = sandbox.hello()
    report = hello["confinement"]
    assert set(report) == {"rlimits", "network", "user", "landlock", "seccomp"}
    assert sandbox.confinement() == {"mode": hello["mode"], "layers": report}
    pid = hello["pid"]
    limits = {line[:26].strip(): line[26:].split()[:2]
              for line in Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]}
    assert limits["Max address space"] == [str(4 << 30)] * 2
    assert limits["Max open files"] == ["32", "32"] and limits["Max core file size"] == ["0", "0"]
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    # What each layer reports is what /proc shows of the process.
    assert (status["Seccomp"].strip() == "2") == report["seccomp"]["active"]  # SECCOMP_MODE_FILTER
    own_net = os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    assert own_net == report["network"]["active"]
    uids = status["Uid"].split()
    assert report["user"]["active"] == ("0" not in uids)
    if os.geteuid() == 0 and report["user"]["active"]:
        assert status["CapEff"].strip() == "0" * 16  # nobody, with no capabilities
    assert report["landlock"]["active"] or "unavailable" in report["landlock"]["detail"] \
        or "refused" in report["landlock"]["detail"]
    if hello["mode"] == "required":  # a worker that says hello under required has them all
        assert all(report[name]["active"] for name in REQUIRED)
    # The worker's environment carries none of the service's settings or secrets.
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert not [v for v in environ if v.startswith((b"ARENA_", b"DATABASE", b"REDIS"))]


@pytest.mark.timeout(120)  # a hang guard, not a timing assert
def test_one_long_operator_is_killed_at_its_deadline(sandbox: OnnxSandbox) -> None:
    """onnxruntime cannot stop a MatMul midway; the parent kills its worker instead.

    Regressions: onnxruntime folded the input-free MatMul at load, or ran it in about 1.2 s on
    one thread, within the 1.0 s limit plus the 0.25 s kill grace, so the worker sometimes ended
    the run itself between operators; then, at a 0.3 s limit on a loaded CI machine, the
    operators before the MatMul (building its 144 MiB input) outlasted the limit, and the worker
    stopped the run before the MatMul began; and again at a 1.0 s limit beside CI's Ray chaos test
    (the worker ended the run at 1.05 s). Now the MatMul depends on the input (run at every call)
    and takes 4-9 s on one thread; before it comes one pass over its 144 MiB input (an Expand,
    where a ConstantOfShape and an Add made two), and the limit is 2.0 s: the kill comes at 2.25 s,
    while the MatMul is surely running.
    """
    policy = _policy(long_operator(), sandbox, time_limit_s=2.0)
    replaced = sandbox.replaced
    with pytest.raises(SandboxTimeout, match="worker process was killed"):
        policy.logits(_obs(2))
    assert sandbox.replaced == replaced + 1
    honest = _policy(honest_model(seed=6), sandbox)
    assert honest.logits(_obs(3)).shape == (3, 9)  # the next call is served


@pytest.mark.timeout(120)
def test_a_worker_killed_mid_run_costs_that_call_only(sandbox: OnnxSandbox) -> None:
    policy = _policy(play_time_hostiles()["loop_in_play"], sandbox, time_limit_s=LOOP_LIMIT_S)
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_looping_workers, args=(sandbox, stop, killed, LOOP_LIMIT_S))
    killer.start()
    try:
        with pytest.raises(SandboxCrashed, match="killed by SIGKILL") as info:
            policy.logits(_obs(16))  # over 8 rows: it loops until killed
    finally:
        stop.set()
        killer.join()
    assert isinstance(info.value, PolicyCrashed) and len(killed) == 1
    assert killed[0] not in sandbox.pids()
    assert policy.logits(_obs(4)).shape == (4, 9)  # reloaded in another worker


def _jobs(a: str, b: str, n: int, start: int = 0) -> list[MatchJob]:
    return [MatchJob(start + i, (a, b) if i % 2 == 0 else (b, a)) for i in range(n)]


@pytest.mark.timeout(180)
def test_a_crash_in_a_match_forfeits_only_that_models_matches(sandbox: OnnxSandbox) -> None:
    crashing = _policy(play_time_hostiles()["loop_in_play"], sandbox, time_limit_s=LOOP_LIMIT_S)
    honest = _policy(honest_model(seed=7), sandbox)
    random, heuristic = make_policy("random", ENV), make_policy("heuristic", ENV)
    policies = {p.agent_id: p for p in (crashing, honest, random, heuristic)}
    jobs = _jobs(crashing.agent_id, random.agent_id, 32) + _jobs(heuristic.agent_id,
                                                                   random.agent_id, 16, start=32)
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_looping_workers, args=(sandbox, stop, killed, LOOP_LIMIT_S))
    killer.start()
    try:
        records = play_matches(ENV, jobs, policies, time_budget_s=LOOP_LIMIT_S)
    finally:
        stop.set()
        killer.join()
    by_crashing = [r for r in records if crashing.agent_id in r.seats]
    assert [r.termination for r in by_crashing] == ["error"] * 32  # both 16-row calls killed
    assert all(r.seats[r.forfeit_seat] == crashing.agent_id and "crashed" in r.detail
               and "SIGKILL" in r.detail for r in by_crashing)
    assert len(killed) == 2  # one per call: no retry per row
    others = [r for r in records if crashing.agent_id not in r.seats]
    assert len(others) == 16 and all(r.forfeit_seat is None for r in others)
    # The engine goes on: the next batch, with another ONNX model, plays normally.
    after = play_matches(ENV, _jobs(honest.agent_id, random.agent_id, 32), policies)
    assert all(r.forfeit_seat is None for r in after)


def test_a_sandbox_that_cannot_start_a_worker_is_unavailable() -> None:
    """A worker that does not say hello in time: the server's fault (503), not the model's."""
    box = OnnxSandbox(SandboxLimits(workers=1, start_timeout_s=0.01))
    try:
        with pytest.raises(SandboxUnavailable, match="did not start") as info:
            validate_onnx_bytes(honest_model(), spec_json(), sandbox=box)
        assert status_code_of(info.value) == 503
    finally:
        box.close()


def test_the_same_seeds_play_the_same_moves_in_any_worker(sandbox: OnnxSandbox) -> None:
    policy = _policy(honest_model(seed=8), sandbox)
    gen = np.random.default_rng(1)
    obs, mask = _obs(512), gen.random((512, 9)) < 0.5
    mask[:, 0] = True
    seeds = gen.integers(0, 2**62, 512)
    first = policy.act(obs, mask, MatchRng(seeds, np.zeros(512), np.zeros(512)))
    pids = sandbox.pids()
    for pid in pids:  # every worker replaced: the model is reloaded elsewhere
        os.kill(pid, signal.SIGKILL)
    wait_until_dead(pids)  # until reapable: a zombie whose threads still exit looks idle to the sandbox
    again = policy.act(obs, mask, MatchRng(seeds, np.zeros(512), np.zeros(512)))
    np.testing.assert_array_equal(first, again)


def test_the_benchmark_plays_the_same_matches_in_and_out_of_process() -> None:
    """``benchmarks/onnx_sandbox.py --smoke``: it runs, and both ways play the same actions."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "onnx_sandbox.py"), "--smoke"],
                          check=False, cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["identical_actions"] is True and result["engine_matches"] == 32
    assert {"overhead_ms", "best_overhead_ms", "engine_ratio", "worker_start_s"} <= result.keys()
