"""Repositories: every SQL statement Arena runs lives in this package.

Functions take a :class:`~sqlalchemy.orm.Session` and plain values, and return plain
values (frozen dataclasses, dicts, ints): no ORM objects leak out, so callers never
trigger lazy loads after the session closes. None of them commits; the caller owns
the transaction (``with factory.begin() as session: ...``). No business logic lives
here: ratings are computed by :mod:`league`, statuses decided by the scheduler.
"""

from arena.db.repositories.agents import (
    AgentInfo,
    agent_ids_for_keys,
    agent_keys,
    get_agent,
    get_agent_by_key,
    get_agents,
    get_or_create_agents,
    list_agents,
    page_agents,
    queue_positions,
    set_agent_status,
)
from arena.db.repositories.boards import (
    BoardRow,
    board_changes,
    board_order,
    board_rows,
    board_version,
    head_to_head,
)
from arena.db.repositories.catalog import (
    LeagueInfo,
    create_league,
    ensure_env,
    get_env_spec,
    get_league,
    get_league_by_name,
)
from arena.db.repositories.dialect import ping
from arena.db.repositories.matches import (
    MatchPage,
    Participant,
    StoredMatch,
    count_matches,
    existing_match_ids,
    get_match,
    get_matches,
    get_participants,
    insert_matches,
    insert_participants,
    iter_matches,
    match_history,
    match_row,
)
from arena.db.repositories.queue import (
    QueuedJob,
    dequeue_matches,
    enqueue_matches,
    queue_depth,
    queued_matches,
)
from arena.db.repositories.ratings import (
    LeaderboardEntry,
    StoredRating,
    clear_ratings,
    count_ratings,
    insert_rating_events,
    leaderboard,
    load_ratings,
    rating_history,
    rating_points,
    upsert_ratings,
)
from arena.db.repositories.snapshots import (
    SnapshotInfo,
    get_snapshot_weights,
    list_snapshots,
    put_snapshot,
)
from arena.db.repositories.users import (
    UserInfo,
    add_api_token,
    create_user,
    get_user,
    get_user_by_name,
    hash_token,
    revoke_api_token,
    user_for_token,
    user_names,
)

__all__ = [
    "AgentInfo", "BoardRow", "LeaderboardEntry", "LeagueInfo", "MatchPage", "Participant",
    "QueuedJob", "SnapshotInfo", "StoredMatch", "StoredRating", "UserInfo", "add_api_token",
    "agent_ids_for_keys", "agent_keys", "board_changes", "board_order", "board_rows",
    "board_version", "clear_ratings", "count_matches", "count_ratings", "create_league",
    "create_user", "dequeue_matches", "enqueue_matches", "ensure_env", "existing_match_ids",
    "get_agent", "get_agent_by_key", "get_agents", "get_env_spec", "get_league",
    "get_league_by_name", "get_match", "get_matches", "get_or_create_agents", "get_participants",
    "get_snapshot_weights", "get_user", "get_user_by_name", "hash_token", "head_to_head",
    "insert_matches", "insert_participants", "insert_rating_events", "iter_matches", "leaderboard",
    "list_agents", "list_snapshots", "load_ratings", "match_history", "match_row",
    "page_agents", "ping", "put_snapshot", "queue_depth", "queue_positions", "queued_matches",
    "rating_history", "rating_points", "revoke_api_token", "set_agent_status", "upsert_ratings",
    "user_for_token", "user_names",
]
