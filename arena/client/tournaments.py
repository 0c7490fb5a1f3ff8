"""The tournament endpoints (``/tournaments``): create (admins and organizers), list, show.

:class:`TournamentEndpoints` is one of the groups :class:`arena.client.ArenaClient` joins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arena.client.transport import JSON, ApiTransport

__all__ = ["TournamentEndpoints", "points"]


def points(value: float | None) -> str:
    """Tournament points as a chess crosstable writes them: 1, ½, 2½ (``None``: empty)."""
    if value is None:
        return ""
    whole, half = int(value), value - int(value) >= 0.5
    return ("½" if half else "0") if whole == 0 else f"{whole}{'½' if half else ''}"


class TournamentEndpoints(ApiTransport):
    """``/tournaments``: organizers create them, anyone who may see them reads them."""

    def tournaments(self, competition: int | None = None) -> JSON:
        """``GET /tournaments``: the ones you may see (``competition``: only its)."""
        return self._get("/tournaments", competition=competition)

    def tournament(self, tournament_id: int) -> JSON:
        """``GET /tournaments/{id}``: rounds, games, standings and crosstable now."""
        return self._get(f"/tournaments/{int(tournament_id)}")

    def create_tournament(self, body: Mapping[str, Any]) -> JSON:
        """``POST /tournaments``; the server's background service plays it at once."""
        return self.request("POST", "/tournaments", json=dict(body))
