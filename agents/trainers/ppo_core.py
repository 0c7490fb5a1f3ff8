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

import weakref
from dataclasses import dataclass
from typing import ClassVar

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
    logits: torch.Tensor, mask: torch.Tensor, generator: torch.Generator | None = None, checked: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one legal action per row of ``(k, actions)`` logits.

    ``checked=False`` draws exactly what ``torch.multinomial(probs, 1)`` draws (its own one-sample
    path: an ``Exp(1)`` variate per entry from ``generator``, then the row's largest ``probs / q``;
    the same actions and the same use of the stream) without its validation of ``probs`` (four
    reductions and two host reads per call: 60 of its 75 microseconds on 256 rows of 7).

    Returns:
        ``(actions, log_probs)``, each ``(k,)``.
    """
    logp_all = torch.log_softmax(masked_logits(logits, mask), -1)
    probs = logp_all.exp()
    if checked:
        act = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    else:
        act = (probs / torch.empty_like(probs).exponential_(generator=generator)).argmax(-1)
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


def take_rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``x.index_select(0, idx)``, the same bytes; where ``x``'s rows are contiguous whole 8-byte
    words (a bfloat16 observation row of 792 is 198 of them), they are copied as ``int64``: a
    minibatch's gather of such rows took about 0.6x the time of the 2-byte elements' copy."""
    if x.dim() < 2 or not len(x) or x.element_size() >= 8 or x[0].numel() * x.element_size() % 8 \
            or not x.is_contiguous():
        return x.index_select(0, idx)
    return x.view(len(x), -1).view(torch.int64).index_select(0, idx).view(x.dtype).view(len(idx), *x.shape[1:])


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


class FlatAdam:
    """One model's parameters, their gradients and an Adam's moments, each a view of one flat buffer,
    so that a step is a handful of calls whatever the number of tensors: zero the gradients
    (:meth:`zero_grad`), clip them by their global norm and take the fused Adam step (:meth:`step`).

    The same arithmetic as ``optim.zero_grad(); loss.backward(); nn.utils.clip_grad_norm_(...);
    optim.step()`` with a ``torch.optim.Adam`` (elementwise, so one flat tensor gives what twelve
    give; the norm is summed in another order): the per-call overhead of those three was 0.9 ms
    of each minibatch step of a hide-and-seek team (about 45 ms of a 500 ms update on a CPU).
    ``optim`` stays the source of truth for saving and loading: its state holds views of the flat
    moments (one shared ``step``), rebound after ``optim.load_state_dict`` replaced them.
    Only a plain Adam (one param group, no weight decay, amsgrad or maximize) qualifies
    (:meth:`of` returns ``None`` otherwise).
    """

    _models: ClassVar[weakref.WeakKeyDictionary] = weakref.WeakKeyDictionary()
    """per model, its flat parameters and gradients"""
    _optims: ClassVar[weakref.WeakKeyDictionary] = weakref.WeakKeyDictionary()
    """per optimiser, its :class:`FlatAdam`"""

    def __init__(self, model: nn.Module, optim: torch.optim.Adam) -> None:
        self.params = list(model.parameters())
        self.flat, self.grad = self._flatten(model)
        self.optim = optim
        self.exp_avg = torch.zeros_like(self.flat)
        self.exp_avg_sq = torch.zeros_like(self.flat)
        self.step_count = torch.zeros((), dtype=torch.float32, device=self.flat.device)
        self._bind()

    @classmethod
    def of(cls, model: nn.Module, optim: torch.optim.Optimizer) -> FlatAdam | None:
        """The flat view of ``model`` stepped by ``optim`` (made once per optimiser), or ``None``
        where ``optim`` is no plain Adam over exactly ``model``'s parameters."""
        flat = cls._optims.get(optim)
        if flat is not None:
            return flat
        groups = optim.param_groups
        if not isinstance(optim, torch.optim.Adam) or len(groups) != 1:
            return None
        g = groups[0]
        if (g["weight_decay"] or g["amsgrad"] or g["maximize"] or isinstance(g["lr"], torch.Tensor)
                or [id(p) for p in g["params"]] != [id(p) for p in model.parameters()]):
            return None
        flat = cls._optims[optim] = cls(model, optim)
        return flat

    @classmethod
    def _flatten(cls, model: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        """Move ``model``'s parameters into one flat buffer (each ``.data`` a view of it) and give each
        a ``.grad`` view of a second one; done once per model."""
        if model in cls._models:
            return cls._models[model]
        params = list(model.parameters())
        flat = torch.cat([p.detach().reshape(-1) for p in params])
        grad = torch.zeros_like(flat)
        at = 0
        for p in params:
            n = p.numel()
            p.data = flat[at:at + n].view_as(p)
            p.grad = grad[at:at + n].view_as(p)
            at += n
        cls._models[model] = flat, grad
        return flat, grad

    def _views(self, buffer: torch.Tensor) -> list[torch.Tensor]:
        out, at = [], 0
        for p in self.params:
            out.append(buffer[at:at + p.numel()].view_as(p))
            at += p.numel()
        return out

    def _bind(self) -> None:
        """Make ``optim``'s state the flat moments (copying in whatever it holds: a loaded state)."""
        m, v = self._views(self.exp_avg), self._views(self.exp_avg_sq)
        first = self.optim.state.get(self.params[0], {})
        if "step" in first:
            self.step_count.fill_(float(first["step"]))
        for p, pm, pv in zip(self.params, m, v, strict=True):
            old = self.optim.state.get(p, {})
            pm.copy_(old["exp_avg"]) if "exp_avg" in old else pm.zero_()
            pv.copy_(old["exp_avg_sq"]) if "exp_avg_sq" in old else pv.zero_()
            self.optim.state[p] = {"step": self.step_count, "exp_avg": pm, "exp_avg_sq": pv}
        self._bound = m[0]

    def zero_grad(self) -> None:
        """Zero the gradients (each parameter's ``.grad`` a view of the flat one again)."""
        self.reattach()
        self.grad.zero_()

    def reattach(self) -> None:
        """Put back the flat gradient's views as ``.grad`` where something replaced them (set to
        ``None``, reassigned)."""
        for p in self.params:
            if p.grad is None or p.grad.data_ptr() != p.data_ptr() - self.flat.data_ptr() + self.grad.data_ptr():
                for q, g in zip(self.params, self._views(self.grad), strict=True):
                    q.grad = g
                return

    def step(self, max_grad_norm: float) -> None:
        """Clip the gradients to ``max_grad_norm`` (as ``clip_grad_norm_``) and take Adam's step."""
        if self.optim.state.get(self.params[0], {}).get("exp_avg") is not self._bound:
            self._bind()  # the optimiser's state was loaded or replaced
        norm = torch.linalg.vector_norm(self.grad)
        self.grad.mul_(torch.clamp(max_grad_norm / (norm + 1e-6), max=1.0))
        g = self.optim.param_groups[0]
        beta1, beta2 = g["betas"]
        self.step_count.add_(1)
        torch._fused_adam_([self.flat], [self.grad], [self.exp_avg], [self.exp_avg_sq], [], [self.step_count],
                           lr=g["lr"], beta1=beta1, beta2=beta2, weight_decay=0.0, eps=g["eps"], amsgrad=False,
                           maximize=False)


def ppo_update(
    model: nn.Module,
    optim: torch.optim.Optimizer,
    samples: Samples,
    settings: PPOSettings,
    generator: torch.Generator | None = None,
    flat: bool = False,
) -> tuple[float, float, float]:
    """PPO-clip epochs over ``samples``; ``model(obs, mask)`` returns ``(distribution, value)``
    (the distribution a :class:`LogitsCategorical`, or anything with its ``log_prob`` and ``entropy``).

    Each pass shuffles the rows (``generator``: the trainer's stream, else torch's global
    one) and steps once per ``settings.minibatches`` split (as equal as the size allows).
    ``flat``: step through :class:`FlatAdam` where ``optim`` allows and gather each minibatch's
    rows with :func:`take_rows` (the same update, fewer and cheaper calls);
    then a model with a ``ppo_grads(obs, mask, act, old_logp, adv, ret, settings)`` method (the
    normalised advantages; it writes every parameter's gradient of the same loss and returns its
    three terms) is differentiated by that method instead of autograd.

    Returns:
        The last minibatch's ``(policy loss, value loss, entropy)``.
    """
    s = settings
    fused = FlatAdam.of(model, optim) if flat else None
    manual = hasattr(model, "ppo_grads")
    size = len(samples)
    pg = vloss = ent = torch.zeros(())
    if size == 0:
        return 0.0, 0.0, 0.0
    for _ in range(s.epochs):
        perm = torch.randperm(size, generator=generator, device=samples.obs.device)
        if samples.rows is not None:
            perm = samples.rows[perm]
        for idx in torch.tensor_split(perm, min(s.minibatches, size)):
            obs, mask, act, old_logp, a, ret = (take_rows(x, idx) if flat else x.index_select(0, idx) for x in (
                samples.obs, samples.mask, samples.act, samples.logp, samples.adv, samples.ret))
            a = (a - a.mean()) / (a.std() + 1e-8)
            if fused is not None and manual:
                fused.reattach()  # every gradient is written below, none accumulated
                pg, vloss, ent = model.ppo_grads(obs, mask, act, old_logp, a, ret, s)
                fused.step(s.max_grad_norm)
                continue
            dist, value = model(obs, mask)
            logp = dist.log_prob(act)
            ratio = (logp - old_logp).exp()
            pg = torch.max(-a * ratio, -a * ratio.clamp(1 - s.clip, 1 + s.clip)).mean()
            vloss = 0.5 * ((value - ret) ** 2).mean()
            ent = dist.entropy().mean()
            loss = pg + s.vf_coef * vloss - s.ent_coef * ent
            if fused is not None:
                fused.zero_grad()
                loss.backward()
                fused.step(s.max_grad_norm)
                continue
            optim.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), s.max_grad_norm)
            optim.step()
    return float(pg.detach()), float(vloss.detach()), float(ent.detach())
