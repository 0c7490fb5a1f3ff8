"""The service's foundations, imported by every other part of arena/.

- ``settings``: the ``ARENA_*`` environment (pydantic-settings) and Ray's init arguments.
- ``logs``: structured logging set-up shared by the API, the ladder and the league manager.
- ``metrics``: Prometheus counters and gauges, and the metrics server.
- ``agent_status``: an agent's lifecycle (its statuses and the allowed moves between them).
- ``errors``: the service's own errors (forbidden, conflict, too many requests, ...); the games'
  and agents' errors stay in ``envs.errors``, the map to HTTP statuses in ``arena.api.errors``.
"""
