"""Null models and baselines for precursor claims: what the precursor rule gives when the
measure knows nothing about acquisition.

The precursor rule (``precursor.is_precursor``): a run's transition at step t precedes its
acquisition at step a when t < a and the gap a - t is at least the share f of a
(f = ``precursor_min_gap_frac``), i.e. t <= (1 - f) a. An early event passes it in every
run, whatever it measures, so a precursor rate means nothing without these references:

clock null
    The same rule applied to one fixed step c, the same in every run. ``clock_best`` is the
    best rate over c among the measure's own transition steps (with its c and median lead);
    ``clock_median`` uses c = the median of those steps (a clock that fires when the
    measure typically fires). A measure whose rate does not beat the clock's is timed by
    the schedule, not by the run.
permutation null
    Acquisition steps shuffled across the runs of one size (the class of a run moves with
    its acquisition step, as classes are defined by it): the p-value of the observed
    precursor count k (one-sided: as many or more) and of the observed median lead
    (as long or longer), from ``n_resamples`` permutations (exact enumeration when the
    number of distinct permutations is smaller), p = (1 + #{null >= observed}) / (1 + R).
paired lead over a reference
    Per run with both events: d = t_reference - t_transition (steps; > 0: the measure
    fires first) and the same in decades, log10(t_ref + 1) - log10(t_tr + 1). Reported:
    n, wins/losses/ties, the exact two-sided sign test p (ties dropped), the median d and
    its percentile bootstrap interval over runs.
cluster bootstrap
    Intervals of rates and gaps over units: task x level x size cells resampled with
    replacement, the runs (seeds) of each drawn cell resampled inside it, so replicate seeds
    never count as independent evidence.
"""
from __future__ import annotations

import math
import warnings
from functools import lru_cache
from itertools import permutations

import numpy as np
import pandas as pd

from ..precursor import is_precursor  # the rule (analysis.verdict imports it from here too)
from .stats import sign_test as binomial_p


def _median_or_nan(x) -> float:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.median(x)) if len(x) else float("nan")


def clock_null(t_tr, t_acq, min_gap_frac: float) -> dict:
    """Rates a fixed step reaches under the precursor rule (module doc). t_tr, t_acq (n,) of
    the runs in one class (NaN = no event)."""
    t_tr, t_acq = np.asarray(t_tr, dtype=float), np.asarray(t_acq, dtype=float)
    n = len(t_acq)
    cands = np.unique(t_tr[np.isfinite(t_tr)])
    out = {"n": n, "clock_best_step": None, "clock_best_rate": None, "clock_best_median_lead": None,
           "clock_median_step": None, "clock_median_rate": None, "clock_median_median_lead": None}
    if n == 0 or len(cands) == 0:
        return out
    rates = [float(is_precursor(np.full(n, c), t_acq, min_gap_frac).mean()) for c in cands]
    i = int(np.argmax(rates))
    c_med = float(np.median(t_tr[np.isfinite(t_tr)]))
    out.update(clock_best_step=float(cands[i]), clock_best_rate=rates[i],
               clock_best_median_lead=_median_or_nan(t_acq - cands[i]),
               clock_median_step=c_med,
               clock_median_rate=float(is_precursor(np.full(n, c_med), t_acq, min_gap_frac).mean()),
               clock_median_median_lead=_median_or_nan(t_acq - c_med))
    return out


def _stats(t_tr, t_acq, in_class, min_gap_frac):
    pre = is_precursor(t_tr, t_acq, min_gap_frac) & in_class
    lead = np.where(in_class, t_acq - t_tr, np.nan)
    return int(pre.sum()), int(in_class.sum()), _median_or_nan(lead)


def permutation_null(t_tr, t_acq, groups, in_class_fn, min_gap_frac: float, n_resamples: int = 10_000,
                     seed: int = 0) -> dict:
    """Permutation p-values of the precursor count and the median lead (module doc).

    t_tr, t_acq (n,): every acquired run's transition and acquisition steps (NaN = none);
    groups (n,): the size of each run (acquisition steps are shuffled within a group);
    in_class_fn(t_acq) -> bool (n,): which runs belong to the class being tested (e.g.
    hard = acquired after easy_max_step), evaluated on the (permuted) acquisition steps."""
    t_tr, t_acq = np.asarray(t_tr, dtype=float), np.asarray(t_acq, dtype=float)
    groups = np.asarray(groups)
    k_obs, n_obs, lead_obs = _stats(t_tr, t_acq, in_class_fn(t_acq), min_gap_frac)
    idx_by_group = [np.flatnonzero(groups == g) for g in dict.fromkeys(groups.tolist())]
    n_perm = math.prod(math.factorial(len(ix)) for ix in idx_by_group)
    rng = np.random.default_rng(seed)
    if n_perm <= n_resamples and n_perm <= 40_320:        # exact: every arrangement once
        method = "exact"
        perms = [list(p) for p in _all_group_perms(idx_by_group, len(t_acq))]
    else:
        method = "monte_carlo"
        perms = []
        for _ in range(n_resamples):
            order = np.arange(len(t_acq))
            for ix in idx_by_group:
                order[ix] = rng.permutation(ix)
            perms.append(order)
    ks, leads = _perm_stats(t_tr, t_acq, np.asarray(perms, dtype=np.int64), in_class_fn, min_gap_frac)
    R = len(perms)
    # one convention in both branches: a permutation whose class has no lead (NaN) counts as
    # not reaching the observed lead, and the denominator is every arrangement drawn; the
    # exact branch counts the identity among all arrangements, the Monte Carlo one adds it
    ge_lead = (np.where(np.isfinite(leads), leads, -np.inf) >= lead_obs) if math.isfinite(lead_obs) else None
    if method == "exact":
        p_k = float(np.mean(ks >= k_obs))
        p_lead = float(np.mean(ge_lead)) if ge_lead is not None else None
    else:
        p_k = float((1 + np.sum(ks >= k_obs)) / (1 + R))
        p_lead = float((1 + np.sum(ge_lead)) / (1 + R)) if ge_lead is not None else None
    return {"k": k_obs, "n": n_obs, "median_lead": lead_obs, "p_rate": p_k, "p_median_lead": p_lead,
            "null_mean_k": float(ks.mean()), "n_permutations": R, "method": method}


def _perm_stats(t_tr, t_acq, perms, in_class_fn, min_gap_frac, chunk: int = 4096):
    """``_stats`` of every arrangement at once: perms (R, n) -> precursor counts (R,) and median
    leads (R,), NaN where the class has no lead (the same numbers as one ``_stats`` per row)."""
    ks, leads = [], []
    for c0 in range(0, len(perms), chunk):
        a = t_acq[perms[c0:c0 + chunk]]                                   # (r, n)
        ic = np.broadcast_to(np.asarray(in_class_fn(a), dtype=bool), a.shape)
        ks.append((is_precursor(t_tr[None, :], a, min_gap_frac) & ic).sum(axis=1))
        lead = np.where(ic, a - t_tr[None, :], np.nan)
        lead[~np.isfinite(lead)] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)               # all-NaN rows: no lead
            leads.append(np.nanmedian(lead, axis=1))
    return np.concatenate(ks).astype(np.int64), np.concatenate(leads).astype(float)


def _all_group_perms(idx_by_group, n):
    """Every permutation of range(n) that only permutes within the groups."""
    def rec(g, order):
        if g == len(idx_by_group):
            yield order.copy()
            return
        ix = idx_by_group[g]
        for p in permutations(ix):
            order[ix] = p
            yield from rec(g + 1, order)
    yield from rec(0, np.arange(n))


def sign_test(d, alternative: str = "two-sided") -> dict:
    """Exact sign test of the paired differences d (ties dropped; ``alternative`` "greater":
    more positive differences than chance)."""
    d = np.asarray(d, dtype=float)
    d = d[np.isfinite(d)]
    wins, losses = int((d > 0).sum()), int((d < 0).sum())
    m = wins + losses
    return {"n": int(len(d)), "wins": wins, "losses": losses, "ties": int(len(d) - m),
            "p": binomial_p(wins, m, alternative)}


def bootstrap_median_ci(x, n_resamples: int = 10_000, level: float = 0.95, seed: int = 0) -> tuple:
    """Percentile bootstrap interval of the median of x over its elements."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return (None, None)
    rng = np.random.default_rng(seed)
    meds = np.median(x[rng.integers(0, len(x), size=(n_resamples, len(x)))], axis=1)
    lo, hi = np.quantile(meds, [(1 - level) / 2, 1 - (1 - level) / 2])
    return (float(lo), float(hi))


def paired_lead(t_tr, t_ref, n_resamples: int = 10_000, seed: int = 0) -> dict:
    """Paired lead of a transition over a reference event (module doc), per run (n,)."""
    t_tr, t_ref = np.asarray(t_tr, dtype=float), np.asarray(t_ref, dtype=float)
    ok = np.isfinite(t_tr) & np.isfinite(t_ref)
    d = (t_ref - t_tr)[ok]
    dlog = (np.log10(t_ref[ok] + 1) - np.log10(t_tr[ok] + 1))
    st = sign_test(d)
    lo, hi = bootstrap_median_ci(d, n_resamples, seed=seed)
    llo, lhi = bootstrap_median_ci(dlog, n_resamples, seed=seed)
    return {**st, "median_lead_steps": _median_or_nan(d), "ci95_lead_steps": [lo, hi],
            "median_lead_decades": _median_or_nan(dlog), "ci95_lead_decades": [llo, lhi]}


# The unit of the single-task statistics: a task x level x size cell (its seeds nested inside).
CELLS = ("task", "level", "size")


@lru_cache(maxsize=512)
def _cluster_draws(sizes: tuple, n_resamples: int, seed: int) -> tuple:
    """The resamples of a cluster bootstrap over cells of ``sizes`` runs each: per resample the
    (cell, offset in the cell) of every drawn run, as flat arrays. Depends on the cell sizes
    alone, so every measure and class with the same cells reuses one set of draws (the same
    numbers as drawing them again: same generator, same calls, same order)."""
    rng = np.random.default_rng(seed)
    sz = np.asarray(sizes)
    out = []
    for _ in range(n_resamples):
        pick = rng.integers(0, len(sizes), len(sizes))
        within = [rng.integers(0, sz[i], sz[i]) for i in pick]
        out.append((np.repeat(pick, sz[pick]), np.concatenate(within)))
    return tuple(out)


def cluster_bootstrap(df: pd.DataFrame, stat, n_resamples: int = 2000, seed: int = 0,
                      cell_cols=CELLS) -> tuple:
    """Percentile 95% interval of ``stat(idx)`` (idx: positions into ``df``): cells resampled
    with replacement and the runs (seeds) of each drawn cell resampled inside it. ``stat``
    works on positions so that statistics of per-run numbers stay numpy-fast."""
    if not len(df):
        return (None, None)
    codes = df.groupby(list(cell_cols), sort=True).ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")            # the positions of cell g: order[start[g]:start[g+1]]
    sizes = np.bincount(codes, minlength=codes.max() + 1)
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    vals = []
    for cell, off in _cluster_draws(tuple(int(x) for x in sizes), int(n_resamples), int(seed)):
        v = stat(order[start[cell] + off])
        if v is not None and np.isfinite(v):
            vals.append(v)
    if not vals:
        return (None, None)
    lo, hi = np.quantile(vals, [0.025, 0.975])
    return (float(lo), float(hi))
