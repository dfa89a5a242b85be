"""Spearman's rho = Pearson correlation of the (average-tie) ranks. ``p_greater`` is the
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

``spearman_within_strata``: the correlation within strata (each stratum's mean rank removed),
with its stratified permutation p (exact when the strata's permutations are few).
``concordance``: pairwise order agreement with Kendall's tau_b.
"""
from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
from scipy import stats

from .exact import TOL
from .resample import strata_permutations
from .results import Concordance, Correlation

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


SPEARMAN = "Spearman rho, two-sided permutation p (|rho_perm| >= |rho_obs|)"
SPEARMAN_STRATIFIED = "Spearman rho over pooled units, two-sided p from permutations within strata"
SPEARMAN_WITHIN = "Spearman within strata, two-sided stratified permutation p"


def spearman_exact(x, y, exact_max_n: int = EXACT_MAX_N, n_resamples: int = 20000, seed: int = 0) -> Correlation:
    """Spearman rho of paired samples (pairs with a non-finite value dropped) with a
    two-sided permutation p-value (module doc).

    rho and p are None when n < 3 or either side is constant (``reason`` says which).
    ``exact_max_n`` is capped at 10.
    """
    x, y = _pair_clean(x, y)
    n = len(x)
    prep = _rho(x, y)
    if isinstance(prep, str):
        return Correlation(None, None, None, n, reason=prep, test=SPEARMAN)
    cx, cy, denom, rho = prep
    thr = abs(rho) - TOL
    if n <= min(int(exact_max_n), EXACT_MAX_N):
        total = math.factorial(n)
        p = _exact_hits(cx, cy, denom, thr) / total
        p_gt = _exact_hits(cx, cy, denom, rho - TOL, signed=True) / total
        null, n_perm = "exact permutation (all n! pairings)", total
    else:
        R = int(n_resamples)
        p = (1 + _mc_hits(cx, cy, denom, thr, R, seed)) / (1 + R)
        p_gt = (1 + _mc_hits(cx, cy, denom, rho - TOL, R, seed, signed=True)) / (1 + R)
        null, n_perm = f"Monte Carlo permutation ({n_resamples} random pairings, seed {seed})", int(n_resamples)
    return Correlation(float(np.clip(rho, -1.0, 1.0)), min(1.0, p), null, n, p_greater=min(1.0, p_gt),
                       n_permutations=n_perm, test=SPEARMAN)


def spearman_stratified(x, y, strata, n_resamples: int = 20000, seed: int = 0) -> Correlation:
    """Spearman rho over all pooled pairs; two-sided p from permutations of the pairing
    *within* each stratum only (Monte Carlo, seeded; module doc)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    strata = np.asarray(strata)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y, strata = x[ok], y[ok], strata[ok]
    n, n_strata = len(x), len(np.unique(strata))
    prep = _rho(x, y)
    if isinstance(prep, str):
        return Correlation(None, None, None, n, reason=prep, n_strata=n_strata, test=SPEARMAN_STRATIFIED)
    cx, cy, denom, rho = prep
    R = int(n_resamples)
    hits = _mc_hits(cx, cy, denom, abs(rho) - TOL, R, seed, strata=strata)
    hits_gt = _mc_hits(cx, cy, denom, rho - TOL, R, seed, strata=strata, signed=True)
    return Correlation(float(np.clip(rho, -1.0, 1.0)), min(1.0, (1 + hits) / (1 + R)),
                       f"Monte Carlo permutation within strata ({n_resamples} random pairings, seed {seed})", n,
                       p_greater=min(1.0, (1 + hits_gt) / (1 + R)), n_permutations=R, n_strata=n_strata,
                       test=SPEARMAN_STRATIFIED)


def concordance(a, b) -> Concordance:
    """Pairwise order agreement of a and b (NaN pairs dropped).

    Over all pairs i < j: concordant if sign(a_i - a_j) = sign(b_i - b_j) != 0,
    discordant if the signs are opposite, tied otherwise. concordance =
    C / (C + D) (None when no untied pair); tau_b and its p from
    ``scipy.stats.kendalltau`` (exact for small n without ties, else asymptotic).
    """
    a, b = _pair_clean(a, b)
    n = len(a)
    null = "Kendall tau_b (scipy.stats.kendalltau: exact for small n without ties, else asymptotic)"
    if n < 2:
        return Concordance(None, None, null, n, pairs=n * (n - 1) // 2, reason=f"{n} < 2 pairs")
    i, j = np.triu_indices(n, 1)
    s = np.sign(a[i] - a[j]) * np.sign(b[i] - b[j])
    C, D = int((s > 0).sum()), int((s < 0).sum())
    tau = p = None
    if n >= 3 and np.ptp(a) > 0 and np.ptp(b) > 0:
        res = stats.kendalltau(a, b)
        if np.isfinite(res.statistic):
            tau = float(res.statistic)
            p = float(res.pvalue) if np.isfinite(res.pvalue) else None
    return Concordance(C / (C + D) if C + D else None, p, null, n, pairs=n * (n - 1) // 2, concordant=C,
                       discordant=D, tied=int(len(s) - C - D), tau_b=tau)


def _ranks(v: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata
    return rankdata(v, method="average")


def _pearson(a: np.ndarray, b: np.ndarray) -> float | None:
    a, b = a - a.mean(), b - b.mean()
    den = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return None if den == 0 else float((a * b).sum() / den)


def spearman_within_strata(x, y, strata, max_exact: int = 100_000, n_resamples: int = 20_000,
                           seed: int = 0) -> Correlation:
    """Spearman correlation of x and y *within* strata, with a stratified permutation p.

    rho_within = Pearson correlation of the ranks of x and of y after subtracting each
    stratum's mean rank (ranks over all pairs, average ties); a factor shared by every
    member of a stratum (the same last token in every prompt) moves the stratum means, not
    rho_within. p (two-sided) = share of the permutations of y *within* strata with
    |rho_within| >= observed - 1e-12: exact when the product of the strata's factorials is
    at most ``max_exact``, else seeded Monte Carlo, (1 + #extreme) / (1 + R). Pairs with a
    missing value are dropped; rho is None with fewer than 3 pairs or no within-stratum
    variation. ``pooled`` (plain Spearman over all pairs) is reported for contrast; ``strata`` the
    pairs per stratum."""
    keep = [i for i, (a, b, s) in enumerate(zip(x, y, strata))
            if a is not None and b is not None and s is not None
            and math.isfinite(float(a)) and math.isfinite(float(b))]
    xs = np.array([float(x[i]) for i in keep])
    ys = np.array([float(y[i]) for i in keep])
    ss = [strata[i] for i in keep]
    counts = {s: ss.count(s) for s in dict.fromkeys(ss)}
    if len(keep) < 3:
        return Correlation(None, None, None, len(keep), reason=f"{len(keep)} < 3 pairs", strata=counts,
                           test=SPEARMAN_WITHIN)
    rx, ry = _ranks(xs), _ranks(ys)
    pooled = _pearson(rx, ry)
    groups = [np.array([i for i, s in enumerate(ss) if s == g]) for g in dict.fromkeys(ss)]

    def centre(r):
        r = r.copy()
        for g in groups:
            r[g] -= r[g].mean()
        return r
    cx = centre(rx)
    rho = _pearson(cx, centre(ry))
    if rho is None:
        return Correlation(None, None, None, len(keep), reason="no variation within strata", strata=counts,
                           pooled=pooled, test=SPEARMAN_WITHIN)
    n_perm = math.prod(math.factorial(len(g)) for g in groups)
    count, total = 0, 0
    if n_perm <= max_exact:
        for perms in itertools.product(*[itertools.permutations(g) for g in groups]):
            idx = np.empty(len(ss), dtype=int)
            for g, pg in zip(groups, perms):
                idx[g] = pg
            r = _pearson(cx, centre(ry[idx]))
            count += int(r is not None and abs(r) >= abs(rho) - TOL)
            total += 1
        p = count / total
        null, n_perm = "exact stratified permutation", total
    else:
        rng = np.random.default_rng(seed)
        for _ in range(n_resamples):
            idx = np.arange(len(ss))
            for g in groups:
                idx[g] = rng.permutation(g)
            r = _pearson(cx, centre(ry[idx]))
            count += int(r is not None and abs(r) >= abs(rho) - TOL)
        p = (1 + count) / (1 + n_resamples)
        null, n_perm = f"Monte-Carlo stratified permutation ({n_resamples}, seed {seed})", n_resamples
    return Correlation(rho, p, null, len(keep), n_permutations=n_perm, strata=counts, pooled=pooled,
                       test=SPEARMAN_WITHIN)
