"""The endpoints of results: leaderboards, matches, challenges, probes and the boards derived
from the match log (seats, payoff, integrity).

:class:`MatchEndpoints` is one of the groups :class:`arena.client.ArenaClient` joins.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from arena.client.errors import ArenaTimeout
from arena.client.transport import JSON, ApiTransport

__all__ = ["MatchEndpoints"]


class MatchEndpoints(ApiTransport):
    """Ratings, matches and what is computed from them; challenges and probes that add to them."""

    def leaderboard(self, env: str, role: str | None = None, limit: int = 50, offset: int = 0) -> JSON:
        """``GET /leaderboard``: ``{env, role, count, data: [rows best first]}``."""
        return self._get("/leaderboard", env=env, role=role, limit=limit, offset=offset)

    def iter_leaderboard(self, env: str, role: str | None = None, page_size: int = 100) -> Iterator[JSON]:
        """Every leaderboard row of ``env`` (and ``role``), best first."""
        offset = 0
        while True:
            page = self.leaderboard(env, role, limit=page_size, offset=offset)["data"]
            yield from page
            if len(page) < page_size:
                return
            offset += len(page)

    def matches(self, env: str | None = None, agent: int | None = None, cursor: str | None = None,
                limit: int = 50) -> JSON:
        """``GET /matches``: one newest-first page, ``{data, next_cursor}``.

        Pass the page's ``next_cursor`` back as ``cursor`` for the next page; it is
        ``None`` on the last page.
        """
        return self._get("/matches", env=env, agent=agent, cursor=cursor, limit=limit)

    def iter_matches(self, env: str | None = None, agent: int | None = None, page_size: int = 100,
                     max_items: int | None = None) -> Iterator[JSON]:
        """Match summaries newest first, following ``next_cursor`` across pages.

        Args:
            env: Only matches of this env.
            agent: Only matches this agent played.
            page_size: Matches per request.
            max_items: Stop after this many (``None``: the whole history).
        """
        cursor: str | None = None
        seen = 0
        while True:
            page = self.matches(env, agent, cursor, limit=page_size)
            for item in page["data"]:
                if max_items is not None and seen >= max_items:
                    return
                seen += 1
                yield item
            cursor = page.get("next_cursor")
            if not cursor or not page["data"]:
                return

    def match(self, match_id: str) -> JSON:
        """``GET /matches/{id}``: one match with its full record (actions, seed, ...)."""
        return self._get(f"/matches/{match_id}")

    def challenge(self, env: str, agents: list[int] | tuple[int, ...], matches: int = 2,
                  rated: bool = False, *, wait: bool = True, timeout: float = 600.0, interval: float = 0.25,
                  on_progress: Callable[[JSON], None] | None = None) -> JSON:
        """``POST /challenges``: queue ``matches`` between agents (one agent id per team); the
        server's background service plays them.

        Args:
            wait: Poll ``GET /challenges/{id}`` until it is done or failed.
            timeout: Seconds to wait at most.
            interval: Seconds between polls (grows to at most 2 s).
            on_progress: Called with the challenge after every poll (a progress bar).

        Returns:
            The challenge: ``{id, status, match_ids, recorded, results, rated, ...}``; with
            ``wait`` its status is ``done`` (``results`` filled) or ``failed`` (``error``).

        Raises:
            ArenaTimeout: ``wait`` and it was still queued or playing after ``timeout``.
        """
        body = {"env": env, "agents": [int(a) for a in agents], "matches": matches, "rated": rated}
        queued = self.request("POST", "/challenges", json=body)
        if not wait:
            return queued
        return self.wait_for_challenge(queued["id"], timeout=timeout, interval=interval, on_progress=on_progress)

    def challenge_status(self, challenge_id: str) -> JSON:
        """``GET /challenges/{id}``: a challenge's status, progress and (once done) results."""
        return self._get(f"/challenges/{challenge_id}")

    def wait_for_challenge(self, challenge_id: str, timeout: float = 600.0, interval: float = 0.25,
                           on_progress: Callable[[JSON], None] | None = None) -> JSON:
        """Polls ``GET /challenges/{id}`` until it is ``done`` or ``failed``; the challenge.

        Raises:
            ArenaTimeout: Still queued or playing after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            challenge = self.challenge_status(challenge_id)
            if on_progress is not None:
                on_progress(challenge)
            if challenge.get("status") in ("done", "failed"):
                return challenge
            left = deadline - time.monotonic()
            if left <= 0:
                raise ArenaTimeout(f"challenge {challenge_id} is still {challenge.get('status')!r} after "
                                   f"{timeout:g} s (is the server's background service running?)")
            time.sleep(min(interval, left))
            interval = min(interval * 1.5, 2.0)

    def probe(self, agent_id: int, budget_env_steps: int | None = None, seed: int = 0) -> JSON:
        """``POST /agents/{id}/probes``: queue an exploitability probe (owner or admin); the probe."""
        body: dict[str, Any] = {"seed": seed}
        if budget_env_steps is not None:
            body["budget_env_steps"] = budget_env_steps
        return self.request("POST", f"/agents/{agent_id}/probes", json=body)

    def probes(self, agent_id: int, limit: int = 20) -> JSON:
        """``GET /agents/{id}/probes``: the agent's probes, newest first."""
        return self._get(f"/agents/{agent_id}/probes", limit=limit)

    def seats(self, env: str) -> JSON:
        """``GET /envs/{env}/seats``: results by seat, what the first move is worth."""
        return self._get(f"/envs/{env}/seats")

    def integrity(self, env: str) -> JSON:
        """``GET /admin/integrity``: integrity flags of an env's ladder (admin token)."""
        return self._get("/admin/integrity", env=env)

    def payoff(self, env: str, top: int | None = None) -> JSON:
        """``GET /envs/{env}/payoff``: the win-rate matrix of the ``top`` agents."""
        return self._get(f"/envs/{env}/payoff", top=top)
