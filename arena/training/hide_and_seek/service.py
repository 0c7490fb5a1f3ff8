"""The hide-and-seek league on the services: its generations in the database, on the web.

:class:`HideAndSeekLeagueRun` wraps :class:`~arena.training.hide_and_seek.league.HideAndSeekLeague`
(snapshot pool, data directory and database from :class:`~arena.storage.wiring.Services`)
and, after every generation (generation 0 included, and any a resumed league left
unpublished):

* registers the generation's hider and seeker snapshots as neural agents of the env
  (:func:`arena.ladder.registration.register_snapshot_agent`, lineage: the league's
  ``leagues`` row ``league.<name>.<env>``, created or reused like the generic trainer's);
* plays ``record_matches`` episodes of that hider against that seeker on the env's
  standard layout through the match engine and stores them as unrated matches
  (:func:`arena.ladder.recorder.record_unrated`): they replay through the plain
  PettingZoo env and in the hide-and-seek viewer; their re-simulated phase values
  (:func:`arena.read.grid_frames.match_phases`) count for the generation and give each
  phase its first replayable occurrence;
* builds the league's :class:`~league.evaluation.phases.PhaseTimeline` (the evaluation's phase
  rates over ``eval_episodes`` standard-layout episodes, or a generation's training episodes
  that started as the standard layout, plus the recorded episodes;
  hider and seeker TrueSkill per generation; with ``--exploiters``, apart from the mains, each
  exploiter's score, edge, freeze and reset per generation) and publishes it
  (:func:`arena.training.phases.publish_timeline`) for ``/leagues/{id}`` and
  ``/api/v1/leagues/{id}/timeline``.

What was recorded is kept in ``<data_dir>/leagues/<name>/hide_and_seek_service.json``,
so a resumed league records each generation once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from typing import Any

from sqlalchemy.orm import Session

from agents.checkpoint import load_checkpoint_bytes
from agents.files import atomic_write
from agents.neural import NeuralPolicy
from arena.engine import MatchJob, play_matches
from arena.ladder.recorder import record_unrated
from arena.ladder.registration import register_env, register_snapshot_agent
from arena.read.grid_frames import match_phases
from arena.snapshots.keys import league_pool
from arena.storage.db import repositories as repo
from arena.storage.wiring import Services
from arena.training.hide_and_seek.config import HideAndSeekLeagueConfig
from arena.training.hide_and_seek.evaluation import GenerationSummary
from arena.training.hide_and_seek.league import HideAndSeekLeague
from arena.training.hide_and_seek.state import read_state
from arena.training.phases import publish_timeline
from arena.training.state import LeagueDir
from envs.hide_and_seek.rules import ROLES
from envs.registry import get_spec
from league.evaluation.phases import PhaseTimeline

log = logging.getLogger(__name__)

SERVICE_FILE = "hide_and_seek_service.json"


def league_row_name(config: HideAndSeekLeagueConfig) -> str:
    """Name of the league's ``leagues`` row (as the generic trainer names its own)."""
    return league_pool(config.name, config.ppo.env_id)


class HideAndSeekLeagueRun:
    """A hide-and-seek league whose generations reach the database (module docstring).

    Args:
        services: Database, snapshot pool and settings (``data_dir``).
        config: League settings (a league saved under this name is resumed).
        record_matches: Episodes of each generation recorded as replayable unrated matches.
    """

    def __init__(self, services: Services, config: HideAndSeekLeagueConfig, record_matches: int = 4) -> None:
        self.services, self.record_matches = services, record_matches
        self.league = HideAndSeekLeague(services.pool, services.settings.data_dir, config)
        self.cfg = self.league.cfg
        self.env_id = self.cfg.ppo.env_id
        self.path = self.league.dir.root / SERVICE_FILE
        saved = json.loads(self.path.read_text()) if self.path.is_file() else {}
        self.recorded: list[dict[str, Any]] = saved.get("recorded", [])
        self.agents: dict[str, dict[str, str]] = saved.get("agents", {})
        self.league_id = self._league_row()
        self.timeline = PhaseTimeline()
        self.publish()

    def _league_row(self) -> int:
        name = league_row_name(self.cfg)

        def create(session: Session) -> int:
            rating_env = register_env(session, self.env_id)
            found = repo.get_league_by_name(session, name)
            return found.id if found else repo.create_league(
                session, name, self.env_id,
                {"kind": "hide_and_seek", "league": self.cfg.name, "rating": rating_env.to_json()})

        return self.services.sessions.write_transaction(create, what=f"creating league {name}")

    @property
    def resumed(self) -> bool:
        return self.league.resumed

    # -- per generation ---------------------------------------------------------------
    def _register(self, summary: GenerationSummary) -> dict[str, NeuralPolicy]:
        """The generation's snapshots as agents of the env; their policies keyed by agent key."""
        policies: dict[str, NeuralPolicy] = {}
        for role in ROLES:
            sha = getattr(summary, f"{role}_sha256")
            weights, spec = self.services.pool.get(sha)
            name = f"{self.cfg.name}-{role}-gen{summary.generation}"
            parent = None
            if summary.generation > 0:
                parent = getattr(self.league.generations[summary.generation - 1], f"{role}_sha256")
            agent = self.services.sessions.write_transaction(
                lambda session, w=weights, s=spec, n=name, p=parent, r=role: register_snapshot_agent(
                    session, self.services.pool, w, s, pool_name=self.league.pools[r], name=n,
                    league_id=self.league_id, parent_sha256=p,
                    meta={"league": self.cfg.name, "generation": summary.generation, "role": r}),
                what=f"registering snapshot {name}")
            policy = NeuralPolicy(load_checkpoint_bytes(weights, spec.to_json()))
            policy.agent_id = agent.key
            policies[role] = policy
            self.agents.setdefault(str(summary.generation), {})[role] = agent.key
        return policies

    def record_generation(self, summary: GenerationSummary) -> list[str]:
        """Register generation ``summary``'s snapshots and record its matches; returns their ids."""
        policies = self._register(summary)
        hider, seeker = policies["hider"], policies["seeker"]
        base = (self.cfg.ppo.seed + 1) * 1_000_003 + 10_007 * summary.generation
        jobs = [MatchJob(seed=base + i, agents=(hider.agent_id, seeker.agent_id))
                for i in range(self.record_matches)]
        records = play_matches(self.env_id, jobs, {hider.agent_id: hider, seeker.agent_id: seeker}) if jobs else []
        with self.services.sessions() as session:
            ids = repo.agent_ids_for_keys(session, self.env_id, [hider.agent_id, seeker.agent_id])
        record_unrated(self.services.sessions, get_spec(self.env_id), records, ids)
        for record in records:
            try:
                phases = match_phases(record)
            except Exception as exc:  # noqa: BLE001 - a replay that fails must not stop the league
                log.warning("cannot re-play match %s for its phases: %s", record.match_id, exc)
                continue
            self.recorded.append({"generation": summary.generation, "match_id": record.match_id,
                                  "phases": phases})
        return [r.match_id for r in records]

    def build_timeline(self) -> PhaseTimeline:
        """Evaluation rates and ratings of every generation, plus the recorded episodes."""
        return make_timeline([asdict(s) for s in self.league.generations], self.cfg.eval_episodes, self.recorded)

    def publish(self) -> int:
        """Record the generations not recorded yet, save, publish the timeline; returns rows written."""
        done = {rec["generation"] for rec in self.recorded} | {int(g) for g in self.agents}
        for summary in self.league.generations:
            if summary.generation not in done:
                self.record_generation(summary)
        atomic_write(self.path, json.dumps({"league_id": self.league_id, "recorded": self.recorded,
                                            "agents": self.agents}).encode())
        self.timeline = self.build_timeline()
        return publish_timeline(self.services.sessions, self.league_id, self.timeline)

    def run(self, minutes: float, *, max_generations: int | None = None,
            on_generation: Callable[[GenerationSummary], None] | None = None) -> list[GenerationSummary]:
        """Train (:meth:`HideAndSeekLeague.run`), publishing after every generation."""
        def after(summary: GenerationSummary) -> None:
            self.publish()
            if on_generation is not None:
                on_generation(summary)

        return self.league.run(minutes, max_generations=max_generations, on_generation=after)


def load_timeline(data_dir, name: str) -> tuple[str, PhaseTimeline] | None:
    """``(env id, timeline)`` of a hide-and-seek league saved under ``data_dir``, or ``None``.

    Read from the files alone (no services): the league's state and what was recorded.
    """
    root = LeagueDir(data_dir, name).root
    state = read_state(root)
    if state is None:
        return None
    service = json.loads((root / SERVICE_FILE).read_text()) if (root / SERVICE_FILE).is_file() else {}
    return state["config"]["ppo"]["env_id"], make_timeline(
        state["generations"], int(state["config"]["eval_episodes"]), service.get("recorded", []))


def make_timeline(generations: Iterable[Mapping[str, Any]], eval_episodes: int,
                  recorded: Iterable[Mapping[str, Any]]) -> PhaseTimeline:
    """The timeline of a league's generation summaries (as JSON) and recorded episodes.

    A summary's ``exploiters`` (:class:`~league.evaluation.phases.ExploiterEntry`
    as JSON; absent in a league saved before exploiters) become the generation's exploiter entries.
    """
    timeline = PhaseTimeline()
    for s in generations:
        if s["phase_rates"]:
            timeline.add_rates(s["generation"], s["phase_rates"], s.get("phase_episodes") or eval_episodes)
        for role in ROLES:
            timeline.set_rating(s["generation"], role, s[f"{role}_mu"], s[f"{role}_sigma"])
        if s.get("exploiters"):
            timeline.set_exploiters(s["generation"], s["exploiters"])
    for rec in recorded:
        timeline.add_episode(rec["generation"], rec["phases"], rec["match_id"])
    return timeline
