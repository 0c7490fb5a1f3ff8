"""The PPO every trainer shares: masked sampling, GAE, the clipped update. One copy.

:class:`agents.trainers.ppo_selfplay.SelfPlayPPO` (board games) and
:class:`agents.trainers.hide_and_seek.ppo.HideAndSeekPPO` (hide-and-seek teams) differ in
how they collect a rollout; from there on both call these functions:

* :func:`masked_logits` / :func:`masked_sample`: illegal actions get zero probability;
* :class:`Rollout`: what a trainer collected, time-major; :meth:`Rollout.samples` runs
  :func:`gae` (generalized advantage estimates) over it and flattens it to :class:`Samples`;
* :func:`ppo_update`: ``epochs`` passes of ``minibatches`` clipped-surrogate steps over
  the flattened samples (:class:`Samples`), advantages normalised per minibatch, value
  loss and entropy bonus, gradients clipped.

``minibatches`` is the one name for how a rollout is split: a count per pass, so the
minibatch grows with the rollout (on a GPU, with the number of envs).

:func:`resolve_precision` and :func:`matmul_dtype` are the one place that says where the
networks' first layers multiply in bfloat16 (a trainer's ``precision``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

ILLEGAL_LOGIT = -1e9
"""what a masked-out action's logit becomes (zero probability, no NaN)"""

PRECISIONS = ("fp32", "bf16", "auto")
"""a trainer's ``precision``: float32 throughout, or the first layer's matrix product of every
network in bfloat16 (:meth:`agents.nets.MLPNet.features`; every later layer, the heads, values,
log-probabilities, losses, weights and Adam stay float32), or ``bf16`` where the CPU multiplies
bfloat16 in hardware"""


def bf16_matmul_units() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware (AMX tiles or AVX-512 BF16):
    there a bfloat16 linear layer runs several times faster than a float32 one; elsewhere slower."""
    try:
        return bool(torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported())
    except AttributeError:  # a torch without these probes: assume not
        return False


def resolve_precision(precision: str, device: torch.device) -> str:
    """``fp32`` or ``bf16`` for ``precision`` on ``device`` (``auto``: ``bf16`` on a CPU with
    :func:`bf16_matmul_units`, else ``fp32``; accelerators keep ``fp32`` under ``auto``)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "auto":
        return "bf16" if device.type == "cpu" and bf16_matmul_units() else "fp32"
    return precision


def matmul_dtype(precision: str) -> torch.dtype | None:
    """What a resolved ``precision`` passes to the networks as ``matmul_dtype`` (``None``: float32)."""
    return torch.bfloat16 if precision == "bf16" else None


def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``logits`` with the actions ``mask`` forbids set to :data:`ILLEGAL_LOGIT`."""
    return logits.masked_fill(~mask, ILLEGAL_LOGIT)


class LogitsCategorical:
    """The categorical distribution of a batch of (masked) logits, as :func:`ppo_update` uses one:
    ``log_prob`` and ``entropy``. The same numbers as ``torch.distributions.Categorical``, from
    ``logits - logsumexp(logits)``: torch's CPU softmax over a handful of actions took five
    times as long as that (0.5 ms on 4,300 rows of 7), and the update called it every minibatch.
    """

    def __init__(self, logits: torch.Tensor) -> None:
        self.log_probs = logits - logits.logsumexp(-1, keepdim=True)
        """``(..., actions)`` normalised log-probabilities (masked actions: about -1e9)"""

    def log_prob(self, act: torch.Tensor) -> torch.Tensor:
        """Log-probability of each row's ``act``."""
        return self.log_probs.gather(-1, act.unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        """Entropy of each row (masked actions add nothing: their probability is 0)."""
        return -(self.log_probs.exp() * self.log_probs).sum(-1)


def masked_sample(
    logits: torch.Tensor, mask: torch.Tensor, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one legal action per row of ``(k, actions)`` logits.

    Returns:
        ``(actions, log_probs)``, each ``(k,)``.
    """
    logp_all = torch.log_softmax(masked_logits(logits, mask), -1)
    act = torch.multinomial(logp_all.exp(), 1, generator=generator).squeeze(-1)
    return act, logp_all.gather(-1, act[:, None]).squeeze(-1)


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor | None,
    next_value: torch.Tensor | None,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Generalized advantage estimates of a ``(steps, ...)`` rollout.

    Args:
        rewards, values: ``(steps, ...)``.
        dones: ``dones[t]`` 1 where an episode ended after step ``t`` (nothing is
            bootstrapped across it); ``None``: no episode ends inside the rollout.
        next_value: The value after the last step; ``None``: the rollout ends every
            episode (zero).
        gamma, lam: Discount and GAE lambda.
    """
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        if t == len(rewards) - 1:
            nxt = torch.zeros_like(last) if next_value is None else next_value
        else:
            nxt = values[t + 1]
        if dones is None:
            delta = rewards[t] + gamma * nxt - values[t]
            last = delta + gamma * lam * last
        else:
            nonterminal = 1.0 - dones[t]
            delta = rewards[t] + gamma * nxt * nonterminal - values[t]
            last = delta + gamma * lam * nonterminal * last
        adv[t] = last
    return adv


@dataclass
class Samples:
    """One rollout's samples, flattened: row ``i`` is one decision."""

    obs: torch.Tensor
    mask: torch.Tensor
    act: torch.Tensor
    logp: torch.Tensor
    """log-probability of ``act`` when it was sampled"""
    adv: torch.Tensor
    ret: torch.Tensor
    """value targets (advantages plus the values)"""
    rows: torch.Tensor | None = None
    """the rows to learn from (``None``: all); lets a learner skip rows without copying the rest"""

    def __len__(self) -> int:
        return len(self.act) if self.rows is None else len(self.rows)


@dataclass
class Rollout:
    """One learner's decisions, time-major: ``act`` is ``(steps, *batch)`` (boards, or envs and
    the team's agents), every other tensor ``(steps, *batch, ...)``."""

    obs: torch.Tensor
    mask: torch.Tensor
    act: torch.Tensor
    logp: torch.Tensor
    """log-probability of ``act`` when it was sampled"""
    val: torch.Tensor
    rew: torch.Tensor
    done: torch.Tensor | None = None
    """``done[t]`` 1 where an episode ended after step ``t``; ``None``: no episode ends inside"""
    next_value: torch.Tensor | None = None
    """the value after the last step; ``None``: the rollout ends every episode"""

    def samples(self, gamma: float, lam: float, keep: torch.Tensor | None = None, copy: bool = True) -> Samples:
        """GAE over the rollout (:func:`gae`), flattened to one row per decision.

        Args:
            gamma, lam: Discount and GAE lambda.
            keep: Optional bool tensor broadcastable to ``act``'s shape: the decisions to learn from.
            copy: Copy the kept rows out (else every row stays, flattened in place, and
                :attr:`Samples.rows` names the kept ones: the same update, without the copy).
        """
        adv = gae(self.rew, self.val, self.done, self.next_value, gamma, lam)
        last = self.act.dim() - 1
        rows = [x.flatten(0, last) for x in (self.obs, self.mask, self.act, self.logp, adv, adv + self.val)]
        if keep is None:
            return Samples(*rows)
        chosen = keep.expand_as(self.act).flatten()
        if not copy:
            return Samples(*rows, rows=chosen.nonzero().squeeze(-1))
        return Samples(*[x[chosen] for x in rows])


@dataclass
class PPOSettings:
    """PPO's hyper-parameters: every trainer's config starts with these (and may change a default)."""

    lr: float = 1e-3
    """Adam learning rate"""
    gamma: float = 0.99
    """discount per step (per decision of the learner)"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    clip: float = 0.2
    """PPO ratio clip"""
    ent_coef: float = 0.01
    """entropy bonus"""
    vf_coef: float = 0.5
    """value loss weight"""
    epochs: int = 4
    """passes over each rollout"""
    minibatches: int = 4
    """minibatches per pass (the samples split as evenly as they divide)"""
    max_grad_norm: float = 0.5
    """gradient clipping"""


def ppo_update(
    model: nn.Module,
    optim: torch.optim.Optimizer,
    samples: Samples,
    settings: PPOSettings,
    generator: torch.Generator | None = None,
) -> tuple[float, float, float]:
    """PPO-clip epochs over ``samples``; ``model(obs, mask)`` returns ``(distribution, value)``
    (the distribution a :class:`LogitsCategorical`, or anything with its ``log_prob`` and ``entropy``).

    Each pass shuffles the rows (``generator``: the trainer's stream, else torch's global
    one) and steps once per ``settings.minibatches`` split (as equal as the size allows).

    Returns:
        The last minibatch's ``(policy loss, value loss, entropy)``.
    """
    s = settings
    size = len(samples)
    pg = vloss = ent = torch.zeros(())
    if size == 0:
        return 0.0, 0.0, 0.0
    for _ in range(s.epochs):
        perm = torch.randperm(size, generator=generator, device=samples.obs.device)
        if samples.rows is not None:
            perm = samples.rows[perm]
        for idx in torch.tensor_split(perm, min(s.minibatches, size)):
            obs, mask, act, old_logp, a, ret = (x.index_select(0, idx) for x in (
                samples.obs, samples.mask, samples.act, samples.logp, samples.adv, samples.ret))
            dist, value = model(obs, mask)
            logp = dist.log_prob(act)
            a = (a - a.mean()) / (a.std() + 1e-8)
            ratio = (logp - old_logp).exp()
            pg = torch.max(-a * ratio, -a * ratio.clamp(1 - s.clip, 1 + s.clip)).mean()
            vloss = 0.5 * ((value - ret) ** 2).mean()
            ent = dist.entropy().mean()
            loss = pg + s.vf_coef * vloss - s.ent_coef * ent
            optim.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), s.max_grad_norm)
            optim.step()
    return float(pg.detach()), float(vloss.detach()), float(ent.detach())
