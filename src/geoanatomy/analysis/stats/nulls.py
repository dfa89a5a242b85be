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
"""
from __future__ import annotations

import math
import warnings
from itertools import permutations

import numpy as np

from ...precursor import is_precursor  # the rule (the claims import it from precursor)
from .exact import sign_test
from .resample import bootstrap_median_ci
from .results import Clock, PairedLead, PrecursorPermutation


def _median_or_nan(x) -> float:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.median(x)) if len(x) else float("nan")


def clock_null(t_tr, t_acq, min_gap_frac: float) -> Clock:
    """Rates a fixed step reaches under the precursor rule (module doc). t_tr, t_acq (n,) of
    the runs in one class (NaN = no event)."""
    t_tr, t_acq = np.asarray(t_tr, dtype=float), np.asarray(t_acq, dtype=float)
    n = len(t_acq)
    cands = np.unique(t_tr[np.isfinite(t_tr)])
    if n == 0 or len(cands) == 0:
        return Clock(n)
    rates = [float(is_precursor(np.full(n, c), t_acq, min_gap_frac).mean()) for c in cands]
    i = int(np.argmax(rates))
    c_med = float(np.median(t_tr[np.isfinite(t_tr)]))
    return Clock(n, float(cands[i]), rates[i], _median_or_nan(t_acq - cands[i]), c_med,
                 float(is_precursor(np.full(n, c_med), t_acq, min_gap_frac).mean()), _median_or_nan(t_acq - c_med))


def _stats(t_tr, t_acq, in_class, min_gap_frac):
    pre = is_precursor(t_tr, t_acq, min_gap_frac) & in_class
    lead = np.where(in_class, t_acq - t_tr, np.nan)
    return int(pre.sum()), int(in_class.sum()), _median_or_nan(lead)


def permutation_null(t_tr, t_acq, groups, in_class_fn, min_gap_frac: float, n_resamples: int = 10_000,
                     seed: int = 0) -> PrecursorPermutation:
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
    null = (f"acquisition steps permuted within groups: {'all' if method == 'exact' else 'Monte Carlo,'} {R}"
            f" arrangements" + ("" if method == "exact" else f", seed {seed}"))
    return PrecursorPermutation(k_obs, p_k, null, n_obs, median_lead=lead_obs, p_median_lead=p_lead,
                                null_mean_k=float(ks.mean()), n_permutations=R)


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


def paired_lead(t_tr, t_ref, n_resamples: int = 10_000, seed: int = 0) -> PairedLead:
    """Paired lead of a transition over a reference event (module doc), per run (n,)."""
    t_tr, t_ref = np.asarray(t_tr, dtype=float), np.asarray(t_ref, dtype=float)
    ok = np.isfinite(t_tr) & np.isfinite(t_ref)
    d = (t_ref - t_tr)[ok]
    dlog = (np.log10(t_ref[ok] + 1) - np.log10(t_tr[ok] + 1))
    st = sign_test(d)
    return PairedLead(_median_or_nan(d), st.p, st.null, st.n, ci=bootstrap_median_ci(d, n_resamples, seed=seed),
                      sign=st, decades=_median_or_nan(dlog), ci_decades=bootstrap_median_ci(dlog, n_resamples,
                                                                                             seed=seed))
