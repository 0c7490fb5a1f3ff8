"""What the humans boards read from the match log: people's matches against agents.

A person's match is stored unrated (it never moves the agent's rating); the humans
board (:mod:`arena.read.humans`) rates the person against the agent's rating *at the
time*: the agent's latest rating event before the match, read here in the same query.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from arena.storage.db.models import Agent, Match, MatchParticipant, RatingEvent


@dataclass(frozen=True)
class HumanMatch:
    """One signed-in person's match against an agent, in match-log order.

    Attributes:
        match_seq: The match's place in the log.
        created_at: When it was recorded.
        human_agent_id: The person's human agent.
        owner_id: The person (the user who owns the human agent).
        result: The person's result: ``W``, ``D`` or ``L``.
        agent_id: The agent they played.
        agent_mu, agent_sigma: The agent's rating after its last rated match before this
            one (``None``: it had none yet).
    """

    match_seq: int
    created_at: datetime
    human_agent_id: int
    owner_id: int
    result: str
    agent_id: int
    agent_mu: float | None
    agent_sigma: float | None


def human_matches(session: Session, env_id: str) -> list[HumanMatch]:
    """Every match of ``env_id`` between a signed-in person's human agent and an agent
    (not a guest's: guests have no owner), oldest first, with the agent's rating then.

    One query: the agent's rating before the match is its rating event with the
    largest ``match_seq`` below the match's (an index range scan per match, on
    ``ix_rating_events_agent_id_match_seq``).
    """
    me, other = aliased(MatchParticipant), aliased(MatchParticipant)
    person, opponent = aliased(Agent), aliased(Agent)
    before = (
        select(RatingEvent.id)
        .where(RatingEvent.agent_id == other.agent_id, RatingEvent.role == other.role,
               RatingEvent.match_seq < me.match_seq)
        .order_by(RatingEvent.match_seq.desc(), RatingEvent.id.desc())
        .limit(1)
        .correlate(other, me)
        .scalar_subquery()
    )
    stmt = (
        select(me.match_seq, Match.created_at, me.agent_id, person.owner_id, me.result, other.agent_id,
               RatingEvent.mu_after, RatingEvent.sigma_after)
        .select_from(person)
        .join(me, me.agent_id == person.id)
        .join(Match, Match.seq == me.match_seq)
        .join(other, (other.match_seq == me.match_seq) & (other.seat != me.seat))
        .join(opponent, opponent.id == other.agent_id)
        .outerjoin(RatingEvent, RatingEvent.id == before)
        .where(person.env_id == env_id, person.kind == "human", person.owner_id.is_not(None),
               opponent.kind != "human", Match.env_id == env_id)
        .order_by(me.match_seq)
    )
    return [HumanMatch(int(seq), created, int(human), int(owner), result, int(agent),
                       None if mu is None else float(mu), None if sigma is None else float(sigma))
            for seq, created, human, owner, result, agent, mu, sigma in session.execute(stmt)]
