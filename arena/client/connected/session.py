"""A registered connected agent played by this process: what ``arena connect`` and
:meth:`arena.client.ArenaClient.connect` run.

A :class:`ConnectedSession` holds the agent the server registered (or found: the same
owner and name reuse one agent) and the :class:`~arena.client.connected.client.AgentClient`
that plays it. :meth:`ConnectedSession.run` plays in the calling thread until the
client stops, reaches ``max_matches`` or is refused for good (Ctrl-C stops it cleanly);
:meth:`ConnectedSession.start` plays in a background thread instead, for callers that
do something else meanwhile (the CLI's live display, a notebook, a test).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Self

from arena.client.connected.client import AgentClient, Progress
from envs.errors import ArenaError

log = logging.getLogger(__name__)


@dataclass
class ConnectedSession:
    """One connected agent and the client playing it.

    Attributes:
        agent: The agent as the server returned it at registration (``AgentPublic``).
        created: The registration made the agent (``False``: an existing one was reused).
        client: The protocol client.
        error: Why a background run ended early (e.g. a
            :class:`~arena.client.connected.client.ConnectionRefused`), else ``None``.
    """

    agent: dict[str, Any]
    created: bool
    client: AgentClient
    error: BaseException | None = None
    _thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def agent_id(self) -> int:
        return int(self.agent["id"])

    @property
    def progress(self) -> Progress:
        """Connection state, requests answered, matches and W/D/L so far."""
        return self.client.progress

    @property
    def running(self) -> bool:
        """A background run is still going."""
        return self._thread is not None and self._thread.is_alive()

    def run(self) -> Progress:
        """Play in this thread until stopped, done or refused; Ctrl-C stops cleanly.

        Raises:
            ConnectionRefused: A bad token, someone else's agent, a retired agent.
        """
        try:
            return self.client.run()
        except KeyboardInterrupt:
            self.client.stop()
            return self.client.progress

    def start(self) -> Self:
        """Play in a daemon thread; :meth:`stop` ends it, :attr:`error` says why it ended early."""
        if self._thread is not None:
            raise RuntimeError("this session has already been started")

        def play() -> None:
            try:
                self.client.run()
            except ArenaError as exc:  # refused for good: kept for the caller, in another thread
                self.error = exc
            except Exception as exc:
                log.exception("agent %d's client failed", self.agent_id)
                self.error = exc

        self._thread = threading.Thread(target=play, name=f"arena-agent-{self.agent_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 10.0) -> Progress:
        """Stop playing (the socket closes within about a second) and wait for the thread."""
        self.client.stop()
        self.wait(timeout)
        return self.client.progress

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a background run to end; ``True`` if it has."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.running

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
