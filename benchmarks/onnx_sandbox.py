"""ONNX process isolation: what running a user's graph in a sandboxed worker costs.

(a) in-process, the baseline: an onnxruntime session in the caller's process with the
    same options and deadline (``TimedSession``), which is what ``OnnxPolicy`` did
    before the sandbox;
(b) sandboxed: ``OnnxPolicy.logits``, the batch sent over a pipe to a confined worker
    process and the logits read back (no pickle, no copy into or out of numpy).

Per batch size, the median milliseconds of one call of each and the overhead (b - a),
for two models exported from Arena's registry: a connect-four CNN (channels 32, 32;
hidden 128) and a tictactoe MLP with one hidden layer of 8, whose runs cost next to
nothing, so its overhead is the transport alone. Then (c) the engine: connect four, two exported CNNs against each
other, played once with in-process policies and once sandboxed, in matches per second,
and whether every action of every match is the same.

    python benchmarks/onnx_sandbox.py [--matches 2048] [--smoke]

Prints a table, then one JSON line: ``rows``, ``inprocess_ms`` / ``sandbox_ms`` /
``overhead_ms`` (the CNN's medians, per batch size), ``best_overhead_ms`` (best calls),
``mlp_overhead_ms``, ``mlp_best_overhead_ms``, ``overhead_us_per_row``
(largest batch), ``worker_start_s`` (a worker's first hello), ``engine_matches``,
``engine_inprocess_mps``, ``engine_sandbox_mps``, ``engine_ratio`` and
``identical_actions``. ``--smoke``: two batch sizes, 3 calls each, 32 matches.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == _ROOT / "benchmarks":
    sys.path[0] = str(_ROOT)  # benchmarks/league.py would shadow the league package; benchmarks.support

import numpy as np

from agents.checkpoint import LoadedCheckpoint, serialize_weights
from agents.neural import random_init_checkpoint, sample_masked
from agents.onnx_agents.export import export_onnx, onnx_spec
from agents.onnx_agents.policy import OnnxPolicy, ValidatedOnnx, validate_onnx_bytes
from agents.onnx_agents.sandbox import OnnxSandbox
from agents.onnx_agents.session import TimedSession, load_session
from agents.policy import MatchRng
from arena.engine import play_matches
from arena.engine.plan import plan_matches
from envs.registry import get_spec


class InProcessOnnx:
    """``OnnxPolicy`` as it was before the sandbox: the session in this process."""

    bounded_runtime = False

    def __init__(self, model: ValidatedOnnx, time_limit_s: float = 10.0) -> None:
        self.spec, self.temperature, self.time_limit_s = model.spec, 1.0, time_limit_s
        self.agent_id, self.weights_hash = f"onnx-{model.sha256[:16]}", model.sha256
        self._session = TimedSession(load_session(model.data), model.input_name, model.output_name)

    def logits(self, obs: np.ndarray) -> np.ndarray:
        obs = np.ascontiguousarray(obs, dtype=np.float32)
        return self._session.run(obs, self.time_limit_s).astype(np.float64)

    def act(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> np.ndarray:
        return sample_masked(self, obs, mask, rng)


def exported(env_id: str, arch: str, hparams: dict, seed: int) -> ValidatedOnnx:
    """A registry checkpoint exported to ONNX and validated as the server does."""
    state, spec = random_init_checkpoint(env_id, arch, hparams, seed=seed)
    checkpoint = LoadedCheckpoint(spec, state, hashlib.sha256(serialize_weights(state)).hexdigest())
    return validate_onnx_bytes(export_onnx(checkpoint), onnx_spec(checkpoint))


def timed_ms(calls: list, obs: np.ndarray, repeats: int) -> list[tuple[float, float]]:
    """Median and best milliseconds of each ``call(obs)``, the calls interleaved so that a
    busy moment of the machine hits both alike (the best shows the cost without the
    scheduler's noise: on a loaded machine a woken process may wait for a core)."""
    times: list[list[float]] = [[] for _ in calls]
    for call in calls:
        call(obs)  # warm: the arena grows to this batch once
    for _ in range(repeats):
        for call, spent in zip(calls, times, strict=True):
            start = time.perf_counter()
            call(obs)
            spent.append(time.perf_counter() - start)
    return [(statistics.median(t) * 1000, min(t) * 1000) for t in times]


def per_batch(model: ValidatedOnnx, sandbox: OnnxSandbox, sizes: list[int], calls: int
              ) -> dict[int, tuple[float, float, float, float]]:
    """``rows -> (in-process, sandboxed) median ms, then their best ms``; the two must give
    the same logits."""
    local, boxed = InProcessOnnx(model), OnnxPolicy(model, device="cpu", sandbox=sandbox)
    gen = np.random.default_rng(0)
    out = {}
    for rows in sizes:
        obs = (gen.random((rows, *model.spec.obs_shape)) < 0.3).astype(np.float32)
        assert np.array_equal(local.logits(obs), boxed.logits(obs)), "different logits"
        repeats = max(3, min(calls, 20_000 // rows))  # fewer calls of the largest batches
        (a, a_best), (b, b_best) = timed_ms([local.logits, boxed.logits], obs, repeats)
        out[rows] = (a, b, a_best, b_best)
    return out


def engine_run(models: list[ValidatedOnnx], sandbox: OnnxSandbox, matches: int) -> tuple[float, float, bool]:
    """Matches/s in-process, sandboxed, and whether both played the same actions."""
    env_id = models[0].spec.env
    results = []
    for build in (InProcessOnnx, lambda m: OnnxPolicy(m, device="cpu", sandbox=sandbox)):
        policies = {p.agent_id: p for p in map(build, models)}
        jobs = plan_matches(list(policies), get_spec(env_id), matches, seed=7)
        start = time.perf_counter()
        records = play_matches(env_id, jobs, policies)
        results.append((matches / (time.perf_counter() - start), [r.actions for r in records]))
    (local_mps, local_actions), (boxed_mps, boxed_actions) = results
    return local_mps, boxed_mps, local_actions == boxed_actions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--matches", type=int, default=2048)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    sizes = [1, 64] if args.smoke else [1, 16, 256, 1024, 4096, 16384]
    calls = 3 if args.smoke else 50
    matches = 32 if args.smoke else args.matches
    sandbox = OnnxSandbox()
    start = time.perf_counter()
    sandbox.hello()
    worker_start_s = time.perf_counter() - start
    cnn = [exported("connect_four-v3", "cnn", {"channels": [32, 32], "hidden": 128}, seed=s)
           for s in (1, 2)]
    mlp = exported("tictactoe-v3", "mlp", {"hidden": [8]}, seed=3)  # next to no compute: the transport
    cnn_times = per_batch(cnn[0], sandbox, sizes, calls)
    mlp_times = per_batch(mlp, sandbox, sizes, calls)
    print("median (best) milliseconds per call")
    print(f"{'rows':>6} | {'cnn in-process':>17} {'sandboxed':>17} {'overhead':>17} | "
          f"{'mlp in-process':>17} {'sandboxed':>17} {'overhead':>17}")
    for rows in sizes:
        cells = []
        for a, b, a_best, b_best in (cnn_times[rows], mlp_times[rows]):
            cells += [f"{a:8.3f} ({a_best:6.3f})", f"{b:8.3f} ({b_best:6.3f})",
                      f"{b - a:8.3f} ({b_best - a_best:6.3f})"]
        print(f"{rows:>6} | {' '.join(cells[:3])} | {' '.join(cells[3:])}")
    local_mps, boxed_mps, identical = engine_run(cnn, sandbox, matches)
    print(f"engine, connect four, {matches} matches of two exported CNNs: in-process "
          f"{local_mps:,.0f} matches/s, sandboxed {boxed_mps:,.0f} matches/s "
          f"(x{boxed_mps / local_mps:.2f}); identical actions: {identical}")
    print(f"a worker's start (python, numpy, onnxruntime, onnx, confinement): {worker_start_s:.2f}s")
    sandbox.close()
    largest = sizes[-1]
    print(json.dumps({
        "rows": sizes,
        "inprocess_ms": [round(cnn_times[r][0], 4) for r in sizes],
        "sandbox_ms": [round(cnn_times[r][1], 4) for r in sizes],
        "overhead_ms": [round(cnn_times[r][1] - cnn_times[r][0], 4) for r in sizes],
        "best_overhead_ms": [round(cnn_times[r][3] - cnn_times[r][2], 4) for r in sizes],
        "mlp_overhead_ms": [round(mlp_times[r][1] - mlp_times[r][0], 4) for r in sizes],
        "mlp_best_overhead_ms": [round(mlp_times[r][3] - mlp_times[r][2], 4) for r in sizes],
        "overhead_us_per_row": round(1000 * (cnn_times[largest][1] - cnn_times[largest][0]) / largest, 4),
        "worker_start_s": round(worker_start_s, 3),
        "engine_matches": matches,
        "engine_inprocess_mps": round(local_mps, 1),
        "engine_sandbox_mps": round(boxed_mps, 1),
        "engine_ratio": round(boxed_mps / local_mps, 3),
        "identical_actions": identical,
    }))


if __name__ == "__main__":
    from benchmarks.support.signals import unwind_on_sigterm

    unwind_on_sigterm()  # a SIGTERM cleans up as a Ctrl-C does: no server or client left running
    main()
