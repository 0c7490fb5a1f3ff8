"""A submitted agent's progress towards its rating, as one line for a terminal."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["placement_progress", "progress_printer"]

JSON = dict[str, Any]


def placement_progress(agent: Mapping[str, Any]) -> str:
    """Where a submitted agent stands, in one line: its status, rated games and rating per role,
    its place in the queue, the matches expected until it settles, and what it waits for."""
    parts = [f"agent {agent.get('id')} {agent.get('status')}"]
    for rating in agent.get("ratings") or []:
        parts.append(f"{rating.get('role')}: {rating.get('games')} games, mu {rating.get('mu', 0):.2f} "
                     f"sigma {rating.get('sigma', 0):.2f}")
    if agent.get("queue_position"):
        parts.append(f"{agent['queue_position']} in the queue")
    if agent.get("expected_matches_to_settle"):
        parts.append(f"about {agent['expected_matches_to_settle']} more matches to settle")
    if agent.get("status_reason"):
        parts.append(str(agent["status_reason"]))
    return "; ".join(parts)


def progress_printer(write: Callable[[str], Any]) -> Callable[[JSON], None]:
    """An ``on_progress`` callback for the waits that writes :func:`placement_progress` when it changes."""
    last = [""]

    def show(agent: JSON) -> None:
        line = placement_progress(agent)
        if line != last[0]:
            last[0] = line
            write(line)

    return show

