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
draws, burnin, batch_size, n_data, seed and rng.

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

Agreement with devinterp 2.0.1 ``llc()``
----------------------------------------
Checked by ``python benchmarks/bench_measures.py --llc-only`` and tests/measures/test_llc.py. The
update, the loss that is recorded and averaged (the minibatch loss at w_t, before the
step), n_beta, gamma, the noise scale sqrt(eps), the parameter set (every parameter once;
the tied embedding/unembedding is one tensor) and the init loss are the same as in
devinterp's ``SGMCMC.sgld``, the sampler its ``llc()`` uses. From the same weights, minibatch
and noise, one step gives the same weights to float32 rounding. With ``rng="devinterp"``,
whole chains reproduce its per-chain llc to ~1e-5. devinterp samples in train mode and we
in eval mode; our GPT has no dropout or batch norm, so the modes are equivalent. What
remains differs only in the random streams, chosen by ``rng``. Neither choice changes the
expected value:

* ``rng="geoanatomy"`` (default): chain c's noise comes from the seed ``seed * 1000003 + c``,
  and the pool is reshuffled every epoch. devinterp seeds chain c of ``init_seed=s`` with
  the global torch seed ``s + c``, so *consecutive init_seeds share noise streams*
  (init_seed 0 and 1 share 3 of 4 chains). It also replays the first epoch's order
  (``epoch_mode="cycle"``), so each of its runs depends on one partition of the pool. With
  few batches per epoch its runs vary more, with the same mean (seen on the quadratic of
  tests/measures/test_llc.py with 2 batches per epoch).
* ``rng="devinterp"`` reproduces those streams exactly: chain c's noise comes from the torch
  seed ``seed + c``, and minibatches come from ``DataLoader(shuffle=True, drop_last=True,
  generator=manual_seed(seed))`` with the first epoch replayed. Use it for paired
  comparisons.

The 0.210 (ours) vs 0.151 (devinterp), "1.85 standard errors apart", came from this
seeding, not from the estimator. The benchmark ran devinterp at init_seed 0, 1 and 2, which
share noise streams. The noise stream dominates a chain's llc: on that nano checkpoint,
chains with the same stream and different data orders correlate at 0.84. So the three
devinterp repeats were strongly correlated, and their spread understated devinterp's
standard error. On the same checkpoint with 5 repeats per side (4 chains x 50 draws, eps 3e-5,
gamma 1e4, n_beta 30):

* devinterp at init_seed 0..4: 0.2007 +- 0.0214 (ours) vs 0.1542 +- 0.0134, +1.84 s.e.;
* disjoint init_seeds 100 + 4s: 0.2007 +- 0.0214 vs 0.1988 +- 0.0117, +0.08 s.e.;
* 20 independent repeats: 0.200 +- 0.009 vs 0.207 +- 0.009;
* paired (same streams): largest per-chain difference 9e-6.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch


def default_n_beta(batch_size: int) -> float:
    """devinterp 1.x ``default_nbeta``: B / ln B."""
    if batch_size < 2:
        raise ValueError(f"n_beta = B/ln B needs batch_size >= 2, got {batch_size}")
    return batch_size / math.log(batch_size)


RNG_SCHEMES = ("geoanatomy", "devinterp")


def _batches(n: int, batch_size: int, gen: torch.Generator):
    """Endless minibatch index tensors: a fresh permutation of range(n) per epoch, drop_last."""
    while True:
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n - batch_size + 1, batch_size):
            yield perm[i:i + batch_size]


def _devinterp_batches(n: int, batch_size: int, seed: int) -> Iterator[torch.Tensor]:
    """devinterp 2.x's minibatch indices: its DataLoader (shuffle, drop_last, generator seeded
    with ``init_seed``) with ``epoch_mode="cycle"``, i.e. the first epoch's order replayed."""
    from torch.utils.data import DataLoader
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    return itertools.cycle(DataLoader(range(n), batch_size=batch_size, shuffle=True, generator=gen, drop_last=True))


def _chain_streams(rng: str, seed: int, chain: int, n: int, batch_size: int):
    """(noise generator, minibatch index iterator) of one chain under scheme ``rng``."""
    if rng == "devinterp":                  # torch.manual_seed(init_seed + chain); shared DataLoader order
        return (torch.Generator(device="cpu").manual_seed(int(seed) + chain),
                _devinterp_batches(n, batch_size, seed))
    noise = torch.Generator(device="cpu").manual_seed(int(seed) * 1000003 + chain)
    order = torch.Generator(device="cpu").manual_seed(int(seed))          # same minibatches every chain
    return noise, _batches(n, batch_size, order)


@torch.no_grad()
def _sgld_step(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], w0: Sequence[torch.Tensor], *,
               eps: float, n_beta: float, gamma: float, noise: torch.Generator) -> None:
    """One SGLD step in place: w += -(eps/2)(n_beta g + gamma (w - w0)) + sqrt(eps) N(0, I).

    Same operation order and noise draw (one standard normal per parameter, in parameter
    order, in the parameter's dtype) as devinterp 2.x ``SGMCMC.sgld`` with
    ``noise_generator=noise``.
    """
    sq_eps = math.sqrt(eps)
    for p, g, p0 in zip(params, grads, w0):
        dw = g * n_beta
        if gamma:
            dw.add_(p - p0, alpha=gamma)
        p.add_(dw, alpha=-0.5 * eps)
        p.add_(torch.randn(p.shape, generator=noise, dtype=p.dtype).to(p.device), alpha=sq_eps)


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
                 disagree_threshold: float = 0.5, rng: str = "geoanatomy") -> dict:
    """SGLD estimate of the LLC of ``model`` at its current weights (module doc for the formulas).

    loss_fn(model, batch) -> scalar mean loss of a minibatch; data (n, ...) the pool whose
    first dimension indexes examples. ``rng`` picks the noise and minibatch streams:
    "geoanatomy" (independent per seed and chain, reshuffled every epoch) or "devinterp"
    (devinterp 2.x's, for paired comparisons; module doc). Returns a dict with "value" (llc,
    NaN if a chain failed), "std", "per_chain", "init_loss", "mean_sampled_loss", "flags",
    "clean", the settings, and "loss_trace" (chains x (burnin + draws)) for diagnostics.
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
    if rng not in RNG_SCHEMES:
        raise ValueError(f"llc: rng must be one of {RNG_SCHEMES}, got {rng!r}")
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
    try:
        for c in range(chains):
            noise, feed = _chain_streams(rng, seed, c, n, batch_size)
            for t in range(steps):
                b = data[next(feed).to(data.device)]
                loss = loss_fn(model, b)                  # recorded: minibatch loss at w_t, before the step
                lv = float(loss.detach())
                trace[c, t] = lv
                if not math.isfinite(lv):
                    break
                grads = torch.autograd.grad(loss, params)
                _sgld_step(params, grads, w0, eps=eps, n_beta=nb, gamma=gamma, noise=noise)
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
        "n_data": n, "seed": int(seed), "rng": rng, "disagree_threshold": float(disagree_threshold),
        "loss_trace": trace,
    }


def llc_at_checkpoint(model: torch.nn.Module, pool: torch.Tensor, n_answer: int, **kw) -> dict:
    """LLC of ``model.answer_loss`` on a pool of token sequences (n, S); keywords as ``estimate_llc``."""
    from ..model import answer_loss
    return estimate_llc(model, lambda m, b: answer_loss(m, b, n_answer), pool, **kw)
