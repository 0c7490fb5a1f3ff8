"""Connected agents, the server side: an agent with no weights, played by its owner's process
over a WebSocket.

:mod:`~arena.connected.gateway` (the socket, bridged to Redis), :mod:`~arena.connected.broker`
and :mod:`~arena.connected.policy` (the engine's view: one batched ``Policy``), and
:mod:`~arena.connected.time_controls` (each env's clock). The wire protocol,
:mod:`~arena.connected.protocol` (docs/connected.md), is shared with the client side,
:mod:`arena.client.connected` (the Python client, sessions, the Kaggle adapter).
"""
