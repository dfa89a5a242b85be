"""Timing tests over units (cells): does geometry say more than the loss curve, and is an
event simultaneous with, before or after acquisition.

Beyond the loss curve (``beyond_loss``). Per unit y = log t_acq, g = log(t_tr + 1) (the
measure's event), l = log(t_ref + 1) (the loss curve's event of the same kind and depth).
Two questions, both must say yes:

partial rank correlation
    r = corr(e_y, e_g), where e_y and e_g are the residuals of the ranks of y and of g
    regressed on (1, rank of l): what g says about y that l does not. One-sided
    Freedman-Lane permutation p for r > 0: under the null g depends on l only, so its
    residuals e_g are exchangeable; they are permuted within strata (sizes: step budgets
    differ between sizes), g* = fitted + permuted residuals is regressed on l again, and
    p = (1 + #{r* >= r}) / (1 + R).
leave-one-unit-out prediction
    y predicted by least squares from (1, l) and from (1, l, g), each unit left out in turn
    (closed form: e_i / (1 - h_ii)); gain = 1 - SSE(l, g) / SSE(l), the share of the loss
    curve's prediction error that geometry removes. Its 95% interval: percentile bootstrap
    over units of the pairs of leave-one-out errors.

The clock (``clock_of``): the same test with g replaced by a step chosen on the other units
(for each unit, the median of the event steps of the other units of its size). A clock knows
the schedule and the size, nothing of the run, so geometry must beat it to count.

Lags (``lag_test``). Per unit lambda = log10(t_tr + 1) - log10(t_acq + 1) (decades), its mean
over units with a percentile bootstrap interval over units (seeds are already nested in the
unit's median): the 90% interval [lo, hi] is the two one-sided 95% bounds.

* simultaneous (equivalence, two one-sided tests): -delta < lo and hi < delta;
* lags: lo > 0; precedes: hi < -delta;
* the reading of the interval, whatever the claim: "precedes", "simultaneous", "lags" or
  "undecided".

The bootstrap p of each one-sided bound is the share of resampled means on the wrong side of
it (TOST p = the larger of the two).

Label permutation (``label_permutation``): a difference between two classes of units (hard
minus easy) against class labels permuted across units within strata, one-sided,
p = (1 + #{d* >= d}) / (1 + R).
"""
from __future__ import annotations

import numpy as np
from scipy import stats

from .stats import strata_permutations


def _ranks(x: np.ndarray) -> np.ndarray:
    return stats.rankdata(x).astype(float)


def _resid_maker(X: np.ndarray) -> np.ndarray:
    """M = I - X (X'X)^+ X': residuals of a least-squares fit on the columns of X."""
    return np.eye(len(X)) - X @ np.linalg.pinv(X)


def _corr(a: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Correlation of vector a with each row of B (both mean-zero residuals of a fit with an
    intercept); NaN for a zero row."""
    na = np.sqrt(a @ a)
    nb = np.sqrt(np.einsum("ij,ij->i", B, B))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (B @ a) / (na * nb)


def partial_rank(y, g, l, strata=None, n_perm: int = 2000, seed: int = 0) -> dict:
    """Partial rank correlation of y with g given l and its Freedman-Lane p (module doc)."""
    y, g, l = (np.asarray(v, dtype=float) for v in (y, g, l))
    strata = np.zeros(len(y)) if strata is None else np.asarray(strata)
    n = len(y)
    out = {"r": None, "p": None, "n": n, "n_permutations": n_perm}
    if n < 4:
        return {**out, "reason": f"{n} units < 4"}
    ry, rg, rl = _ranks(y), _ranks(g), _ranks(l)
    M = _resid_maker(np.column_stack([np.ones(n), rl]))
    ey, eg = M @ ry, M @ rg
    if np.sqrt(ey @ ey) < 1e-9 or np.sqrt(eg @ eg) < 1e-9:
        return {**out, "reason": "no variation left after the loss curve (a constant or l-determined side)"}
    r = float(_corr(ey, eg[None, :])[0])
    perm = eg[strata_permutations(strata, n_perm, np.random.default_rng(seed))]    # (R, n) permuted residuals
    r_null = _corr(ey, perm @ M.T)        # g* = fit + P e_g; its residual on l is M P e_g
    r_null = np.nan_to_num(r_null, nan=-np.inf)
    p = float((1 + np.sum(r_null >= r - 1e-12)) / (1 + n_perm))
    return {**out, "r": r, "p": p, "reason": None}


def _loo_errors(y: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Leave-one-out residuals of a least-squares fit of y on X (closed form)."""
    H = X @ np.linalg.pinv(X)
    e = y - H @ y
    h = np.clip(np.diag(H), None, 1 - 1e-9)
    return e / (1 - h)


def loo_gain(y, g, l, n_boot: int = 2000, seed: int = 0) -> dict:
    """Leave-one-unit-out squared errors of y from l and from (l, g) and the gain (module doc)."""
    y, g, l = (np.asarray(v, dtype=float) for v in (y, g, l))
    n = len(y)
    out = {"gain": None, "gain_ci95": (None, None), "mse_loss": None, "mse_loss_geometry": None, "n": n}
    if n < 4:
        return out
    one = np.ones(n)
    e_l = _loo_errors(y, np.column_stack([one, l])) ** 2
    e_lg = _loo_errors(y, np.column_stack([one, l, g])) ** 2
    if e_l.sum() <= 0:
        return out
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, n, size=(n_boot, n))
    sl, slg = e_l[pick].sum(axis=1), e_lg[pick].sum(axis=1)
    ok = sl > 0
    gains = 1 - slg[ok] / sl[ok]
    lo, hi = np.quantile(gains, [0.025, 0.975]) if len(gains) else (None, None)
    return {**out, "gain": float(1 - e_lg.sum() / e_l.sum()), "gain_ci95": (float(lo), float(hi)),
            "mse_loss": float(e_l.mean()), "mse_loss_geometry": float(e_lg.mean())}


def clock_of(t, strata) -> np.ndarray:
    """For each unit, the median of ``t`` over the other units of its stratum (NaN alone, NaN
    values skipped); ``t`` (n,) or (R, n), one clock per row."""
    t, strata = np.asarray(t, dtype=float), np.asarray(strata)
    one = t.ndim == 1
    t = np.atleast_2d(t)
    out = np.full(t.shape, np.nan)
    idx = np.arange(t.shape[1])
    for i in idx:
        other = (strata == strata[i]) & (idx != i)
        if other.any():
            out[:, i] = _row_nanmedian(t[:, other])
    return out[0] if one else out


def _row_nanmedian(X: np.ndarray) -> np.ndarray:
    """np.nanmedian(X, axis=1) without its masked-array path (NaN sort last): the mean of the
    middle one or two finite values of each row, NaN for a row without one."""
    S = np.sort(X, axis=1)
    k = np.isfinite(X).sum(axis=1)
    lo = np.take_along_axis(S, np.clip((k - 1) // 2, 0, None)[:, None], axis=1)[:, 0]
    hi = np.take_along_axis(S, np.clip(k // 2, 0, X.shape[1] - 1)[:, None], axis=1)[:, 0]
    return np.where(k > 0, (lo + hi) / 2, np.nan)


def beyond_loss(t_acq, t_tr, t_ref, strata, n_perm: int = 2000, n_boot: int = 2000, seed: int = 0) -> dict:
    """Both tests of the module doc on units with all three steps; and the same against the clock."""
    t_acq, t_tr, t_ref = (np.asarray(v, dtype=float) for v in (t_acq, t_tr, t_ref))
    strata = np.asarray(strata)
    ok = np.isfinite(t_acq) & np.isfinite(t_tr) & np.isfinite(t_ref)
    y, g, l = np.log(t_acq[ok]), np.log(t_tr[ok] + 1), np.log(t_ref[ok] + 1)
    s = strata[ok]
    clock = np.log(clock_of(t_tr[ok], s) + 1)
    c_ok = np.isfinite(clock)
    return {"n": int(ok.sum()), "partial": partial_rank(y, g, l, s, n_perm, seed), "loo": loo_gain(y, g, l, n_boot,
                                                                                                   seed),
            "clock_partial": partial_rank(y[c_ok], clock[c_ok], l[c_ok], s[c_ok], n_perm, seed),
            "clock_loo": loo_gain(y[c_ok], clock[c_ok], l[c_ok], n_boot, seed)}


READINGS = ("precedes", "simultaneous", "lags", "undecided")


def lag_reading(lo, hi, delta: float) -> str:
    """What a 90% interval [lo, hi] of the mean lag says (module doc)."""
    if lo is None or hi is None:
        return "undecided"
    if -delta < lo and hi < delta:
        return "simultaneous"
    if lo > 0:
        return "lags"
    if hi < -delta:
        return "precedes"
    return "undecided"


def lag_test(lam, delta: float = 0.1, n_boot: int = 2000, seed: int = 0) -> dict:
    """Mean lag over units with its 90% bootstrap interval, the one-sided bootstrap p of each
    bound and the reading (module doc)."""
    lam = np.asarray(lam, dtype=float)
    lam = lam[np.isfinite(lam)]
    n = len(lam)
    out = {"n": n, "mean": None, "ci90": (None, None), "p_simultaneous": None, "p_lags": None, "p_precedes": None,
           "reading": "undecided", "delta": delta}
    if n == 0:
        return out
    rng = np.random.default_rng(seed)
    means = lam[rng.integers(0, n, size=(n_boot, n))].mean(axis=1)
    lo, hi = (float(v) for v in np.quantile(means, [0.05, 0.95]))
    p_low, p_high = float(np.mean(means <= -delta)), float(np.mean(means >= delta))
    return {**out, "mean": float(lam.mean()), "ci90": (lo, hi), "p_simultaneous": max(p_low, p_high),
            "p_lags": float(np.mean(means <= 0)), "p_precedes": float(np.mean(means >= -delta)),
            "reading": lag_reading(lo, hi, delta)}


def label_permutation(x, labels, strata, n_perm: int = 10_000, seed: int = 0) -> dict:
    """mean(x | label) - mean(x | not label) over units, one-sided p with labels permuted
    across units within strata (module doc)."""
    x, labels, strata = np.asarray(x, dtype=float), np.asarray(labels, dtype=bool), np.asarray(strata)
    out = {"diff": None, "p": None, "n": len(x), "n_in": int(labels.sum()), "n_out": int((~labels).sum())}
    if not labels.any() or labels.all():
        return out

    def diff(lab):           # lab (..., n) bool
        a = (x * lab).sum(-1) / lab.sum(-1)
        b = (x * ~lab).sum(-1) / (~lab).sum(-1)
        return a - b
    d = float(diff(labels))
    perm = labels[strata_permutations(strata, n_perm, np.random.default_rng(seed))]
    with np.errstate(invalid="ignore", divide="ignore"):
        null = np.nan_to_num(diff(perm), nan=-np.inf)
    return {**out, "diff": d, "p": float((1 + np.sum(null >= d - 1e-12)) / (1 + n_perm))}
