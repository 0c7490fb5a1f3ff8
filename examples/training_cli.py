"""The command line the training examples share: their flags, and the last step, export and submit.

Every field of an example's ``Args`` dataclass is a ``--flag`` (:func:`parse_args`). The examples
that end in a rated agent add :class:`SubmitArgs`' flags (those that train on ``arena.gym`` against
fixed opponents: :class:`GymTrainArgs`') and finish with :func:`export_and_submit`:
the policy exported to ONNX with ``arena.client.onnx_export.export_submission`` (validated as the
server will validate it) and, with ``--submit``, uploaded to an Arena server and waited on until
the ladder has rated it. The examples import it as a sibling module (``python examples/<name>.py``
puts ``examples/`` first on ``sys.path``).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

import arena.gym
from arena.client import progress_printer, submit_until_rated
from arena.client.onnx_export import export_submission
from envs.errors import ArenaError

ArgsT = TypeVar("ArgsT")


def parse_args(args_type: type[ArgsT], description: str) -> ArgsT:
    """``args_type`` from the command line: one ``--flag`` per field (``_`` spelled ``-``), typed by its default."""
    parser = argparse.ArgumentParser(description=description)
    for f in dataclasses.fields(args_type):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    return args_type(**vars(parser.parse_args()))


@dataclass
class SubmitArgs:
    """The flags :func:`export_and_submit` reads."""

    out: str = ""
    """the ONNX file to write (default: <name>.onnx, e.g. ppo-connect_four-v3.onnx); its spec JSON goes beside it"""
    submit: str = ""
    """an Arena server to submit the export to (e.g. http://127.0.0.1:8000); empty: export only"""
    token: str = ""
    """your API token for --submit (default: $ARENA_TOKEN, else the token `arena user create` saved)"""
    submit_timeout: float = 600.0
    """seconds to wait for the submitted agent to be rated"""


@dataclass
class GymTrainArgs(SubmitArgs):
    """The flags of an example that trains one policy on ``arena.gym`` against fixed opponents, measures its
    win rate before and after, and ends in a submission."""

    env_id: str = "connect_four-v3"
    """the Arena env to train on (one seat; role envs: pass the role's opponents)"""
    opponents: str = "random"
    """comma-separated opponent names: random, heuristic:epsilon=0.5, file:agent.onnx, pfsp:folder/"""
    ent_coef: float = 0.01
    """entropy bonus"""
    eval_episodes: int = 512
    """episodes of the win-rate evaluations"""

    def win_rate(self, act: Callable[[np.ndarray, np.ndarray], np.ndarray], seed: int, **options: Any) -> float:
        """Share of ``eval_episodes`` that ``act(obs, mask)`` wins against ``opponents`` (draws count half);
        ``options``: more of :func:`arena.gym.win_rate`'s."""
        return arena.gym.win_rate(act, self.env_id, self.opponents.split(","), self.eval_episodes, seed=seed,
                                  **options)


def export_and_submit(model: Any, env_id: str, name: str, args: SubmitArgs) -> None:
    """Export ``model`` as submission ``name`` to ``args.out``; with ``args.submit``, upload it and wait until
    it is rated (printing its progress), else print the command that does."""
    out = args.out or f"{name}.onnx"
    validated = export_submission(model, env_id, out, name=name)
    print(f"wrote {out} (sha256 {validated.sha256[:16]}), validated as the server will")
    if not args.submit:
        print(f"submit it with: arena submit {out} --wait")
        return
    print(f"submitting {out} to {args.submit}; waiting until it is rated (at most {args.submit_timeout:g} s)")
    try:  # uploaded through ArenaClient; the server validates, places and rates it
        rated = submit_until_rated(out, args.submit, args.token or None, timeout=args.submit_timeout,
                                   on_progress=progress_printer(print))
    except ArenaError as exc:  # no token, server down, rejected, not rated in time: the message says which
        raise SystemExit(f"error: {exc}") from None
    print(f"agent {rated['id']} is on the leaderboard: {args.submit}/envs/{env_id}")
