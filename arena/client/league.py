"""Train anywhere, in one of Arena's leagues: the client of the league API (docs/league_api.md).

::

    from arena.client import LeagueClient

    league = LeagueClient("http://127.0.0.1:8000", token, "my-league", "connect_four-v3")
    for round in range(100):
        drawn = league.sample_opponents(8)                  # PFSP in the learner's AlphaStar role
        env = arena.gym.make_vec("connect_four-v3", 64, opponents=league.gym_opponents(drawn, "file:me.onnx"))
        ...                                                 # train, count results per opponent name
        league.report({"heuristic": (30, 2, 8), "arena:12@http://127.0.0.1:8000": (5, 0, 15)})
        export_submission(model, "connect_four-v3", "me.onnx")
        league.push_snapshot("me.onnx")                     # validated, rated, joins the pool

The server keeps the league (learners, win rates, snapshots): a trainer started again
with the same league name continues where the last one stopped (:attr:`LeagueClient.resumed`).
Opponents come back as :class:`Opponent` rows; :meth:`LeagueClient.gym_opponents` turns them
into ``arena.gym`` opponents (scripted agents by name, neural ones downloaded with your
token and validated, as ``file:`` names). Only the league's owner draws, reports and pushes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena.client.errors import ArenaConnectionError
from arena.client.files import read_file, spec_text, weights_path
from arena.client.http import ArenaClient
from arena.client.published import pull_published
from arena.client.transport import ClosedOnExit
from envs.errors import ArenaError

__all__ = ["LeagueClient", "Opponent", "tally"]

SELF = "self"
Counts = tuple[int, int, int] | Mapping[str, int]


@dataclass(frozen=True)
class Opponent:
    """One opponent drawn by the league.

    Attributes:
        opponent: ``"self"`` (your current weights) or the agent id: what results name.
        kind: ``self``, ``builtin`` (a scripted agent), ``snapshot`` (the league's) or ``agent``
            (a neural agent of the board).
        name: Display name.
        probability: Its PFSP probability when drawn.
        win_rate: Your learner's win rate against it, as the league has it.
        gym_name: Its ``arena.gym`` opponent name (``None`` for ``self``: play your own policy).
    """

    opponent: str
    kind: str
    name: str
    probability: float
    win_rate: float
    gym_name: str | None
    agent_id: int | None = None


class LeagueClient(ClosedOnExit):
    """An outside trainer's handle on one league (created on first use, else resumed).

    Args:
        server: The Arena server (``http://127.0.0.1:8000``).
        token: Your API token (default ``ARENA_TOKEN`` or the saved token file).
        league: The league's name (1-32 letters, digits, ``_``, ``-``); yours alone on ``env``.
        env: The env it plays (a symmetric game: connect_four-v3, tictactoe-v3, rps-v2).
        learner: Which learner this trainer is (several trainers may share a league).
        role: Its AlphaStar role: ``main``, ``main_exploiter`` or ``league_exploiter``
            (default: the learner's name if it is a role, else ``main``).
        self_play, baseline_share, board_top: A new league's settings (docs/league_api.md).
        timeout: Seconds per request.

    Attributes:
        id: The league's id (its page: ``/leagues/{id}``).
        resumed: The league had learners or snapshots before this client joined it.
    """

    def __init__(self, server: str | None, token: str | None, league: str, env: str, *, learner: str = "main",
                 role: str | None = None, self_play: float = 0.35, baseline_share: float = 0.5, board_top: int = 8,
                 timeout: float = 120.0) -> None:
        self.api = ArenaClient(server, token=token, timeout=timeout)
        self.env, self.learner, self.role = env, learner, role
        body = {"name": league, "env": env, "self_play": self_play, "baseline_share": baseline_share,
                "board_top": board_top}
        try:
            state = self.api.request("POST", "/leagues", json=body)
        except BaseException:
            self.api.close()
            raise
        self.id: int = state["id"]
        self.name: str = state["name"]
        self.resumed = bool(state["learners"] or state["snapshots"])
        self._ids: dict[str, str] = {}  # gym names of drawn opponents -> opponent ids

    def close(self) -> None:
        """Closes the connection pool."""
        self.api.close()

    def __repr__(self) -> str:
        return f"LeagueClient({self.api.base_url!r}, league={self.name!r} (id {self.id}), learner={self.learner!r})"

    # -- reading ---------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """``GET /leagues/{id}``: learners (role, games, win rates, generation) and snapshots."""
        return self.api.request("GET", f"/leagues/{self.id}")

    def learner_state(self) -> dict[str, Any] | None:
        """This learner's row of :meth:`state` (``None`` before its first report or push)."""
        return next((lr for lr in self.state()["learners"] if lr["name"] == self.learner), None)

    def sample_opponents(self, n: int = 1, seed: int | None = None) -> list[Opponent]:
        """``n`` opponents drawn by PFSP over the league's snapshots and the board, in this
        learner's role (``GET /leagues/{id}/opponents``); repeats follow the probabilities."""
        params: dict[str, Any] = {"learner": self.learner, "n": n}
        if self.role:
            params["role"] = self.role
        if seed is not None:
            params["seed"] = seed
        answer = self.api.request("GET", f"/leagues/{self.id}/opponents", params=params)
        self.role = answer["role"]
        drawn = [self._opponent(row) for row in answer["sampled"]]
        self._ids.update({o.gym_name: o.opponent for o in drawn if o.gym_name})
        return drawn

    def _opponent(self, row: Mapping[str, Any]) -> Opponent:
        kind = row["kind"]
        gym_name = None if kind == "self" else row["key"] if kind == "builtin" else \
            f"arena:{row['agent_id']}@{self.api.base_url}"
        return Opponent(row["opponent"], kind, row["name"], row["probability"], row["win_rate"], gym_name,
                        row["agent_id"])

    def gym_opponents(self, opponents: Iterable[Opponent], self_opponent: Any = None) -> list[Any]:
        """``arena.gym`` opponents of ``opponents``, in order (repeats kept: PFSP's proportions).

        Scripted agents keep their names; a neural one is downloaded with this client's
        token (your own snapshots are private) into ``arena.gym``'s cache, validated, and
        named ``file:<path>`` (:func:`arena.client.published.pull_published`); ``self``
        becomes ``self_opponent`` (your current policy: a ``file:`` name or a Policy), or
        is left out when that is ``None``. :meth:`report` knows every name given here.
        """
        out = []
        for o in opponents:
            if o.kind == SELF or o.gym_name is None:
                name = self_opponent
            elif o.kind == "builtin":
                name = o.gym_name
            else:
                name = f"file:{pull_published(o.gym_name, token=self.api.token)}"
                self._ids[name] = o.opponent
            if name is not None:
                out.append(name)
        if not out:
            raise ArenaError("only self-play was drawn and no self_opponent was given; pass your current "
                             "policy (e.g. 'file:me.onnx') or draw more opponents")
        return out

    # -- writing ---------------------------------------------------------------------
    def report(self, results: Mapping[Any, Counts], report_id: str | None = None) -> dict[str, Any]:
        """Report your games against drawn opponents: ``{opponent: (wins, draws, losses)}``.

        An opponent is named by an :class:`Opponent`, ``"self"``, its agent id, or the
        ``arena.gym`` name it was played under (a drawn one: ``info["opponents"]`` of the
        env). Counts may be ``{"wins", "draws", "losses"}`` too. A report lost on the way is
        sent again once with the same id, so it never counts twice.

        Returns:
            ``{"applied", "learner"}``: the learner's totals and win rates after it.
        """
        rows = []
        for key, counts in results.items():
            wins, draws, losses = ((counts.get("wins", 0), counts.get("draws", 0), counts.get("losses", 0))
                                   if isinstance(counts, Mapping) else counts)
            rows.append({"opponent": self._opponent_id(key), "wins": int(wins), "draws": int(draws),
                         "losses": int(losses)})
        body: dict[str, Any] = {"learner": self.learner, "report_id": report_id or uuid.uuid4().hex,
                                "results": rows}
        if self.role:
            body["role"] = self.role
        try:
            return self.api.request("POST", f"/leagues/{self.id}/results", json=body)
        except ArenaConnectionError:
            return self.api.request("POST", f"/leagues/{self.id}/results", json=body)

    def _opponent_id(self, key: Any) -> str:
        if isinstance(key, Opponent):
            return key.opponent
        if isinstance(key, int) or (isinstance(key, str) and (key == SELF or key.isdigit())):
            return str(key)
        if key in self._ids:
            return self._ids[key]
        raise ArenaError(f"{key!r} is not an opponent the league drew for this client; name it by the "
                         "Opponent, its agent id, 'self', or the gym name it was drawn under")

    def push_snapshot(self, file: str | Path, name: str | None = None) -> dict[str, Any]:
        """Push a snapshot: ``x.onnx`` or ``x.safetensors`` with ``x.json`` beside it (what
        ``arena.client.onnx_export.export_submission`` and ``arena agent init`` write).

        It is validated like a submission (``POST /agents``), rated on the ladder, and joins
        the league's pool as this learner's next generation.

        Returns:
            ``{"snapshot": {agent_id, sha256, learner, role, generation}, "agent": {...}}``.
        """
        path = weights_path(Path(file))
        data = read_file(path, "weights file")
        spec = spec_text(path.with_suffix(".json"))
        form = {"spec": spec, "learner": self.learner, "env": self.env}
        if self.role:
            form["role"] = self.role
        if name:
            form["name"] = name
        files = {"weights": (path.name, data, "application/octet-stream")}
        return self.api.request("POST", f"/leagues/{self.id}/snapshots", files=files, data=form)


def tally(outcomes: Sequence[tuple[str, float]]) -> dict[str, tuple[int, int, int]]:
    """``{opponent name: (wins, draws, losses)}`` of ``(name, reward)`` pairs (+1 win, 0 draw, -1 loss)."""
    out: dict[str, list[int]] = {}
    for name, reward in outcomes:
        counts = out.setdefault(name, [0, 0, 0])
        counts[0 if reward > 0 else 1 if reward == 0 else 2] += 1
    return {name: (w, d, lo) for name, (w, d, lo) in out.items()}
