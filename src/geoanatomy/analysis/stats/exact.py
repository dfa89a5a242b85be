"""Exact tests and descriptive helpers.

``holm``: Holm's step-down adjustment of a family of p-values (None kept).
``binomial_p``: exact binomial test of k successes in n at 1/2 (two-sided, or one-sided);
``sign_test``: the sign test of paired differences (ties dropped) through it.
``clopper_pearson``, ``upper_bound``: the exact interval and one-sided bound of a share k/n.
``quantiles``: median and quartiles of the finite values; ``log_steps_close``: two steps within a
tolerance in decades.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .results import SignTest

TOL = 1e-12                 # ties of a statistic with its observed value count as ties, not by float noise


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


def sign_test(d, alternative: str = "two-sided") -> SignTest:
    """Exact sign test of the paired differences d (ties dropped; ``alternative`` "greater":
    more positive differences than chance)."""
    d = np.asarray(d, dtype=float)
    d = d[np.isfinite(d)]
    wins, losses = int((d > 0).sum()), int((d < 0).sum())
    m = wins + losses
    return SignTest(wins, binomial_p(wins, m, alternative), f"exact binomial at 1/2 over {m} untied differences"
                    f" ({alternative})", int(len(d)), wins=wins, losses=losses, ties=int(len(d) - m))


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
    return bool(abs(math.log10(t1 + 1.0) - math.log10(t2 + 1.0)) <= tol_log10 + TOL)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple:
    """The exact (Clopper-Pearson) two-sided ``level`` interval of a share k/n ((None, None)
    without units)."""
    if n == 0:
        return (None, None)
    tail = (1 - level) / 2
    lo = 0.0 if k == 0 else float(stats.beta.ppf(tail, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - tail, k + 1, n - k))
    return (lo, hi)


def upper_bound(k: int, n: int, level: float = 0.95):
    """The one-sided ``level`` Clopper-Pearson upper bound of a share k/n (None without units)."""
    if n == 0:
        return None
    return 1.0 if k == n else float(stats.beta.ppf(level, k + 1, n - k))
