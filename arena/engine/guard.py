"""Calling untrusted policies: exceptions, bad outputs and time budgets become forfeits.

:func:`guarded_act` never raises because of the policy. It returns an action per row
and a termination code per row (``NORMAL`` means "this row's action is legal").

If the policy raises on a batch, each row is retried alone so that one poisoned
observation does not forfeit the other matches in the batch (and so the outcome of a
match never depends on which batch it was played in). A policy whose runtime died
under the call (:class:`~agents.policy.PolicyCrashed`: an ONNX model's sandboxed
worker process crashed or was killed) forfeits every row of the call with ``error``
at once: a retry per row would only crash a fresh process per row.

A policy that keeps its own clock and judges its rows itself (a connected agent,
:class:`~arena.connected.policy.ConnectedPolicy`: ``answers_rows = True``) returns an
:class:`ActResult` from ``act``; it is taken as it is, without the engine's budget.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from agents.policy import MatchRng, Policy, PolicyCrashed
from arena.engine.records import TERMINATION_CODE, Termination

log = logging.getLogger(__name__)

OK = TERMINATION_CODE[Termination.NORMAL]
ILLEGAL = TERMINATION_CODE[Termination.ILLEGAL_ACTION]
ERROR = TERMINATION_CODE[Termination.ERROR]
INVALID = TERMINATION_CODE[Termination.INVALID_OUTPUT]
TIMEOUT = TERMINATION_CODE[Termination.TIMEOUT]


@dataclass
class ActResult:
    """Actions (``-1`` where forfeited), per-row termination codes and a detail text."""

    actions: np.ndarray
    codes: np.ndarray
    detail: str = ""


def answers_later(policy: Policy) -> bool:
    """``policy`` judges its own rows and can ``submit`` them now to be answered later (a
    connected agent, over the wire)."""
    return hasattr(policy, "submit") and bool(getattr(policy, "answers_rows", False))


class PolicyCaller:
    """Runs ``policy.act`` with an optional wall-clock budget per call.

    Policies marked ``bounded_runtime`` (Arena's scripted baselines and neural
    policies) are timed in-line: an overrun is detected when the call returns. Any
    other policy runs on a watchdog thread; a call that overruns is abandoned (Python
    cannot kill a thread) and a fresh thread serves the next call.
    """

    def __init__(self, time_budget_s: float | None = None) -> None:
        self.time_budget_s = time_budget_s
        self._pool: cf.ThreadPoolExecutor | None = None

    def _call(self, policy: Policy, obs: np.ndarray, mask: np.ndarray, rng: MatchRng):
        if self.time_budget_s is None:
            return policy.act(obs, mask, rng)
        if getattr(policy, "bounded_runtime", False):
            # Arena's own policies cannot hang (scripted numpy, or a forward pass of a
            # registry architecture), so they are timed in-line: a watchdog-thread
            # hand-off per call would halve the engine's throughput.
            start = time.perf_counter()
            out = policy.act(obs, mask, rng)
            if time.perf_counter() - start > self.time_budget_s:
                raise cf.TimeoutError
            return out
        if self._pool is None:
            self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="policy")
        future = self._pool.submit(policy.act, obs, mask, rng)
        try:
            return future.result(timeout=self.time_budget_s)
        except cf.TimeoutError:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def act(self, policy: Policy, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> ActResult:
        """Ask ``policy`` for one action per row and classify every row."""
        k = len(mask)
        if getattr(policy, "answers_rows", False):
            return self._rows_answered(policy, obs, mask, rng)
        start = time.perf_counter()
        # The policy draws from a copy, so a per-row retry restarts the same streams.
        try:
            raw = self._call(policy, obs, mask, rng.subset(np.arange(k)))
        except cf.TimeoutError:
            elapsed = time.perf_counter() - start
            detail = f"{policy.agent_id} exceeded the {self.time_budget_s}s budget ({elapsed:.2f}s)"
            return ActResult(np.full(k, -1), np.full(k, TIMEOUT, np.int8), detail)
        except PolicyCrashed as exc:
            detail = f"{policy.agent_id} crashed: {exc}"
            return ActResult(np.full(k, -1), np.full(k, ERROR, np.int8), detail)
        except Exception as exc:  # noqa: BLE001 - any policy failure is a forfeit, never a crash
            if k == 1:
                detail = f"{policy.agent_id} raised {type(exc).__name__}: {exc}"
                return ActResult(np.full(1, -1), np.full(1, ERROR, np.int8), detail)
            return self._retry_rows(policy, obs, mask, rng)
        return validate_actions(raw, mask, policy.agent_id)

    def begin(self, policy: Policy, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> Callable[[], ActResult]:
        """Start asking ``policy``; the returned function gives its :class:`ActResult`.

        A policy that judges its rows and can ``submit`` (a connected agent) is asked now
        and answered when the function is called, so the engine can ask the other
        policies of the ply meanwhile; any other policy is asked at once."""
        if not answers_later(policy):
            res = self.act(policy, obs, mask, rng)
            return lambda: res
        k = len(mask)
        try:
            finish = policy.submit(obs, mask, rng)
        except Exception as exc:  # a transport failure forfeits these rows, never the engine
            log.exception("%s failed to take %d rows", policy.agent_id, k)
            failed = ActResult(np.full(k, -1), np.full(k, ERROR, np.int8), f"{policy.agent_id}: {exc}")
            return lambda: failed
        return lambda: self._rows_answered(policy, obs, mask, rng, finish)

    @staticmethod
    def _rows_answered(policy: Policy, obs: np.ndarray, mask: np.ndarray, rng: MatchRng,
                       finish: Callable[[], ActResult] | None = None) -> ActResult:
        k = len(mask)
        try:
            res = finish() if finish is not None else policy.act(obs, mask, rng)
        except Exception as exc:
            log.exception("%s failed to answer %d rows", policy.agent_id, k)
            return ActResult(np.full(k, -1), np.full(k, ERROR, np.int8), f"{policy.agent_id}: {exc}")
        if not isinstance(res, ActResult) or res.actions.shape != (k,) or res.codes.shape != (k,):
            return ActResult(np.full(k, -1), np.full(k, ERROR, np.int8),
                             f"{policy.agent_id} answered {type(res).__name__}, not one result per row")
        return res

    def _retry_rows(self, policy: Policy, obs, mask, rng: MatchRng) -> ActResult:
        k = len(mask)
        actions = np.full(k, -1, dtype=np.int64)
        codes = np.empty(k, dtype=np.int8)
        details = []
        for i in range(k):
            one = self.act(policy, obs[i : i + 1], mask[i : i + 1], rng.subset(np.array([i])))
            actions[i], codes[i] = one.actions[0], one.codes[0]
            if one.detail:
                details.append(one.detail)
        return ActResult(actions, codes, details[0] if details else "")


def validate_actions(raw: object, mask: np.ndarray, agent_id: str) -> ActResult:
    """Classify a policy's raw output row by row."""
    k, num_actions = mask.shape
    try:
        out = np.asarray(raw)
    except Exception:  # noqa: BLE001 - arbitrary objects may fail to convert
        out = np.empty(0)
    if out.shape != (k,) or not (np.issubdtype(out.dtype, np.number) or out.dtype == bool):
        detail = f"{agent_id} returned {out.dtype} array of shape {out.shape}, expected ({k},) ints"
        return ActResult(np.full(k, -1), np.full(k, INVALID, np.int8), detail)
    codes = np.zeros(k, dtype=np.int8)
    if np.issubdtype(out.dtype, np.floating):
        finite = np.isfinite(out)
        integral = finite & (np.floor(np.where(finite, out, 0)) == np.where(finite, out, 0))
        codes[~integral] = INVALID
        out = np.where(integral, out, -1)
    actions = out.astype(np.int64)
    in_range = (actions >= 0) & (actions < num_actions)
    legal = in_range & mask[np.arange(k), np.clip(actions, 0, num_actions - 1)]
    codes[(codes == OK) & ~legal] = ILLEGAL
    detail = ""
    if (codes == INVALID).any():
        detail = f"{agent_id} returned a non-finite or non-integer action"
    elif (codes == ILLEGAL).any():
        detail = f"{agent_id} played an illegal or out-of-range action"
    return ActResult(actions, codes, detail)
