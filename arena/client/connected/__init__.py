"""The client side of connected agents: play an agent from your own process over a WebSocket.

:mod:`~arena.client.connected.client` (:class:`~arena.client.connected.client.AgentClient`:
answers the server's decision batches, reconnects), :mod:`~arena.client.connected.session`
(register + play, what ``arena connect`` and :meth:`arena.client.ArenaClient.connect` run) and
:mod:`~arena.client.connected.kaggle` (Kaggle ConnectX agents as they are). The wire protocol,
shared with the server, is :mod:`arena.connected.protocol` (docs/connected.md); the server side
is :mod:`arena.connected`.

The two decorators below say how a decision function wants to be called, so that
``arena connect FILE:FUNCTION`` needs no flag for it::

    import arena.client.connected

    @arena.client.connected.batched
    def act(obs_batch, mask_batch):          # (k, *obs_shape), (k, num_actions) -> k actions
        ...

    @arena.client.connected.whole_request(text=True)
    def act(request):                        # the protocol's request message -> one action per row
        ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["batched", "whole_request"]


def batched(fn: F) -> F:
    """Mark ``fn(obs_batch, mask_batch) -> actions`` as answering whole decision batches."""
    fn.arena_batched = True  # type: ignore[attr-defined]
    return fn


def whole_request(fn: F | None = None, *, text: bool = False) -> Any:
    """Mark ``fn(request) -> actions`` as taking the protocol's whole ``request`` message
    (seats, plies, budgets, and with ``text=True`` the text renderings in ``request["text"]``).

    Usable bare (``@whole_request``) or with arguments (``@whole_request(text=True)``).
    """

    def mark(f: F) -> F:
        f.arena_request = True  # type: ignore[attr-defined]
        f.arena_text = text  # type: ignore[attr-defined]
        return f

    return mark(fn) if fn is not None else mark
