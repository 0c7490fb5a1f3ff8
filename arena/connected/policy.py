"""A connected agent, as the engine sees it: one batched :class:`~agents.policy.Policy`.

Each ``act`` is one decision batch: every match of the call in which the agent moves,
sent as one request through Redis to the API process holding the agent's socket
(:mod:`arena.connected.broker`), answered with one action per row. The policy keeps
the clock (:mod:`arena.connected.time_controls`) and judges every row itself, so a
late, missing, malformed or illegal answer forfeits only the matches it concerns:

* no answer by the deadline: ``timeout`` (or ``disconnected`` when the socket dropped
  and did not come back within the grace);
* a match whose overage bank ran dry: ``timeout``;
* a row without an integer action, or an answer the API refused: ``invalid_output``;
* an action outside the mask: ``illegal_action`` (logged, so the replay shows it).

The engine learns which match a row belongs to from :meth:`bind_matches` (called with
the jobs before they play) and the row's seed in its :class:`~agents.policy.MatchRng`.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable

import msgpack
import numpy as np

from agents.policy import MatchRng
from arena.connected.broker import ConnectedBroker, Presence
from arena.connected.protocol import pack_array
from arena.connected.time_controls import TimeControl
from arena.engine.guard import ILLEGAL, INVALID, OK, TIMEOUT, ActResult
from arena.engine.records import TERMINATION_CODE, MatchJob, MatchRecord, Termination
from envs.text import render_observations

log = logging.getLogger(__name__)

DISCONNECTED = TERMINATION_CODE[Termination.DISCONNECTED]
POLL_S = 0.25
"""How often a wait for an answer looks at the agent's presence."""
PRESENCE_FRESH_S = 1.0
"""How long a presence read from Redis is trusted before it is read again."""


class ConnectedPolicy:
    """A connected agent's decisions, asked over the broker.

    Args:
        agent_key: The agent's key in match records.
        agent_id: Its database id (its Redis keys are built from it).
        env_id: The env it plays.
        broker: The engine's side of the broker.
        clock: Its time control.
    """

    answers_rows = True  # judges its rows itself (arena.engine.guard)
    bounded_runtime = True  # never hangs: every wait ends at the request's deadline
    weights_hash = None

    def __init__(self, agent_key: str, agent_id: int, env_id: str, broker: ConnectedBroker,
                 clock: TimeControl) -> None:
        self.agent_id = agent_key
        self.db_id = agent_id
        self.env_id = env_id
        self.broker = broker
        self.clock = clock
        self._lock = threading.Lock()
        self._match_of: dict[int, str] = {}
        self._bank: dict[str, float] = {}
        self._presence: tuple[float, Presence] | None = None
        self._bound_at: float | None = None  # unix seconds matches were last bound (a grace runs from it)

    # -- the engine's hooks ---------------------------------------------------------------
    def bind_matches(self, jobs: Iterable[MatchJob]) -> None:
        """Learn the match ids of the seeds about to play (and open their overage banks)."""
        now = time.time()
        with self._lock:
            for job in jobs:
                if self.agent_id in job.agents:
                    self._match_of[job.seed] = job.match_id
                    self._bank.setdefault(job.match_id, self.clock.overage_s)
                    self._bound_at = now

    def finish_matches(self, records: Iterable[MatchRecord]) -> None:
        """Tell the client how its matches ended and close their banks."""
        messages = []
        with self._lock:
            for r in records:
                if self.agent_id not in r.seats:
                    continue
                self._match_of.pop(r.seed, None)
                self._bank.pop(r.match_id, None)
                seats = [i for i, a in enumerate(r.seats) if a == self.agent_id]
                messages.append({"type": "result", "match": r.match_id, "seats": seats, "winner": r.winner,
                                 "scores": [float(s) for s in r.scores], "termination": r.termination,
                                 "forfeit_seat": r.forfeit_seat, "detail": r.detail})
        try:
            self.broker.publish_results(self.db_id, messages)
        except Exception:
            log.warning("could not publish %d results to agent %s", len(messages), self.agent_id, exc_info=True)

    # -- one decision batch ---------------------------------------------------------------
    def act(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> ActResult:
        return self.submit(obs, mask, rng)()

    def submit(self, obs: np.ndarray, mask: np.ndarray, rng: MatchRng) -> Callable[[], ActResult]:
        """Send the decision batch now; the returned function waits for the answer and judges
        it. The engine asks the other policies of the ply in between, so the round trip
        overlaps their work."""
        k = len(mask)
        seeds, overage = rng.seeds.tolist(), self.clock.overage_s
        with self._lock:
            match_of, bank = self._match_of, self._bank
            matches = [match_of.get(s, f"seed:{s}") for s in seeds]
            banks = np.array([bank.get(m, overage) for m in matches], dtype=np.float64)
        presence = self._await_presence()
        if presence is None:
            gone = _all(k, DISCONNECTED, f"{self.agent_id} is not connected")
            return lambda: gone
        budget = self.clock.act_timeout_s
        deadline = budget + float(banks.max(initial=0.0))
        request_id = uuid.uuid4().hex
        message = {
            "type": "request", "id": request_id, "env": self.env_id,
            "budget_ms": int(budget * 1000), "deadline_ms": int(deadline * 1000),
            "matches": matches, "seats": rng.seats.tolist(), "plies": rng.plies.tolist(),
            "overage_ms": (banks * 1000).astype(np.int64).tolist(),
            "obs": pack_array(obs), "mask": pack_array(mask),
        }
        if presence.text:
            message["text"] = render_observations(self.env_id, obs, mask)
        sent = time.monotonic()
        self.broker.send(self.db_id, request_id, msgpack.packb(message, use_bin_type=True), k,
                         time.time() + deadline)
        return lambda: self._collect(request_id, matches, banks, mask, sent, budget, deadline)

    def _collect(self, request_id: str, matches: list[str], banks: np.ndarray, mask: np.ndarray, sent: float,
                 budget: float, deadline: float) -> ActResult:
        """Wait for the answer to ``request_id``, charge the banks, judge every row."""
        k = len(mask)
        reply, why = self._wait(request_id, sent, deadline)
        overrun = time.monotonic() - sent - budget
        if overrun > 0:  # within the budget the banks stay as they are
            banks -= overrun
            with self._lock:
                for m, left in zip(matches, banks.tolist()):
                    if m in self._bank:
                        self._bank[m] = left
        if reply is None:
            code = DISCONNECTED if why == "disconnected" else TIMEOUT
            text = ("dropped its connection" if code == DISCONNECTED
                    else f"did not answer within {deadline:.1f}s")
            return _all(k, code, f"{self.agent_id} {text}")
        if "error" in reply:
            return _all(k, INVALID, f"{self.agent_id} sent an answer the server refused: {reply['error']}")
        return _judge(reply.get("actions"), mask, banks, self.agent_id)

    def _await_presence(self) -> Presence | None:
        """The agent's connection, waiting up to the grace for one to come (back).

        The grace runs from the later of the drop (the gateway notes when it released the
        socket) and the binding of the agent's matches (a person's browser connects after
        the game was claimed), not from this request: the engine asks the agents of a batch
        one after another, and a batch with many offline agents waits one grace, not one
        per agent. Without either mark it runs from now. A presence seen in the last
        :data:`PRESENCE_FRESH_S` is trusted without asking Redis again (a drop after it is
        noticed while waiting for the answer)."""
        cached = self._presence
        if cached is not None and time.monotonic() - cached[0] < PRESENCE_FRESH_S:
            return cached[1]
        give_up = None
        while True:
            presence, seen = self.broker.presence_seen(self.db_id)
            now = time.monotonic()
            self._presence = None if presence is None else (now, presence)
            if presence is not None:
                return presence
            if give_up is None:
                marks = [t for t in (seen, self._bound_at) if t is not None]
                since = max(0.0, time.time() - max(marks)) if marks else 0.0
                give_up = now + max(0.0, self.clock.grace_s - since)
            if now >= give_up:
                return None
            time.sleep(min(POLL_S, give_up - now))

    def _wait(self, request_id: str, sent: float, deadline: float) -> tuple[dict | None, str]:
        """The reply, or ``(None, "timeout" | "disconnected")``."""
        offline_since: float | None = None
        while True:
            now = time.monotonic()
            left = sent + deadline - now
            if left <= 0:
                self.broker.cancel(request_id)
                return None, "timeout"
            reply = self.broker.wait_reply(request_id, min(left, POLL_S))
            if reply is not None:
                return reply, ""
            if self.broker.presence(self.db_id) is None:
                self._presence = None
                offline_since = offline_since or time.monotonic()
                if time.monotonic() - offline_since >= self.clock.grace_s:
                    self.broker.cancel(request_id)
                    return None, "disconnected"
            else:
                offline_since = None


def _all(k: int, code: int, detail: str) -> ActResult:
    return ActResult(np.full(k, -1, dtype=np.int64), np.full(k, code, dtype=np.int8), detail)


def _judge(actions: object, mask: np.ndarray, banks: np.ndarray, agent_id: str) -> ActResult:
    """Classify every row of an answer the API accepted (one entry per row)."""
    k, num_actions = mask.shape
    if not isinstance(actions, list) or len(actions) != k:
        return _all(k, INVALID, f"{agent_id} answered {type(actions).__name__}, not {k} actions")
    given = np.array(actions)  # all integers (the common case): one conversion, no loop
    if given.dtype.kind not in "iub" or given.shape != (k,):
        given = np.array([a if isinstance(a, int) else -(2**40) for a in actions], dtype=np.int64)
    given = given.astype(np.int64, copy=False)
    codes = np.zeros(k, dtype=np.int8)
    codes[given == -(2**40)] = INVALID
    in_range = (given >= 0) & (given < num_actions)
    legal = in_range & mask[np.arange(k), np.clip(given, 0, num_actions - 1)]
    codes[(codes == OK) & ~legal] = ILLEGAL
    codes[banks < 0] = TIMEOUT
    out = np.where(codes == INVALID, -1, given)
    detail = ""
    if (codes == TIMEOUT).any():
        detail = f"{agent_id} used up the overage time of {int((codes == TIMEOUT).sum())} match(es)"
    elif (codes == INVALID).any():
        detail = f"{agent_id} answered a row without an integer action"
    elif (codes == ILLEGAL).any():
        detail = f"{agent_id} played an illegal or out-of-range action"
    return ActResult(out, codes, detail)


class ConnectedPolicies:
    """Connected agents' policies for one worker: picklable (a Redis URL and key prefix),
    so a Ray worker builds its own broker next to the same Redis.

    Args:
        redis_url: The service's Redis.
        prefix: Its key namespace.
    """

    def __init__(self, redis_url: str, prefix: str = "arena") -> None:
        self.redis_url = redis_url
        self.prefix = prefix
        self._broker: ConnectedBroker | None = None
        self._policies: dict[tuple[str, str], ConnectedPolicy] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {"redis_url": self.redis_url, "prefix": self.prefix}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["redis_url"], state["prefix"])

    @property
    def broker(self) -> ConnectedBroker:
        if self._broker is None:
            from arena.snapshots.keys import RedisKeys
            from arena.storage.redis_server import redis_client

            self._broker = ConnectedBroker(redis_client(self.redis_url), RedisKeys(self.prefix))
        return self._broker

    def get(self, env_id: str, source) -> ConnectedPolicy:
        """The policy of ``source`` (an :class:`~arena.runners.AgentSource` with ``connected``)."""
        from arena.connected.time_controls import time_control

        with self._lock:
            found = self._policies.get((env_id, source.key))
            if found is None:
                found = ConnectedPolicy(source.key, source.connected, env_id, self.broker,
                                        time_control(env_id, human=source.human))
                self._policies[(env_id, source.key)] = found
            return found
