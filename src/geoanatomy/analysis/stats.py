"""Small-n statistics: exact permutation Spearman, pairwise concordance, quantiles.

Spearman's rho = Pearson correlation of the (average-tie) ranks. Its two-sided
p-value is the share of all n! re-pairings of the ranks whose |rho| is at least
the observed |rho| (exact permutation distribution; ties are kept, so tied data
are handled exactly too). scipy's default p-value is asymptotic and only right
for large n (its docs say > 500); the smallest exact two-sided p at n = 6 is 2/720
(only the identity and the reversal reach |rho| = 1). Above ``exact_max_n``,
``scipy.stats.permutation_test`` (pairings, ``n_resamples`` random
permutations, fixed seed) estimates it.
"""
from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
from scipy import stats

_TOL = 1e-12


@lru_cache(maxsize=12)
def _all_permutations(n: int) -> np.ndarray:
    """(n!, n) int8 array of every permutation of range(n)."""
    return np.array(list(itertools.permutations(range(n))), dtype=np.int8)


def _pair_clean(x, y):
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"spearman: x and y must be 1-D of equal length, got {x.shape} and {y.shape}")
    ok = np.isfinite(x) & np.isfinite(y)
    return x[ok], y[ok]


def spearman_exact(x, y, exact_max_n: int = 9, n_resamples: int = 20000, seed: int = 0) -> dict:
    """Spearman rho of paired samples (NaN pairs dropped) with a permutation p-value.

    Returns {rho, p, n, method, n_permutations, reason}; rho and p are None when
    n < 3 or either side is constant (reason says which).
    """
    x, y = _pair_clean(x, y)
    n = len(x)
    out = {"rho": None, "p": None, "n": n, "method": None, "n_permutations": None, "reason": None}
    if n < 3:
        out["reason"] = f"n = {n} < 3 paired values"
        return out
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        out["reason"] = "constant ranks on one side"
        return out
    cx, cy = rx - rx.mean(), ry - ry.mean()
    denom = math.sqrt(float(cx @ cx) * float(cy @ cy))
    rho = float(cx @ cy) / denom
    if n <= exact_max_n:
        perms = _all_permutations(n)                                   # (n!, n)
        hits = 0
        for c0 in range(0, len(perms), 200_000):                        # chunks bound memory at n = 10
            null = (cy[perms[c0:c0 + 200_000]] @ cx) / denom            # (chunk,)
            hits += int((np.abs(null) >= abs(rho) - _TOL).sum())
        p = hits / len(perms)
        out.update(method="exact permutation (all n! pairings)", n_permutations=len(perms))
    else:
        def stat(a, axis=-1):                                           # a: (..., n) permuted ranks
            ac = a - a.mean(axis=axis, keepdims=True)
            return (ac @ cx) / denom
        res = stats.permutation_test((cy,), stat, permutation_type="pairings", vectorized=True,
                                     n_resamples=n_resamples, alternative="two-sided",
                                     rng=np.random.default_rng(seed))
        p = float(res.pvalue)
        out.update(method=f"scipy.stats.permutation_test (pairings, {n_resamples} resamples, seed {seed})",
                   n_permutations=n_resamples)
    out.update(rho=float(np.clip(rho, -1.0, 1.0)), p=min(1.0, p))
    return out


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
    return {"n": int(len(v)), "median": float(med), "q25": float(q25), "q75": float(q75), "iqr": float(q75 - q25)}


def log_steps_close(t1, t2, tol_log10: float) -> bool | None:
    """|log10(t1 + 1) - log10(t2 + 1)| <= tol (None when either step is missing)."""
    if t1 is None or t2 is None:
        return None
    return bool(abs(math.log10(t1 + 1.0) - math.log10(t2 + 1.0)) <= tol_log10 + _TOL)
