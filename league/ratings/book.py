"""The rating book, pure: how one match result moves a ladder's ratings and W/D/L (whom
to pair next is :func:`league.scheduling.matchmaking.sample_ladder_pairs`).

:func:`rate_match` is the single place where a match outcome becomes new ratings. The
live recorder and ``arena ratings rebuild`` both call it, in match-sequence order, so
a rebuild from the match log reproduces the live ratings bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from league.ratings.closed_form import rate_1v1_arrays, rate_1v1_fast
from league.ratings.rating import Rating, RatingEnv, rate_teams
from league.results import Record, count_result

RatingKey = tuple[str, str]  # (agent key, role)
DEFAULT_TARGET_SIGMA = 1.5  # an agent is "placed" once its sigma is at most this
# Waves of fewer independent matches are rated one match at a time (the vectorized call costs
# about ten scalar updates; measured crossover ~30 matches); see RatingBook.apply_batch.
MIN_WAVE = 32


class RatingChange(NamedTuple):
    """One agent's rating in one role, before and after a match (a tuple: a batch makes
    two per match)."""

    agent: str
    role: str
    before: Rating
    after: Rating


def rate_match(
    ratings: Mapping[RatingKey, Rating],
    team_agents: Sequence[str],
    roles: Sequence[str],
    winner: int | None,
    *,
    env: RatingEnv,
) -> list[RatingChange]:
    """Rating changes caused by one match (empty if it is not rateable).

    Each team is driven by one agent playing the team's role. A match in which the
    same agent drives two teams in the same role (a mirror match) carries no skill
    information and changes nothing.

    Args:
        ratings: Current ratings; missing keys read as the prior.
        team_agents: Agent key driving each team, in team order.
        roles: Role of each team.
        winner: Winning team index, ``None`` for a draw.
        env: The ladder's rating environment.
    """
    keys = [(a, r) for a, r in zip(team_agents, roles)]
    if len(set(keys)) < len(keys):
        return []
    before = [ratings.get(k) or env.new_rating() for k in keys]
    if len(keys) == 2:
        if winner is None:
            a, b = rate_1v1_fast(before[0], before[1], True, env=env)
            after = [a, b]
        else:
            w, l = rate_1v1_fast(before[winner], before[1 - winner], False, env=env)
            after = [w, l] if winner == 0 else [l, w]
    else:
        ranks = [0] * len(keys) if winner is None else [0 if t == winner else 1 for t in range(len(keys))]
        after = [team[0] for team in rate_teams([[r] for r in before], ranks, env=env)]
    return [RatingChange(k[0], k[1], b, a) for k, b, a in zip(keys, before, after)]


@dataclass
class Standing(Record):
    """An agent's rating in one role plus its rated W/D/L."""

    rating: Rating
    last_match: int | None = None


class RatingBook:
    """Ratings and rated W/D/L of a ladder, advanced one match at a time.

    The live recorder loads the book's rows for the agents of a batch, applies the
    batch in sequence order and writes the rows back; a rebuild applies the whole match
    log to an empty book. Both go through :meth:`apply`, so they agree exactly.
    """

    def __init__(self, env: RatingEnv, standings: Mapping[RatingKey, Standing] | None = None) -> None:
        self.env = env
        self.standings: dict[RatingKey, Standing] = dict(standings or {})

    def rating(self, key: RatingKey) -> Rating:
        found = self.standings.get(key)
        return found.rating if found is not None else self.env.new_rating()

    def apply(self, team_agents: Sequence[str], roles: Sequence[str], winner: int | None,
              match: int | None = None) -> list[RatingChange]:
        """Rate one match and update W/D/L; returns the rating changes (empty if unrated)."""
        keys = list(zip(team_agents, roles))
        changes = rate_match({k: self.rating(k) for k in keys}, team_agents, roles, winner, env=self.env)
        self._record(changes, winner, match)
        return changes

    def apply_batch(self, results: Sequence[MatchResult]) -> list[list[RatingChange]]:
        """Rate ``results`` in order, in waves of matches that share no rating.

        Equal, bit for bit, to calling :meth:`apply` on each result in turn: a match
        goes into the wave after the last one that holds any of its (agent, role)
        keys, so every key still sees its matches in order, and each wave is one
        :func:`~league.ratings.closed_form.rate_1v1_arrays` call, whose elements equal the
        scalar update exactly. Matches of more than two teams are rated one at a time
        (the whole batch then is, to keep the order simple).

        Returns:
            The rating changes of each result, in the order of ``results``.
        """
        if any(len(r.team_agents) != 2 for r in results):
            return [self.apply(*r) for r in results]
        if len({key for r in results for key in zip(r.team_agents, r.roles)}) < 2 * MIN_WAVE:
            return [self.apply(*r) for r in results]  # too few ratings for any wave to be wide
        out: list[list[RatingChange]] = [[] for _ in results]
        for wave in _waves(results):
            self._apply_wave(results, wave, out)
        return out

    def _apply_wave(self, results: Sequence[MatchResult], wave: list[int],
                    out: list[list[RatingChange]]) -> None:
        """Rate matches ``wave`` of ``results`` (no two share a key) in one vectorized call.

        A narrow wave is rated match by match (numpy's per-call cost would exceed the
        closed form's): the same numbers either way.
        """
        if len(wave) < MIN_WAVE:
            for i in wave:
                out[i] = self.apply(*results[i])
            return
        rating, firsts, seconds, before_w, before_l, drawn = self.rating, [], [], [], [], []
        for i in wave:
            (a, b), (role_a, role_b), winner, _ = results[i]
            if winner == 1:  # rate_match's (winner, loser) order; a draw keeps team order
                a, b, role_a, role_b = b, a, role_b, role_a
            firsts.append((a, role_a))
            seconds.append((b, role_b))
            before_w.append(rating((a, role_a)))
            before_l.append(rating((b, role_b)))
            drawn.append(winner is None)
        mu_w, sd_w, mu_l, sd_l = (a.tolist() for a in rate_1v1_arrays(
            [r.mu for r in before_w], [r.sigma for r in before_w],
            [r.mu for r in before_l], [r.sigma for r in before_l], drawn, env=self.env))
        for j, i in enumerate(wave):
            first = RatingChange(*firsts[j], before_w[j], Rating(mu_w[j], sd_w[j]))
            second = RatingChange(*seconds[j], before_l[j], Rating(mu_l[j], sd_l[j]))
            winner = results[i].winner
            changes = [second, first] if winner == 1 else [first, second]
            self._record(changes, winner, results[i].match)
            out[i] = changes

    def _record(self, changes: list[RatingChange], winner: int | None, match: int | None) -> None:
        for team, change in enumerate(changes):
            key = (change.agent, change.role)
            st = self.standings.get(key) or Standing(self.env.new_rating())
            st.rating, st.games, st.last_match = change.after, st.games + 1, match
            count_result(st, winner, team)
            self.standings[key] = st


class MatchResult(NamedTuple):
    """One match as :meth:`RatingBook.apply_batch` rates it (the arguments of :meth:`RatingBook.apply`)."""

    team_agents: Sequence[str]
    roles: Sequence[str]
    winner: int | None
    match: int | None = None


def _waves(results: Sequence[MatchResult]) -> list[list[int]]:
    """Indices of ``results`` in waves: each match one wave after the last wave holding
    one of its keys. Mirror matches (one key on both teams) change nothing and are left out."""
    waves: list[list[int]] = []
    last: dict[RatingKey, int] = {}
    for i, r in enumerate(results):
        keys = list(zip(r.team_agents, r.roles))
        if keys[0] == keys[1]:
            continue
        wave = max(last.get(keys[0], -1), last.get(keys[1], -1)) + 1
        if wave == len(waves):
            waves.append([])
        waves[wave].append(i)
        last[keys[0]] = last[keys[1]] = wave
    return waves
