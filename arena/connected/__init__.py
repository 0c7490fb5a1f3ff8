"""Connected agents: an agent with no weights, played by its owner's process over a WebSocket.

The server side is :mod:`~arena.connected.gateway` (the socket, bridged to Redis),
:mod:`~arena.connected.broker` and :mod:`~arena.connected.policy` (the engine's view);
the wire protocol is :mod:`~arena.connected.protocol` (docs/connected.md). The client
side is :mod:`~arena.connected.client` (:class:`~arena.connected.client.AgentClient`),
:mod:`~arena.connected.session` (register + play, what ``arena connect`` runs) and
:mod:`~arena.connected.kaggle` (Kaggle ConnectX agents as they are).

The two decorators below say how a decision function wants to be called, so that
``arena connect FILE:FUNCTION`` needs no flag for it::

    import arena.connected

    @arena.connected.batched
    def act(obs_batch, mask_batch):          # (k, *obs_shape), (k, num_actions) -> k actions
        ...

    @arena.connected.whole_request(text=True)
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
