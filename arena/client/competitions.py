"""The competition endpoints (``/competitions``): list, create, join, teams, entries, boards,
standings and the final evaluation's match log; and the verifier that recomputes the standings
and the certificate from that log (``arena competition verify``).

:class:`CompetitionEndpoints` is one of the groups :class:`arena.client.ArenaClient` joins.
The verifier uses only the pure certification (:mod:`league.competitions.certification`),
never the server's code.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from arena.client.agents import upload_parts
from arena.client.transport import JSON, ApiTransport

__all__ = ["CompetitionEndpoints", "Verification", "verify_standings"]


class CompetitionEndpoints(ApiTransport):
    """``/competitions``: organizers' and entrants' calls."""

    def competitions(self, state: str | None = None, limit: int = 50, offset: int = 0) -> JSON:
        """``GET /competitions``: the ones you may see (public, and private ones you joined)."""
        return self._get("/competitions", state=state, limit=limit, offset=offset)

    def competition(self, competition_id: int) -> JSON:
        return self._get(f"/competitions/{int(competition_id)}")

    def create_competition(self, body: Mapping[str, Any], open_now: bool = False) -> JSON:
        """``POST /competitions`` (admins and organizers), then ``/open`` if ``open_now``."""
        made = self.request("POST", "/competitions", json=dict(body))
        return self.request("POST", f"/competitions/{made['id']}/open") if open_now else made

    def open_competition(self, competition_id: int) -> JSON:
        return self.request("POST", f"/competitions/{int(competition_id)}/open")

    def join_competition(self, competition_id: int, invite_code: str | None = None) -> JSON:
        return self.request("POST", f"/competitions/{int(competition_id)}/join", json={"invite_code": invite_code})

    def create_team(self, competition_id: int, name: str) -> JSON:
        return self.request("POST", f"/competitions/{int(competition_id)}/teams", json={"name": name})

    def join_team(self, competition_id: int, join_code: str) -> JSON:
        return self.request("POST", f"/competitions/{int(competition_id)}/teams/join", json={"join_code": join_code})

    def merge_team(self, competition_id: int, join_code: str) -> JSON:
        return self.request("POST", f"/competitions/{int(competition_id)}/teams/merge", json={"join_code": join_code})

    def teams(self, competition_id: int) -> JSON:
        return self._get(f"/competitions/{int(competition_id)}/teams")

    def quota(self, competition_id: int) -> JSON:
        """``GET /competitions/{id}/quota``: my team's submissions today and its active entries."""
        return self._get(f"/competitions/{int(competition_id)}/quota")

    def submit_entry(self, competition_id: int, weights: str | os.PathLike | bytes,
                     spec: str | os.PathLike | bytes | Mapping[str, Any] | None = None,
                     name: str | None = None, env: str | None = None) -> JSON:
        """``POST /competitions/{id}/entries``: the upload of ``submit_agent``, as your team's entry."""
        files, form = upload_parts(weights, spec, name, env)
        return self.request("POST", f"/competitions/{int(competition_id)}/entries", files=files, data=form)

    def entries(self, competition_id: int, team: int | None = None) -> JSON:
        return self._get(f"/competitions/{int(competition_id)}/entries", team=team)

    def competition_board(self, competition_id: int, final: bool = False) -> JSON:
        return self._get(f"/competitions/{int(competition_id)}/board", final=str(final).lower())

    def standings(self, competition_id: int) -> JSON:
        return self._get(f"/competitions/{int(competition_id)}/standings")

    def competition_matches(self, competition_id: int, final: bool = True) -> bytes:
        """The board's match log as CSV bytes (the final evaluation's by default)."""
        response = self._send("GET", f"/competitions/{int(competition_id)}/matches/export",
                              params={"final": str(final).lower(), "format": "csv"})
        return response.content


@dataclass(frozen=True)
class Verification:
    """What the verifier recomputed and whether it equals the published standings."""

    equal: bool
    matches: int
    recomputed: dict[str, Any]
    published: dict[str, Any] | None


def games_from_csv(data: bytes) -> list[Any]:
    """The final evaluation's games from its match-log CSV, in ``match_seq`` order."""
    from league.evaluation.headtohead import Game

    rows = sorted(csv.DictReader(io.StringIO(data.decode("utf-8"))), key=lambda r: int(r["match_seq"]))
    return [Game(int(r["seat0_agent_id"]), int(r["seat1_agent_id"]),
                 0.5 if r["winner"] == "" else (1.0 if int(r["winner"]) == 0 else 0.0)) for r in rows]


def verify_standings(competition: Mapping[str, Any], pool: list[int], log_csv: bytes,
                     published: Mapping[str, Any] | None) -> Verification:
    """Recompute the standings and the certificate from the final evaluation's match log.

    Args:
        competition: ``GET /competitions/{id}`` (K, confidence, tie margin, floor).
        pool: The frozen entries' agent ids, in entry order (``GET /competitions/{id}/entries``).
        log_csv: ``GET /competitions/{id}/matches/export?final=true&format=csv``.
        published: The standings' ``result`` (``GET /competitions/{id}/standings``).
    """
    from league.competitions.certification import CertificationConfig, certify  # numpy, trueskill: on use

    config = CertificationConfig(top_k=competition["top_k"], confidence=competition["confidence"],
                                 tie_margin=competition["tie_margin"], floor=competition["final_floor"])
    games = games_from_csv(log_csv)
    certificate = certify(pool, games, config)
    stopped = (published or {}).get("stopped", "")
    recomputed = json.loads(json.dumps({**certificate.to_json(), "matches": len(games), "stopped": stopped},
                                       allow_nan=False))
    return Verification(recomputed == published, len(games), recomputed, dict(published) if published else None)
