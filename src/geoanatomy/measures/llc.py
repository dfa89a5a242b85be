"""Local learning coefficient (LLC) by SGLD, as devinterp defines it (Lau et al. 2023).

At a checkpoint w0 with loss L_n(w0) on a data pool of n examples::

    SGLD step (minibatch b of size B, drawn without replacement, reshuffled each epoch):
        dw = -(eps/2) * (n_beta * grad L_b(w) + gamma * (w - w0)) + sqrt(eps) * N(0, I)
    llc  = n_beta * (mean over draws and chains of L_b(w_t) - L_n(w0))

L_b(w_t) is the minibatch loss at the current weights, the one whose gradient drives the
step (devinterp records the same loss). Draws are the steps after ``burnin``; devinterp
2.x averages over every step including burn-in (with its default burn-in of 0 the two
agree). L_n(w0) is the mean loss over the whole pool (devinterp: over 32 minibatches).

Defaults in devinterp 1.x: eps 0.01, gamma 0, n_beta = B / ln B, 10 chains, 100 draws;
devinterp 2.x makes eps and n_beta required (its examples: 1e-3, 30), 4 chains, 200 draws.
``n_beta=None`` here means B / ln B. Every estimate carries eps, gamma, n_beta, chains,
draws, burnin, batch_size, n_data and seed.

Our defaults (config ``measures.llc``; calibrated on nano checkpoints, where the top
Hessian eigenvalue reaches ~600-800 late in training): eps 3e-5, gamma 1e4, n_beta 30,
2 chains x (5 burn-in + 20 draws), B 32, a pool of 512 examples. Stability needs
eps * n_beta * lambda_max < 4; gamma 1e4 keeps the flat directions within ~0.01 of w0
(stationary std 1/sqrt(gamma)) and equilibrates them in ~1/(eps*gamma/2) ~ 7 steps. With
devinterp's eps 1e-3 the chains left the basin (sampled loss ~ the untrained loss) at every
trained checkpoint.

Trustworthiness flags (an estimate with any flag is not clean and the analysis skips it):

* ``negative``         llc < 0: the chains found lower loss near w0, so w0 is not a local
                       minimum (typical at early, non-converged checkpoints);
* ``chains_disagree``  (needs >= 2 chains) std over chains of the per-chain llc
                       (population std, as devinterp) / |llc| > ``disagree_threshold``;
* ``nonfinite``        a chain's loss became NaN/inf (step size too large); its llc is NaN.

Chains are seeded (noise generator per chain from ``seed``); all chains see the same
minibatch order (devinterp's ``match_sampling_input_ids_across_chains=True``), so their
spread measures the sampler noise. The model's weights are restored afterwards.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch


def default_n_beta(batch_size: int) -> float:
    """devinterp 1.x ``default_nbeta``: B / ln B."""
    if batch_size < 2:
        raise ValueError(f"n_beta = B/ln B needs batch_size >= 2, got {batch_size}")
    return batch_size / math.log(batch_size)


def _batches(n: int, batch_size: int, gen: torch.Generator):
    """Endless minibatch index tensors: a fresh permutation of range(n) per epoch, drop_last."""
    while True:
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n - batch_size + 1, batch_size):
            yield perm[i:i + batch_size]


@torch.no_grad()
def pool_loss(model: torch.nn.Module, loss_fn: Callable, data: torch.Tensor, batch_size: int) -> float:
    """Mean loss over the whole pool data (n, ...), weighting each chunk by its size (float64)."""
    tot, n = 0.0, data.shape[0]
    for i in range(0, n, batch_size):
        b = data[i:i + batch_size]
        tot += float(loss_fn(model, b).double()) * b.shape[0]
    return tot / n


def estimate_llc(model: torch.nn.Module, loss_fn: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor],
                 data: torch.Tensor, *, eps: float = 3e-5, gamma: float = 1e4, n_beta: float | None = 30.0,
                 chains: int = 2, draws: int = 20, burnin: int = 5, batch_size: int = 32, seed: int = 0,
                 disagree_threshold: float = 0.5) -> dict:
    """SGLD estimate of the LLC of ``model`` at its current weights (module doc for the formulas).

    loss_fn(model, batch) -> scalar mean loss of a minibatch; data (n, ...) the pool whose
    first dimension indexes examples. Returns a dict with "value" (llc, NaN if a chain
    failed), "std", "per_chain", "init_loss", "mean_sampled_loss", "flags", "clean", the
    settings, and "loss_trace" (chains x (burnin + draws)) for diagnostics.
    """
    n = int(data.shape[0])
    for name, v in (("chains", chains), ("draws", draws), ("batch_size", batch_size)):
        if int(v) < 1:
            raise ValueError(f"llc: {name} must be >= 1, got {v}")
    if burnin < 0:
        raise ValueError(f"llc: burnin must be >= 0, got {burnin}")
    if not eps > 0:
        raise ValueError(f"llc: eps (SGLD step size) must be > 0, got {eps}")
    if gamma < 0:
        raise ValueError(f"llc: gamma (localization) must be >= 0, got {gamma}")
    if batch_size > n:
        raise ValueError(f"llc: batch_size {batch_size} exceeds the data pool of {n} examples")
    nb = default_n_beta(batch_size) if n_beta is None else float(n_beta)
    if not nb > 0:
        raise ValueError(f"llc: n_beta must be > 0, got {n_beta}")

    params = [p for p in model.parameters() if p.requires_grad]
    w0 = [p.detach().clone() for p in params]
    was_training = model.training
    model.eval()
    steps = burnin + draws
    init_loss = pool_loss(model, loss_fn, data, batch_size)
    trace = np.full((chains, steps), np.nan)
    sq_eps = math.sqrt(eps)
    try:
        for c in range(chains):
            noise = torch.Generator(device="cpu").manual_seed(int(seed) * 1000003 + c)
            order = torch.Generator(device="cpu").manual_seed(int(seed))      # same minibatches every chain
            feed = _batches(n, batch_size, order)
            for t in range(steps):
                b = data[next(feed).to(data.device)]
                loss = loss_fn(model, b)
                lv = float(loss.detach())
                trace[c, t] = lv
                if not math.isfinite(lv):
                    break
                grads = torch.autograd.grad(loss, params)
                with torch.no_grad():
                    for p, g, p0 in zip(params, grads, w0):
                        dw = g * nb
                        if gamma:
                            dw.add_(p - p0, alpha=gamma)
                        p.add_(dw, alpha=-0.5 * eps)
                        p.add_(torch.randn(p.shape, generator=noise, dtype=p.dtype).to(p.device), alpha=sq_eps)
            with torch.no_grad():
                for p, p0 in zip(params, w0):
                    p.copy_(p0)
    finally:
        with torch.no_grad():
            for p, p0 in zip(params, w0):
                p.copy_(p0)
        model.train(was_training)

    sampled = trace[:, burnin:]                                          # (chains, draws)
    finite = np.isfinite(sampled).all(1)                                 # (chains,)
    per_chain = np.where(finite, nb * (np.where(np.isfinite(sampled), sampled, 0).mean(1) - init_loss), np.nan)
    value = float(per_chain.mean()) if finite.all() else math.nan
    std = float(per_chain.std()) if finite.all() else math.nan
    flags = []
    if not finite.all():
        flags.append("nonfinite")
    else:
        if value < 0:
            flags.append("negative")
        if chains >= 2 and std > disagree_threshold * abs(value):
            flags.append("chains_disagree")
    half = max(1, draws // 2)
    drift = (nb * (np.nanmean(sampled[:, half:]) - np.nanmean(sampled[:, :half]))
             if draws >= 2 and finite.all() else math.nan)
    return {
        "value": value, "std": std, "per_chain": [float(x) for x in per_chain],
        "init_loss": init_loss, "mean_sampled_loss": float(np.nanmean(sampled)) if finite.any() else math.nan,
        "flags": flags, "clean": not flags, "disagreement": (std / abs(value)) if value else math.inf,
        "drift": float(drift),
        "eps": float(eps), "gamma": float(gamma), "n_beta": nb, "n_beta_rule": "B/lnB" if n_beta is None else "given",
        "chains": int(chains), "draws": int(draws), "burnin": int(burnin), "batch_size": int(batch_size),
        "n_data": n, "seed": int(seed), "disagree_threshold": float(disagree_threshold),
        "loss_trace": trace,
    }


def llc_at_checkpoint(model: torch.nn.Module, pool: torch.Tensor, n_answer: int, **kw) -> dict:
    """LLC of ``model.answer_loss`` on a pool of token sequences (n, S); keywords as ``estimate_llc``."""
    from ..model import answer_loss
    return estimate_llc(model, lambda m, b: answer_loss(m, b, n_answer), pool, **kw)
