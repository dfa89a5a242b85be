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

The covariates are more than one loss event: every event of the loss curve together (onset,
half-rise, extreme, in log steps) and what was known before training (the class of the class
file, the calibration run's acquisition step, the size): a geometric event that copies a loss
event, or a clock that knows the class, has nothing left to say (``partial_rank`` takes a
matrix of covariates, each entered by its ranks; +inf, an event that never happened, ranks
last). The partial correlation's one-sided 95% bounds are Fisher z's with the Spearman variance
1.06 / (n - k - 3), k covariates (a percentile bootstrap of a rank partial correlation with a
handful of residual degrees of freedom piles its resamples at +-1).

The partial correlation alone is anti-conservative against a noisy copy of a covariate when
acquisition depends on several covariates (ranks of y are not linear in the covariates'
ranks, and a noisy copy carries what their linear fit leaves); the row's whole rule (its p, its
bootstrap lower bound above 0 and the leave-one-out gain above 0) is what holds the size
(tests/test_verdict.py measures both; docs/analysis.md gives the figures).

The clock (``clock_of``, ``class_clock``): the same test with g replaced by a step chosen on
the other units (for each unit, the median of the event steps of the other units of its size
and class). A clock knows the schedule, the size and the class, nothing of the run.

Across seeds (``within_units``): within each unit, the seed whose event comes later should
acquire later, given its own loss events: y and g centred within units (unit fixed effects
remove every unit-level confound), residualised on the run's loss events, correlated; p by
Freedman-Lane with residuals permuted within units.

Lags (``lag_test``). Per unit lambda = log10(t_tr + 1) - log10(t_acq + 1) (decades), its mean
over units (seeds are already nested in the unit's median) with a Student t interval over
units widened at both ends by the quantisation term q, half the mean over units of the
half-width h within which the checkpoint grids place the lag (a position uniform within +-h is
off by h/2 on average): mean +- (t_{0.95, n-1} sd / sqrt(n) + q). The
90% interval [lo, hi] is the two one-sided 95% bounds; its coverage on the real checkpoint
grids is checked by simulation (tests/test_verdict_design.py; the figures are in
docs/analysis.md). delta is never finer than the grid resolves: the larger of delta and the
median h.

* simultaneous (equivalence, two one-sided tests): -delta < lo and hi < delta;
* lags: lo > 0; precedes: hi < -delta;
* the reading of the interval, whatever the claim: "precedes", "simultaneous", "lags" or
  "undecided".

The p of each one-sided test is Student's, with q counted against the claim (TOST p = the
larger of the two).

Label permutation (``label_permutation``): a difference between two classes of units (hard
minus easy) against class labels permuted across units within strata, one-sided,
p = (1 + #{d* >= d}) / (1 + R).
"""
from __future__ import annotations

import numpy as np
from scipy import stats

from .exact import TOL
from .resample import strata_permutations
from .results import BeyondLoss, Difference, Gain, Lag, Partial


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


def _covariates(L, n: int) -> np.ndarray:
    """(1, ranks of each non-constant column of L): L (n,) or (n, k), +inf allowed (an event
    that did not happen within the budget ranks last)."""
    L = np.asarray(L if L is not None else np.zeros((n, 0)), dtype=float)
    L = L.reshape(n, -1) if L.size else np.zeros((n, 0))
    cols = [np.ones(n)] + [_ranks(c) for c in L.T if np.ptp(_ranks(c)) > 0]
    return np.column_stack(cols)


def partial_rank(y, g, L, strata=None, n_perm: int = 2000, seed: int = 0, level: float = 0.95) -> Partial:
    """Partial rank correlation of y with g given the covariates L ((n,) or (n, k)), its
    Freedman-Lane p (module doc) and its one-sided ``level`` bounds (``lower``, ``upper``; Fisher
    z, ``fisher_bounds``)."""
    y, g = (np.asarray(v, dtype=float) for v in (y, g))
    strata = np.zeros(len(y)) if strata is None else np.asarray(strata)
    n = len(y)
    X = _covariates(L, n)
    null = f"Freedman-Lane: residuals of g on the covariates permuted within strata ({n_perm}, seed {seed})"
    k = X.shape[1] - 1
    if n < X.shape[1] + 3:
        return Partial(None, None, null, n, reason=f"{n} units < {X.shape[1] + 3} (the covariates and 3)",
                       n_permutations=n_perm, covariates=k)
    ry, rg = _ranks(y), _ranks(g)
    M = _resid_maker(X)
    ey, eg = M @ ry, M @ rg
    if np.sqrt(ey @ ey) < 1e-9 or np.sqrt(eg @ eg) < 1e-9:
        return Partial(None, None, null, n, n_permutations=n_perm, covariates=k,
                       reason="no variation left after the covariates (a constant or covariate-determined side)")
    r = float(_corr(ey, eg[None, :])[0])
    perm = eg[strata_permutations(strata, n_perm, np.random.default_rng(seed))]    # (R, n) permuted residuals
    r_null = _corr(ey, perm @ M.T)        # g* = fit + P e_g; its residual on L is M P e_g
    r_null = np.nan_to_num(r_null, nan=-np.inf)
    p = float((1 + np.sum(r_null >= r - TOL)) / (1 + n_perm))
    return Partial(r, p, null, n, ci=fisher_bounds(r, n - k, 1.06, level), n_permutations=n_perm, covariates=k)


def fisher_bounds(r: float, n_eff: int, var: float = 1.0, level: float = 0.95) -> tuple:
    """One-sided ``level`` bounds of a correlation by Fisher's z: z = atanh(r), standard error
    sqrt(var / (n_eff - 3)) (var 1 for Pearson, 1.06 for Spearman, Fieller, Hartley and Pearson
    1957; n_eff the units less the covariates partialled out); (None, None) below 4."""
    if r is None or n_eff < 4:
        return (None, None)
    z = np.arctanh(np.clip(r, -0.999999, 0.999999))
    k = float(stats.norm.ppf(level)) * np.sqrt(var / (n_eff - 3))
    return (float(np.tanh(z - k)), float(np.tanh(z + k)))


def _contrasts(units: np.ndarray):
    """(rows, the unit of each row, Q): Q (m, n) stacks, for every unit with k >= 2 runs, k - 1
    orthonormal contrasts of its runs (Helmert rows, orthogonal to the unit's mean): Q @ x is
    x with every unit's mean removed, in m = n - (units) coordinates."""
    units = np.asarray(units)
    rows, who = [], []
    for u in dict.fromkeys(units.tolist()):
        ix = np.flatnonzero(units == u)
        k = len(ix)
        for j in range(1, k):
            q = np.zeros(len(units))
            q[ix[:j]] = 1.0 / j
            q[ix[j]] = -1.0
            rows.append(q / np.linalg.norm(q))
            who.append(u)
    return (np.array(rows) if rows else np.zeros((0, len(units)))), np.array(who, dtype=object)


def within_units(y, g, L, units, n_perm: int = 2000, seed: int = 0, level: float = 0.95) -> Partial:
    """Across the seeds of each unit (module doc): the correlation of y with g after the unit's
    own mean (every unit-level confound removed) and the run's covariates L, on within-unit
    contrasts; p by sign flips of the contrasts' residuals of g (exact with two seeds a unit);
    one-sided ``level`` bounds by Fisher z on the contrasts less the covariates. Values, not
    ranks: a flip needs a unit's contrast to be symmetric under the null."""
    y, g = (np.asarray(v, dtype=float) for v in (y, g))
    n = len(y)
    L = np.asarray(L if L is not None else np.zeros((n, 0)), dtype=float)
    L = L.reshape(n, -1) if L.size else np.zeros((n, 0))
    Q, who = _contrasts(units)
    Y, G, C = Q @ y, Q @ g, Q @ L
    C = C[:, np.abs(C).sum(axis=0) > 1e-12] if C.size else C
    m = len(Y)
    n_units = len(set(who.tolist()))
    n_runs = int(np.isin(np.asarray(units), who).sum())
    null = f"contrasts' residuals of g sign-flipped within units ({n_perm}, seed {seed})"
    if n_units < 4 or m < C.shape[1] + 3:
        return Partial(None, None, null, n_units, n_permutations=n_perm, n_runs=n_runs, covariates=C.shape[1],
                       reason=f"{n_units} units with two seeds or more (at least 4, and 3 more than the"
                              f" {C.shape[1]} covariates, needed)")
    M = np.eye(m) - (C @ np.linalg.pinv(C) if C.shape[1] else 0.0)
    ey, eg = M @ Y, M @ G
    if np.sqrt(ey @ ey) < 1e-9 or np.sqrt(eg @ eg) < 1e-9:
        return Partial(None, None, null, n_units, n_permutations=n_perm, n_runs=n_runs, covariates=C.shape[1],
                       reason="no variation across seeds left after the covariates")
    cos = lambda a, B: (B @ a) / (np.sqrt(a @ a) * np.sqrt(np.einsum("ij,ij->i", B, B)) + 1e-300)
    r = float(cos(ey, eg[None, :])[0])
    rng = np.random.default_rng(seed)
    flips = rng.choice([-1.0, 1.0], size=(n_perm, m))
    r_null = cos(ey, (flips * eg) @ M.T)
    return Partial(r, float((1 + np.sum(r_null >= r - TOL)) / (1 + n_perm)), null, n_units,
                   ci=fisher_bounds(r, m - C.shape[1], 1.0, level), n_permutations=n_perm, n_runs=n_runs,
                   covariates=C.shape[1])


def _loo_errors(y: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Leave-one-out residuals of a least-squares fit of y on X (closed form)."""
    H = X @ np.linalg.pinv(X)
    e = y - H @ y
    h = np.clip(np.diag(H), None, 1 - 1e-9)
    return e / (1 - h)


def loo_gain(y, g, l, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> Gain:
    """Leave-one-unit-out squared errors of y from l and from (l, g) and the gain (module doc),
    its percentile bootstrap interval at two-sided ``level``."""
    y, g, l = (np.asarray(v, dtype=float) for v in (y, g, l))
    n = len(y)
    l = l.reshape(n, -1) if l.size else np.zeros((n, 0))
    null = f"leave-one-unit-out least squares; percentile bootstrap over units ({n_boot}, seed {seed})"
    if n < l.shape[1] + 4:
        return Gain(None, None, null, n, reason=f"{n} units < {l.shape[1] + 4}")
    one = np.ones(n)
    e_l = _loo_errors(y, np.column_stack([one, l])) ** 2
    e_lg = _loo_errors(y, np.column_stack([one, l, g])) ** 2
    if e_l.sum() <= 0:
        return Gain(None, None, null, n, reason="the covariates predict every unit exactly")
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, n, size=(n_boot, n))
    sl, slg = e_l[pick].sum(axis=1), e_lg[pick].sum(axis=1)
    ok = sl > 0
    gains = 1 - slg[ok] / sl[ok]
    tail = (1 - level) / 2
    lo, hi = np.quantile(gains, [tail, 1 - tail]) if len(gains) else (None, None)
    return Gain(float(1 - e_lg.sum() / e_l.sum()), None, null, n, ci=(float(lo), float(hi)),
                mse_loss=float(e_l.mean()), mse_loss_geometry=float(e_lg.mean()))


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


def class_clock(t, strata, classes) -> np.ndarray:
    """For each unit, the median of ``t`` over the other units of its stratum and class: what a
    clock that knows the size and the class file, nothing of the run, would say."""
    key = np.array([f"{a}|{b}" for a, b in zip(np.asarray(strata), np.asarray(classes))])
    return clock_of(t, key)


PRECEDES_SHARE = 0.5     # a loss event is a covariate when it precedes acquisition in more than this share of units


def preceding_loss_events(t_loss: dict, t_acq) -> tuple[list[str], list[str]]:
    """(used, left out): the loss curve's event kinds that are covariates of a timing row, and
    those that are not. A covariate must come before the outcome: an event kind is used when it
    precedes acquisition (a strictly earlier step) in more than half of the row's units (cells,
    or runs for the within-cell claim), and left out otherwise (one the curve never made
    precedes nothing). Conditioning on an event that follows acquisition removes the very
    timing a precursor would carry: on the study's cells the loss curve's extreme follows
    acquisition in every cell, and with it the covariates explained R^2 0.935 of log t_acq.
    ``t_loss``: {kind: steps (n,)} in LOSS_EVENTS order; ``t_acq``: (n,)."""
    t_acq = np.asarray(t_acq, dtype=float)
    used, left = [], []
    for ev, t in t_loss.items():
        t = np.asarray(t, dtype=float)
        if not np.isfinite(t).any():
            continue                                    # this grid's curves have no such event
        share = float(np.mean(np.isfinite(t) & (t < t_acq))) if len(t) else 0.0
        (used if share > PRECEDES_SHARE else left).append(ev)
    return used, left


def beyond_loss(t_acq, t_tr, covariates, strata, classes=None, n_perm: int = 2000, n_boot: int = 2000,
                seed: int = 0, level: float = 0.90) -> BeyondLoss:
    """Both tests of the module doc on units with both steps, given ``covariates`` ((n, k)
    log steps and design columns; +inf: an event that did not happen); and the partial test
    for the clock (the median event step of the other units of the size, and of the class
    when ``classes`` is given); the gain's interval at two-sided ``level``, the partial
    correlation's bounds one-sided at (1 + level) / 2 (each the end of that interval)."""
    t_acq, t_tr = (np.asarray(v, dtype=float) for v in (t_acq, t_tr))
    C = np.asarray(covariates, dtype=float)
    C = C.reshape(len(t_acq), -1) if C.size else np.zeros((len(t_acq), 0))
    strata = np.asarray(strata)
    ok = np.isfinite(t_acq) & np.isfinite(t_tr) & ~np.isnan(C).any(axis=1)
    y, g, L = np.log(t_acq[ok]), np.log(t_tr[ok] + 1), C[ok]
    s = strata[ok]
    clock = np.log((clock_of(t_tr[ok], s) if classes is None else class_clock(t_tr[ok], s, np.asarray(classes)[ok]))
                   + 1)
    c_ok = np.isfinite(clock)
    Lf = np.where(np.isfinite(L), L, np.nanmax(np.where(np.isfinite(L), L, np.nan), axis=0, initial=0) + 1)
    one_sided = (1.0 + level) / 2
    return BeyondLoss(int(ok.sum()), partial_rank(y, g, L, s, n_perm, seed, one_sided),
                      loo_gain(y, g, Lf, n_boot, seed, level),
                      partial_rank(y[c_ok], clock[c_ok], L[c_ok], s[c_ok], n_perm, seed, one_sided))


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


def lag_test(lam, delta: float = 0.1, resolution=None, level: float = 0.90) -> Lag:
    """Mean lag over units with its two-sided ``level`` interval (each end a one-sided
    (1 + level) / 2 bound: 90%, the 95% bounds of alpha 0.05), the one-sided p of each bound and the
    reading (module doc). ``resolution``: per unit, the half-width h in decades within which the
    checkpoint grids place its lag (``rates`` column lag_resolution); half their mean (the mean
    rounding error of a position uniform within +-h) widens both ends of the interval, and the
    equivalence margin is never finer than their median."""
    lam = np.asarray(lam, dtype=float)
    ok = np.isfinite(lam)
    res = np.zeros(len(lam)) if resolution is None else np.asarray(resolution, dtype=float)
    lam, res = lam[ok], np.nan_to_num(res[ok], nan=0.0)
    n = len(lam)
    d_eff = max(float(delta), float(np.median(res)) if n else 0.0)
    null = "Student t over units, the quantisation term counted against each reading"
    if n == 0:
        return Lag(None, None, null, n, delta=d_eff, reason="no unit with the event")
    mean = float(lam.mean())
    q = 0.5 * float(res.mean())         # a position uniform within +-h is off by h/2 on average
    if n < 2:
        return Lag(mean, None, null, n, delta=d_eff, quantisation=q, reason="one unit: no interval")
    sd = float(lam.std(ddof=1))
    se = sd / np.sqrt(n)
    tq = float(stats.t.ppf((1.0 + level) / 2, n - 1))
    lo, hi = mean - tq * se - q, mean + tq * se + q

    def p_above(c):            # one-sided p for mean > c, the quantisation counted against it
        return float(stats.t.sf((mean - q - c) / se, n - 1)) if se > 0 else float(mean - q <= c)

    def p_below(c):
        return float(stats.t.cdf((mean + q - c) / se, n - 1)) if se > 0 else float(mean + q >= c)
    return Lag(mean, p_above(0.0), null, n, ci=(float(lo), float(hi)), sd=sd, delta=d_eff, quantisation=q,
               p_simultaneous=max(p_above(-d_eff), p_below(d_eff)), p_precedes=p_below(-d_eff),
               reading=lag_reading(lo, hi, d_eff))


def label_permutation(x, labels, strata, n_perm: int = 10_000, seed: int = 0) -> Difference:
    """mean(x | label) - mean(x | not label) over units, one-sided p with labels permuted
    across units within strata (module doc)."""
    x, labels, strata = np.asarray(x, dtype=float), np.asarray(labels, dtype=bool), np.asarray(strata)
    what = f"labels permuted across units within strata ({n_perm}, seed {seed})"
    n_in, n_out = int(labels.sum()), int((~labels).sum())
    if not labels.any() or labels.all():
        return Difference(None, None, what, len(x), n_in=n_in, n_out=n_out, reason="one class only")

    def diff(lab):           # lab (..., n) bool
        a = (x * lab).sum(-1) / lab.sum(-1)
        b = (x * ~lab).sum(-1) / (~lab).sum(-1)
        return a - b
    d = float(diff(labels))
    perm = labels[strata_permutations(strata, n_perm, np.random.default_rng(seed))]
    with np.errstate(invalid="ignore", divide="ignore"):
        null = np.nan_to_num(diff(perm), nan=-np.inf)
    return Difference(d, float((1 + np.sum(null >= d - TOL)) / (1 + n_perm)), what, len(x), n_in=n_in,
                      n_out=n_out)
