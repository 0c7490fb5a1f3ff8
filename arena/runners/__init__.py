"""Match runners: one interface, an in-process implementation and a Ray twin.

``from arena.runners import InProcessRunner, MatchBatch, AgentSource`` (``ThreadRunners``: an
in-process runner per thread); the Ray runner
is :mod:`arena.runners.on_ray` (imported explicitly, so Ray loads only where used).
"""

from arena.runners.batches import (
    AgentSource,
    MatchBatch,
    MatchRunner,
    PolicyResolver,
    SnapshotPolicies,
    play_batch,
)
from arena.runners.in_process import InProcessRunner, ThreadRunners

__all__ = ["AgentSource", "InProcessRunner", "MatchBatch", "MatchRunner", "PolicyResolver",
           "SnapshotPolicies", "ThreadRunners", "play_batch"]
