"""Statistics, the one home of resampling: permutation Spearman (plain and stratified), Holm,
sign tests, concordance, the precursor nulls (clock, permutation), paired leads and the
cluster bootstrap over cells.

Spearman's rho = Pearson correlation of the (average-tie) ranks. ``p_greater`` is the
one-sided p for rho > 0, the share of re-pairings with rho_perm >= rho_obs (halving the
two-sided p is exact only when the null is symmetric, which ties break). Its two-sided
p-value is the share of re-pairings of the ranks whose |rho| is at least the
observed |rho| (one rule in every branch: |rho_perm| >= |rho_obs| - 1e-12);
ties are kept, so tied data are handled exactly too. This is the only Spearman
implementation in the project (``geoanatomy.pythia.scale`` imports it).

* n <= ``exact_max_n`` (default 10, at most 10): exact, over all n! pairings.
  They are enumerated block-wise, never all at once: one table of the 8! = 40320
  orderings of the last min(n, 8) positions, reused under each of the n!/8!
  orderings of the first n - 8 positions (90 blocks at n = 10), so memory stays
  at a few MB (peak under 10 MB at n = 10, tested) and no n! x n array is built.
* above: Monte Carlo, ``n_resamples`` uniformly random pairings from a seeded
  ``numpy.random.default_rng(seed)`` (own loop, no scipy.stats.permutation_test,
  so it behaves the same on every scipy >= 1.11); p = (1 + #{|rho_perm| >=
  |rho_obs| - 1e-12}) / (1 + n_resamples), i.e. the same share over the observed
  pairing plus the random ones (the exact branch counts the identity too).

scipy's default Spearman p-value is asymptotic and only right for large n (its
docs say > 500); the smallest exact two-sided p at n = 6 is 2/720.

``spearman_stratified``: the same rho over pooled units, its null made by
permuting the pairing only within strata (e.g. within a curriculum level), so
a stratum effect alone (all units of one level high at both sizes) is kept in
the null and does not make the correlation significant. Monte Carlo as above.

``holm``: Holm's step-down adjustment of a family of p-values (None kept).
``binomial_p``: exact binomial test of k successes in n at 1/2 (two-sided, or one-sided);
``sign_test``: the sign test of paired differences (ties dropped) through it.

The nulls and intervals of the precursor claims (this module is the one home of resampling:
permutations, bootstraps, exact tests):

Null models and baselines for precursor claims: what the precursor rule gives when the
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

import itertools
import math
import warnings
from functools import lru_cache
from itertools import permutations

import numpy as np
import pandas as pd
from scipy import stats

from ..precursor import is_precursor  # the rule (the claims import it from precursor)

_TOL = 1e-12
EXACT_MAX_N = 10            # largest n with an exact p (10! = 3628800 pairings, enumerated block-wise)
_BLOCK = 8                  # trailing positions enumerated as one table (8! rows)
_MC_CHUNK = 10_000          # random pairings drawn per batch


@lru_cache(maxsize=_BLOCK + 1)
def _perm_table(m: int) -> np.ndarray:
    """(m!, m) int8 array of every permutation of range(m), m <= 8 (at most 320 kB)."""
    return np.array(list(itertools.permutations(range(m))), dtype=np.int8).reshape(-1, m)


def _pair_clean(x, y):
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"spearman: x and y must be 1-D of equal length, got {x.shape} and {y.shape}")
    ok = np.isfinite(x) & np.isfinite(y)
    return x[ok], y[ok]


def _centred_ranks(x, y):
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    cx, cy = rx - rx.mean(), ry - ry.mean()
    return cx, cy


def _exact_hits(cx: np.ndarray, cy: np.ndarray, denom: float, thr: float, signed: bool = False) -> int:
    """#pairings pi (all n!) with |sum cx_i cy_pi(i)| / denom >= thr (``signed``: without the
    absolute value, for a one-sided p), enumerated block-wise."""
    n = len(cx)
    m = min(n, _BLOCK)
    k = n - m
    table = _perm_table(m).astype(np.intp)
    hits = 0
    for prefix in itertools.permutations(range(n), k):          # n!/m! blocks (1 for n <= 8)
        rest = np.array([i for i in range(n) if i not in prefix], dtype=np.intp)
        head = float(cx[:k] @ cy[list(prefix)]) if k else 0.0
        null = (head + cy[rest][table] @ cx[k:]) / denom          # (m!,)
        hits += int(((null if signed else np.abs(null)) >= thr).sum())
    return hits


def _mc_hits(cx, cy, denom, thr, n_resamples, seed, strata=None, signed: bool = False) -> int:
    """#random pairings (seeded; within strata when given) with |rho_perm| >= thr (``signed``:
    rho_perm >= thr)."""
    rng = np.random.default_rng(seed)
    n = len(cx)
    strata = np.zeros(n) if strata is None else strata
    hits, done = 0, 0
    while done < n_resamples:
        b = min(_MC_CHUNK, n_resamples - done)
        idx = strata_permutations(strata, b, rng)
        null = (cy[idx] @ cx) / denom
        hits += int(((null if signed else np.abs(null)) >= thr).sum())
        done += b
    return hits


def strata_permutations(strata, n_perm: int, rng) -> np.ndarray:
    """(n_perm, n) index arrays, each a uniformly random permutation of range(n) that moves
    units only within their stratum (one draw of rng.random per stratum, in np.unique order)."""
    strata = np.asarray(strata)
    idx = np.empty((n_perm, len(strata)), dtype=np.intp)
    for s in np.unique(strata):
        g = np.flatnonzero(strata == s)
        idx[:, g] = g[np.argsort(rng.random((n_perm, len(g))), axis=1)]
    return idx


def _rho(x, y):
    """(centred ranks of x, of y, the norm product, Spearman rho) of cleaned pairs, or the
    reason rho is undefined (fewer than 3 pairs, a constant side)."""
    n = len(x)
    if n < 3:
        return f"n = {n} < 3 paired values"
    cx, cy = _centred_ranks(x, y)
    if np.ptp(cx) == 0 or np.ptp(cy) == 0:
        return "constant ranks on one side"
    denom = math.sqrt(float(cx @ cx) * float(cy @ cy))
    return cx, cy, denom, float(cx @ cy) / denom


def _rho_or_reason(out: dict, x, y):
    """``_rho(x, y)``, or None after writing its reason into ``out`` (too few or constant)."""
    prep = _rho(x, y)
    if isinstance(prep, str):
        out["reason"] = prep
        return None
    return prep


def spearman_exact(x, y, exact_max_n: int = EXACT_MAX_N, n_resamples: int = 20000, seed: int = 0) -> dict:
    """Spearman rho of paired samples (pairs with a non-finite value dropped) with a
    two-sided permutation p-value (module doc).

    Returns {rho, p, n, method, n_permutations, reason, test}; rho and p are None when
    n < 3 or either side is constant (reason says which). ``exact_max_n`` is capped at 10.
    """
    x, y = _pair_clean(x, y)
    n = len(x)
    out = {"rho": None, "p": None, "p_greater": None, "n": n, "method": None, "n_permutations": None, "reason": None,
           "test": "Spearman rho, two-sided permutation p (|rho_perm| >= |rho_obs|)"}
    prep = _rho_or_reason(out, x, y)
    if prep is None:
        return out
    cx, cy, denom, rho = prep
    thr = abs(rho) - _TOL
    if n <= min(int(exact_max_n), EXACT_MAX_N):
        total = math.factorial(n)
        p = _exact_hits(cx, cy, denom, thr) / total
        p_gt = _exact_hits(cx, cy, denom, rho - _TOL, signed=True) / total
        out.update(method="exact permutation (all n! pairings)", n_permutations=total)
    else:
        R = int(n_resamples)
        p = (1 + _mc_hits(cx, cy, denom, thr, R, seed)) / (1 + R)
        p_gt = (1 + _mc_hits(cx, cy, denom, rho - _TOL, R, seed, signed=True)) / (1 + R)
        out.update(method=f"Monte Carlo permutation ({n_resamples} random pairings, seed {seed})",
                   n_permutations=int(n_resamples))
    out.update(rho=float(np.clip(rho, -1.0, 1.0)), p=min(1.0, p), p_greater=min(1.0, p_gt))
    return out


def spearman_stratified(x, y, strata, n_resamples: int = 20000, seed: int = 0) -> dict:
    """Spearman rho over all pooled pairs; two-sided p from permutations of the pairing
    *within* each stratum only (Monte Carlo, seeded; module doc)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    strata = np.asarray(strata)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y, strata = x[ok], y[ok], strata[ok]
    n = len(x)
    out = {"rho": None, "p": None, "p_greater": None, "n": n, "n_strata": len(np.unique(strata)), "method": None,
           "n_permutations": None, "reason": None,
           "test": "Spearman rho over pooled units, two-sided p from permutations within strata"}
    prep = _rho_or_reason(out, x, y)
    if prep is None:
        return out
    cx, cy, denom, rho = prep
    hits = _mc_hits(cx, cy, denom, abs(rho) - _TOL, int(n_resamples), seed, strata=strata)
    hits_gt = _mc_hits(cx, cy, denom, rho - _TOL, int(n_resamples), seed, strata=strata, signed=True)
    out.update(rho=float(np.clip(rho, -1.0, 1.0)), p=min(1.0, (1 + hits) / (1 + int(n_resamples))),
               p_greater=min(1.0, (1 + hits_gt) / (1 + int(n_resamples))),
               method=f"Monte Carlo permutation within strata ({n_resamples} random pairings, seed {seed})",
               n_permutations=int(n_resamples))
    return out


def holm(pvals) -> list:
    """Holm step-down adjusted p-values, in input order; None/NaN entries stay None and are not
    counted in the family size."""
    idx = [i for i, p in enumerate(pvals) if p is not None and np.isfinite(p)]
    out = [None] * len(pvals)
    m = len(idx)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: pvals[i])):
        running = max(running, min(1.0, (m - rank) * float(pvals[i])))
        out[i] = running
    return out


def binomial_p(k: int, n: int, alternative: str = "two-sided") -> float | None:
    """Exact binomial p of k successes in n trials at 1/2 (None when n = 0); ``alternative``
    "greater" for a one-sided test of more successes than chance."""
    if n <= 0:
        return None
    return float(stats.binomtest(int(k), int(n), 0.5, alternative=alternative).pvalue)


def concordance(a, b) -> dict:
    """Pairwise order agreement of a and b (NaN pairs dropped).

    Over all pairs i < j: concordant if sign(a_i - a_j) = sign(b_i - b_j) != 0,
    discordant if the signs are opposite, tied otherwise. concordance =
    C / (C + D) (None when no untied pair); tau_b and its p from
    ``scipy.stats.kendalltau`` (exact for small n without ties, else asymptotic).
    """
    a, b = _pair_clean(a, b)
    n = len(a)
    out = {"n": n, "pairs": n * (n - 1) // 2, "concordant": 0, "discordant": 0, "tied": 0,
           "concordance": None, "tau_b": None, "p": None}
    if n < 2:
        return out
    i, j = np.triu_indices(n, 1)
    s = np.sign(a[i] - a[j]) * np.sign(b[i] - b[j])
    C, D = int((s > 0).sum()), int((s < 0).sum())
    out.update(concordant=C, discordant=D, tied=int(len(s) - C - D))
    if C + D:
        out["concordance"] = C / (C + D)
    if n >= 3 and np.ptp(a) > 0 and np.ptp(b) > 0:
        res = stats.kendalltau(a, b)
        if np.isfinite(res.statistic):
            out["tau_b"] = float(res.statistic)
            out["p"] = float(res.pvalue) if np.isfinite(res.pvalue) else None
    return out


def quantiles(values) -> dict:
    """median, q25, q75, iqr (linear interpolation) of the finite values; None when empty."""
    v = np.asarray([x for x in values if x is not None], dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return {"n": 0, "median": None, "q25": None, "q75": None, "iqr": None}
    q25, med, q75 = np.percentile(v, [25, 50, 75])
    return {"n": len(v), "median": float(med), "q25": float(q25), "q75": float(q75), "iqr": float(q75 - q25)}


def log_steps_close(t1, t2, tol_log10: float) -> bool | None:
    """|log10(t1 + 1) - log10(t2 + 1)| <= tol (None when either step is missing)."""
    if t1 is None or t2 is None:
        return None
    return bool(abs(math.log10(t1 + 1.0) - math.log10(t2 + 1.0)) <= tol_log10 + _TOL)


def _ranks(v: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata
    return rankdata(v, method="average")


def _pearson(a: np.ndarray, b: np.ndarray) -> float | None:
    a, b = a - a.mean(), b - b.mean()
    den = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return None if den == 0 else float((a * b).sum() / den)


def spearman_within_strata(x, y, strata, max_exact: int = 100_000, n_resamples: int = 20_000,
                        seed: int = 0) -> dict:
    """Spearman correlation of x and y *within* strata, with a stratified permutation p.

    rho_within = Pearson correlation of the ranks of x and of y after subtracting each
    stratum's mean rank (ranks over all pairs, average ties); a factor shared by every
    member of a stratum (the same last token in every prompt) moves the stratum means, not
    rho_within. p (two-sided) = share of the permutations of y *within* strata with
    |rho_within| >= observed - 1e-12: exact when the product of the strata's factorials is
    at most ``max_exact``, else seeded Monte Carlo, (1 + #extreme) / (1 + R). Pairs with a
    missing value are dropped; rho is None with fewer than 3 pairs or no within-stratum
    variation. ``rho_pooled`` (plain Spearman over all pairs) is reported for contrast."""
    keep = [i for i, (a, b, s) in enumerate(zip(x, y, strata))
            if a is not None and b is not None and s is not None
            and math.isfinite(float(a)) and math.isfinite(float(b))]
    xs = np.array([float(x[i]) for i in keep])
    ys = np.array([float(y[i]) for i in keep])
    ss = [strata[i] for i in keep]
    out = {"n": len(keep), "strata": {s: ss.count(s) for s in dict.fromkeys(ss)}, "rho_within": None,
           "rho_pooled": None, "p_value": None, "method": None, "n_permutations": None,
           "test": "Spearman within strata, two-sided stratified permutation p"}
    if len(keep) < 3:
        out["method"] = f"not computed: {len(keep)} < 3 pairs"
        return out
    rx, ry = _ranks(xs), _ranks(ys)
    out["rho_pooled"] = _pearson(rx, ry)
    groups = [np.array([i for i, s in enumerate(ss) if s == g]) for g in dict.fromkeys(ss)]

    def centre(r):
        r = r.copy()
        for g in groups:
            r[g] -= r[g].mean()
        return r
    cx = centre(rx)
    rho = _pearson(cx, centre(ry))
    if rho is None:
        out["method"] = "not computed: no variation within strata"
        return out
    out["rho_within"] = rho
    n_perm = math.prod(math.factorial(len(g)) for g in groups)
    count, total = 0, 0
    if n_perm <= max_exact:
        for perms in itertools.product(*[itertools.permutations(g) for g in groups]):
            idx = np.empty(len(ss), dtype=int)
            for g, pg in zip(groups, perms):
                idx[g] = pg
            r = _pearson(cx, centre(ry[idx]))
            count += int(r is not None and abs(r) >= abs(rho) - 1e-12)
            total += 1
        p = count / total
        out.update(method="exact stratified permutation", n_permutations=total)
    else:
        rng = np.random.default_rng(seed)
        for _ in range(n_resamples):
            idx = np.arange(len(ss))
            for g in groups:
                idx[g] = rng.permutation(g)
            r = _pearson(cx, centre(ry[idx]))
            count += int(r is not None and abs(r) >= abs(rho) - 1e-12)
        p = (1 + count) / (1 + n_resamples)
        out.update(method=f"Monte-Carlo stratified permutation ({n_resamples}, seed {seed})",
                   n_permutations=n_resamples)
    out["p_value"] = p
    return out


# ------------------------------------------------------------ the precursor nulls, resampling
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
