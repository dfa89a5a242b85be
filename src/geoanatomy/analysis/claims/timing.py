"""The timing claims: does a measure's event say when a cell acquires beyond what the loss curve
says (the headline test, ``analysis.stats.timing``), the precursor rate on hard cells, its
specificity to hard cells, and the collapse -> recovery -> acquisition sequence.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...precursor import difficulty, is_precursor
from ..stats import timing
from ..stats.timing import preceding_loss_events
from ..rates import PAIRS
from ..stats import CELLS, clopper_pearson, strata_permutations
from ..units import EVENTS
from .base import (PRECURSOR, TIMING_NULLS, UNITS_TEXT, Claim, ClaimRow, Design, MeasureView, fmt,
                   n_runs)


LOSS_EVENTS = ("onset", "half", "extreme")      # the loss curve's events; those before acquisition are covariates
PRIMARY_EVENT = "extreme"      # the primary row: the headline RankMe variant's floor (its transition), fixed in advance
TIMING_EOI = 0.3
TIMING_EOI_REASON = ("partial r 0.3: an event that explains less than a tenth of the rank variance of acquisition"
                     " timing left by the loss curve and the design (r^2 < 0.09) is of no use as a warning")
# no smallest effect of interest (so no "not reproduced" word) where none is reachable under the claim's own
# alternative on the grid's design: a bound could then refute the alternative itself (tests/test_claims_reach.py)
WITHIN_EOI_REASON = ("none: the within-cell correlation is on its own scale, smaller than the between-cell partial r"
                     " for the same precursor (0.20 against 0.38 for one per-run precursor law on the study's design),"
                     " so 0.3 refuted a real precursor in 12-14% of populations simulated under the claim's own"
                     " alternative; without a size derived on that scale the row reads reproduced or inconclusive")
SPECIFIC_EOI_REASON = ("none: under the claim's own alternative (a precursor in hard cells only) the statistic averages"
                       " about 0.07 on the study's design, because the comparison clock already passes almost every"
                       " hard cell; the former 0.2 read 'not reproduced' in 0.625 of those populations. The row reads"
                       " reproduced or inconclusive")


def design_covariates(u: pd.DataFrame, strata: str = "size") -> tuple[np.ndarray, list[str]]:
    """The covariates of a timing row, per unit: the loss curve's events that precede
    acquisition (``preceding_loss_events``; log step + 1; an event the curve never made: +inf,
    ranked last) and what was known before training: the class-file class and the calibration
    run's acquisition step (when every unit's class comes from a class file; a class read off
    the outcome is no covariate) and the stratum (size)."""
    cols, names = [], []
    used, _ = preceding_loss_events({ev: u[f"t_loss_{ev}"].to_numpy(float) for ev in LOSS_EVENTS},
                                    u["t_acq"].to_numpy(float))
    for ev in used:
        t = u[f"t_loss_{ev}"].to_numpy(float)
        cols.append(np.where(np.isfinite(t), np.log(t + 1), np.inf))
        names.append(f"loss {ev}")
    if len(u) and bool(u["difficulty_fixed"].all()):
        cols.append((u["difficulty"] == "hard").to_numpy(float))
        names.append("class")
        cal = u["calibration_step"].to_numpy(float)
        if np.isfinite(cal).any() or np.isinf(cal).any():
            cols.append(np.where(np.isnan(cal), np.inf, np.log(cal + 1)))
            names.append("calibration step")
    if u[strata].nunique() > 1:
        cols.append(pd.factorize(u[strata])[0].astype(float))
        names.append(strata)
    return (np.column_stack(cols) if cols else np.zeros((len(u), 0))), names


def left_out_text(u: pd.DataFrame) -> str:
    """'; loss extreme left out (...)' for the detail of a timing row: the loss events that
    are no covariate because they follow acquisition in most units ('' when none is)."""
    _, left = preceding_loss_events({ev: u[f"t_loss_{ev}"].to_numpy(float) for ev in LOSS_EVENTS},
                                    u["t_acq"].to_numpy(float))
    return (f"; loss {', '.join(left)} left out (at or after acquisition in most {len(u)} units: a covariate"
            " must precede the outcome)") if left else ""


def _family(m: MeasureView, ev: str) -> str:
    return ("timing beyond the loss curve (primary)" if m.headline and ev == PRIMARY_EVENT
            else "timing beyond the loss curve (secondary)")


def timing_beyond_loss(m: MeasureView) -> list[ClaimRow]:
    """Per event kind: partial rank correlation of log t_acq with the measure's event given the
    loss curve's events and the design (``design_covariates``), its Fisher-z bounds, and the
    leave-one-cell-out gain (analysis.stats.timing)."""
    out = []
    a = m.acq
    for ev in EVENTS:
        u = a[np.isfinite(a[f"t_{ev}"].astype(float))].reset_index(drop=True)
        if not len(u):
            continue
        cov, names = design_covariates(u, m.strata)
        classes = u["difficulty"].to_numpy() if "class" in names else None
        r = timing.beyond_loss(u["t_acq"], u[f"t_{ev}"], cov, u[m.strata].to_numpy(), classes,
                               min(m.n_perm, 10_000), m.nb, m.seed, m.level)
        pr, lo, cp = r.partial, r.loo, r.clock_partial
        detail = (m.mean_direction(u) + f"partial r {fmt(pr.statistic)} (p {fmt(pr.p, 3)}; one-sided {m.bound_pct}"
                  f" bounds {fmt(pr.ci[0])}, {fmt(pr.ci[1])}) given {', '.join(names)}; leave-one-out gain"
                  f" {fmt(lo.statistic)} [{fmt(lo.ci[0])}, {fmt(lo.ci[1])}] (MSE of log t_acq:"
                  f" covariates alone {fmt(lo.mse_loss, 3)}, with geometry {fmt(lo.mse_loss_geometry, 3)});"
                  f" the clock (median {ev} step of the other cells of the size"
                  + (" and class" if classes is not None else "") + f"): partial r {fmt(cp.statistic)}"
                  f" (p {fmt(cp.p, 3)})" + (f"; {pr.reason}" if pr.reason else ""))
        out.append(ClaimRow("timing beyond the loss curve", m.measure, m.variant,
                            f"partial Spearman of log t_acq with the measure's {ev} given the loss curve's events"
                            " before acquisition and the design", pr.statistic, pr.ci, r.n, n_runs(u),
                            f"Freedman-Lane: residuals of the {ev} on the covariates permuted within {m.strata}s"
                            f" ({pr.n_permutations} permutations)", 0.0, pr.p, _family(m, ev),
                            detail, m.protocol, "greater+gain", ev, m.level,
                            second=("leave-one-cell-out gain 1 - SSE(covariates, geometry) / SSE(covariates)",
                                    lo.statistic, *lo.ci), headline=m.headline, bound=pr.ci[1]))
    return out


def timing_within_cells(m: MeasureView) -> list[ClaimRow]:
    """Per event kind, across the seeds of each cell: does the seed whose event comes later
    acquire later, given its own loss events (analysis.stats.timing.within_units)."""
    if m.runs is None or m.protocol != "single-task":
        return []
    d = m.runs[(m.runs["control"] == "") & ~m.runs["diverged"].astype(bool) & m.runs["acquired"].astype(bool)
               & (m.runs["transitioned"].fillna(False).astype(bool))]
    out = []
    for ev, col, _ in PAIRS:
        x = d.assign(_t=pd.to_numeric(d[col], errors="coerce"), _a=pd.to_numeric(d["acquisition_step"],
                                                                                 errors="coerce"))
        steps = {e: pd.to_numeric(x[f"loss_{e}_step"], errors="coerce").to_numpy(float) for e in LOSS_EVENTS}
        used, _ = preceding_loss_events(steps, x["_a"].to_numpy(float))      # those before acquisition
        L = np.column_stack([np.log(steps[e] + 1) for e in used]) if used else np.zeros((len(x), 0))
        ok = np.isfinite(x["_t"].to_numpy(float)) & np.isfinite(x["_a"].to_numpy(float)) & np.isfinite(L).all(axis=1)
        x, L = x[ok], L[ok]
        if not len(x):
            continue
        cells = x[list(CELLS)].astype(str).agg("|".join, axis=1).to_numpy()
        r = timing.within_units(np.log(x["_a"].to_numpy(float)), np.log(x["_t"].to_numpy(float) + 1), L, cells,
                                min(m.n_perm, 10_000), m.seed, (1.0 + m.level) / 2)
        out.append(ClaimRow("timing across seeds within cells", m.measure, m.variant,
                            f"correlation over cells' seeds of log t_acq with log t_{ev}, cell means and the run's"
                            " loss events removed", r.statistic, r.ci, r.n, r.n_runs,
                            f"contrasts' residuals of the {ev} sign-flipped within cells ({r.n_permutations})", 0.0,
                            r.p, "timing beyond the loss curve (secondary)",
                            m.mean_direction(m.acq) + f"r {fmt(r.statistic)} (p {fmt(r.p, 3)}; one-sided"
                            f" {m.bound_pct} bounds {fmt(r.ci[0])}, {fmt(r.ci[1])}) over {r.n} cells with two seeds"
                            " or more"
                            + (f"; {r.reason}" if r.reason else ""),
                            m.protocol, "greater", ev, m.level, headline=m.headline, bound=r.ci[1]))
    return out


def _cell_precursor(u: pd.DataFrame, frac: float, col: str = "t_transition") -> np.ndarray:
    return np.asarray(is_precursor(u[col].to_numpy(float), u["t_acq"].to_numpy(float), frac), dtype=float)


def _step_permutation(m: MeasureView, u: pd.DataFrame, t_event: np.ndarray, hard: np.ndarray, frac) -> dict:
    """The rate over hard units of is_precursor(t_event, t_acq) and its permutation null:
    acquisition steps permuted across the acquired units within strata, the classes staying
    with their units when they come from a class file, else re-drawn on the permuted steps."""
    t_acq = u["t_acq"].to_numpy(float)
    emax = u["easy_max_step"].to_numpy(float)
    fixed = bool(u["difficulty_fixed"].all())
    rng = np.random.default_rng(m.seed)
    idx = strata_permutations(u[m.strata].to_numpy(), m.n_perm, rng)
    a = t_acq[idx]                                             # (R, n)
    in_class = np.broadcast_to(hard, a.shape) if fixed else difficulty(a, emax) == "hard"
    pre = is_precursor(np.broadcast_to(t_event, a.shape), a, frac) & in_class
    k_null = pre.sum(axis=1)
    k = int((is_precursor(t_event, t_acq, frac) & hard).sum())
    n = int(hard.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        rate_null = np.where(in_class.sum(axis=1) > 0, k_null / in_class.sum(axis=1), np.nan)
    return {"k": k, "n": n, "p": float((1 + np.sum(k_null >= k)) / (1 + m.n_perm)),
            "null_rate": float(np.nanmean(rate_null)) if np.isfinite(rate_null).any() else None}


def precursor_rate_descriptive(m: MeasureView) -> list[ClaimRow]:
    """The old precursor rate over hard cells with its permutation null and the best clock."""
    a = m.acq
    hard = (a["difficulty"] == "hard").to_numpy()
    if not hard.any():
        return []
    frac = m.frac
    t = a["t_transition"].to_numpy(float)
    res = _step_permutation(m, a, t, hard, frac)
    cands = np.unique(t[np.isfinite(t)])
    t_h = a.loc[hard, "t_acq"].to_numpy(float)
    clock = max((float(is_precursor(np.full(len(t_h), c), t_h, frac).mean()), c) for c in cands) if len(cands) else None
    return [ClaimRow("precursor rate on hard cells (descriptive)", m.measure, m.variant,
                     "share of hard cells whose transition passes t_tr <= (1 - f) t_acq",
                     res["k"] / res["n"], clopper_pearson(res["k"], res["n"], m.level), res["n"], n_runs(a[hard]),
                     f"acquisition steps permuted across {m.unit_word} within {m.strata}s", res["null_rate"], res["p"],
                     "",
                     m.mean_direction(a[hard]) + f"{res['k']}/{res['n']} hard cells; best fixed clock: rate "
                     + (f"{clock[0]:.2f} at step {clock[1]:.0f}" if clock else "NA")
                     + "; descriptive: a late-acquired cell passes the rule with any early event",
                     m.protocol, rule="descriptive", event="transition", ci_level=m.level, headline=m.headline)]


def precursor_specific_to_hard_cells(m: MeasureView) -> list[ClaimRow]:
    """rate(hard cells) - rate(easy cells) beyond what a clock gives.

    Any event that does not follow acquisition passes the precursor rule more often in hard
    cells, because they are acquired later: a fixed clock at step 40 gives a large difference,
    and so does the class-label permutation test of that difference (its p is in the detail;
    verdict_power.csv measures its false rate). The row's statistic is the measure's difference
    minus the clock's (each cell's clock: the median transition step of the other cells of its
    size, by the same rule), and its null permutes the measure's transition steps across cells
    within a size (the clock is recomputed from the permuted steps): an event timed by the
    schedule, or unrelated to its own cell, gives no excess."""
    a = m.acq[m.acq["difficulty"].isin(["easy", "hard"])].reset_index(drop=True)
    hard = (a["difficulty"] == "hard").to_numpy()
    if not (hard.any() and (~hard).any()):
        return []
    frac = m.frac
    t_acq = a["t_acq"].to_numpy(float)
    strata = a[m.strata].to_numpy()
    t = a["t_transition"].to_numpy(float)

    def excess(tt):                    # tt (R, n) or (n,): transition steps
        tt = np.atleast_2d(tt)
        clock = timing.clock_of(tt, strata)
        d = []
        for x in (tt, clock):
            pre = is_precursor(x, t_acq[None, :], frac).astype(float)
            d.append(pre[:, hard].mean(axis=1) - pre[:, ~hard].mean(axis=1))
        return d[0] - d[1], d[0], d[1]
    obs, d_obs, d_clock = (float(x[0]) for x in excess(t))
    rng = np.random.default_rng(m.seed)
    n_perm = min(m.n_perm, 2000)
    perm = t[strata_permutations(strata, n_perm, rng)]
    null = excess(perm)[0]
    p = float((1 + np.sum(null >= obs - 1e-12)) / (1 + n_perm))
    pre = _cell_precursor(a, frac)
    lab = timing.label_permutation(pre, hard, strata, m.n_perm, m.seed)
    # interval: cells resampled within each class, each with its own pass/fail and its clock's
    pc = is_precursor(timing.clock_of(t, strata), t_acq, frac).astype(float)
    diff = pre - pc
    dh, de = diff[hard], diff[~hard]
    boots = (dh[rng.integers(0, len(dh), (m.nb, len(dh)))].mean(axis=1)
             - de[rng.integers(0, len(de), (m.nb, len(de)))].mean(axis=1))
    tail = (1 - m.level) / 2
    ci = tuple(float(x) for x in np.nanquantile(boots, [tail, 1 - tail]))
    upper = float(np.nanquantile(boots, 1 - tail))         # the interval's upper end: one-sided 1 - alpha
    return [ClaimRow("precursor specific to hard cells", m.measure, m.variant,
                     "[rate(hard) - rate(easy)] of the measure minus that of the clock (cells)", obs, ci, len(a),
                     n_runs(a), f"transition steps permuted across {m.unit_word} within {m.strata}s "
                     f"({n_perm} permutations)", 0.0, p, "precursor specific to hard cells",
                     m.mean_direction(a) + f"measure: hard {pre[hard].mean():.2f} ({int(hard.sum())} {m.unit_word}),"
                     f" easy {pre[~hard].mean():.2f} ({int((~hard).sum())}), difference {d_obs:.2f}; clock difference"
                     f" {d_clock:.2f}; class-label permutation p of the measure's difference {fmt(lab.p, 3)}"
                     " (not the test: a clock passes it too)", m.protocol, event="transition", headline=m.headline,
                     ci_level=m.level, bound=upper)]


def collapse_recovery_acquisition(m: MeasureView) -> list[ClaimRow]:
    """Recovery before acquisition as a timing claim: the partial rank correlation of log t_acq
    with the recovery step given the loss curve's events and the design (as the timing claim),
    over acquired cells with a recovery; the share of hard cells recovered before acquisition
    is descriptive, in the detail (any early recovery passes it)."""
    a = m.acq
    if not (m.measure.startswith("rankme") and "t_recovery" in a):
        return []
    u = a[np.isfinite(a["t_recovery"].astype(float))].reset_index(drop=True)
    if not len(u):
        return []
    cov, names = design_covariates(u, m.strata)
    classes = u["difficulty"].to_numpy() if "class" in names else None
    r = timing.beyond_loss(u["t_acq"], u["t_recovery"], cov, u[m.strata].to_numpy(), classes,
                           min(m.n_perm, 10_000), m.nb, m.seed, m.level)
    pr, cp, lo = r.partial, r.clock_partial, r.loo
    hard = (a["difficulty"] == "hard").to_numpy()
    t_rec, t_acq = a["t_recovery"].to_numpy(float), a["t_acq"].to_numpy(float)
    k, n = int((hard & (t_rec < t_acq)).sum()), int(hard.sum())
    return [ClaimRow("collapse -> recovery -> acquisition", m.measure, m.variant,
                     "partial Spearman of log t_acq with the recovery step given the loss curve's events before"
                     " acquisition and the design", pr.statistic, pr.ci, r.n, n_runs(u),
                     f"Freedman-Lane: residuals of the recovery on the covariates permuted within {m.strata}s"
                     f" ({pr.n_permutations} permutations)", 0.0, pr.p, "sequence",
                     m.mean_direction(u) + f"partial r {fmt(pr.statistic)} (one-sided {m.bound_pct} bounds"
                     f" {fmt(pr.ci[0])}, {fmt(pr.ci[1])}) given {', '.join(names)}; the clock: partial r"
                     f" {fmt(cp.statistic)};"
                     f" descriptive: {k}/{n} hard cells recovered before acquisition"
                     + (f"; {pr.reason}" if pr.reason else ""),
                     m.protocol, "greater+gain", "recovery", m.level,
                     second=("leave-one-cell-out gain 1 - SSE(covariates, recovery) / SSE(covariates)", lo.statistic,
                             *lo.ci), headline=m.headline, bound=pr.ci[1])]


# the timing claims' simulation: the design nulls, a precursor, the centred RankMe's rows, both event kinds
TIMING_DESIGN = Design("simulated", TIMING_NULLS, PRECURSOR, "rankme_centred", ("onset", "extreme"))

CLAIMS = [
    Claim("timing beyond the loss curve", "per measure and event kind (onset, extreme); the headline test",
          "geometry changes before behaviour in a way the loss curve does not already show (on hard runs geometry"
          " changes first and behaviour follows after a clear gap)",
          "per cell y = log t_acq, g = log(t_event + 1); partial Spearman of y with g given the loss curve's events"
          " that precede acquisition in most cells (of onset, half-rise, extreme; a covariate must come before the"
          " outcome: the extreme follows acquisition in every study cell) and the design (class-file class,"
          " calibration acquisition step, size): one-sided Freedman-Lane permutation p, Fisher-z bounds"
          " (Spearman variance, n less the covariates); and the leave-one-cell-out"
          " gain of predicting y from (covariates, g) over the covariates alone (bootstrap interval over cells);"
          " both must say yes. One primary row (the headline RankMe variant's extreme, its floor), fixed in"
          " advance; the other rows are a secondary family read only when the primary is reproduced (gatekeeping)."
          " The same test for a clock that knows the size and the class is in the detail",
          "g depends on the covariates only (its residuals on them exchangeable within a size)", UNITS_TEXT,
          "measure", timing_beyond_loss,
          design=TIMING_DESIGN, figure="timing", effect_of_interest=TIMING_EOI, effect_reason=TIMING_EOI_REASON),
    Claim("timing across seeds within cells", "per measure and event kind (onset, extreme)",
          "geometry changes before behaviour in a way the loss curve does not already show, seed by seed",
          "within each cell (its seeds), log t_acq and log(t_event + 1) with the cell's mean removed (cell fixed"
          " effects: class, size, task and schedule removed) and residualised on the run's loss events that precede"
          " acquisition in most runs; their"
          " correlation, one-sided p by sign flips of the within-cell contrasts (exact with two seeds),"
          " Fisher-z bounds. Secondary family (read after the primary timing row)",
          "the event's within-cell deviations unrelated to acquisition's beyond the loss events",
          "per-run table (rates.measure_rows): each run's events and loss events", "measure", timing_within_cells,
          design=TIMING_DESIGN, figure="timing", effect_of_interest=None, effect_reason=WITHIN_EOI_REASON),
    Claim("precursor rate on hard cells (descriptive)", "per measure and variant",
          "in hard runs the transition precedes acquisition by the precursor rule",
          "share of hard cells passing t_tr <= (1 - f) t_acq (Clopper-Pearson); permutation p and the best fixed"
          " clock beside it. Descriptive: a hard cell is acquired late, so any early event passes; no word, no"
          " Holm family, not in the totals",
          "acquisition steps permuted across cells within a size (class-file classes stay with their cells)",
          UNITS_TEXT, "measure", precursor_rate_descriptive, figure="timing"),
    Claim("precursor specific to hard cells", "per measure and variant",
          "the precursor rate of hard runs exceeds that of easy runs",
          "rate(hard cells) - rate(easy cells) minus the same difference of a clock (each cell: the median"
          " transition step of the other cells of its size), bootstrap within classes; the class-label permutation"
          " p in the detail (a clock passes that one too)", "transition steps permuted across cells within a size",
          UNITS_TEXT, "measure", precursor_specific_to_hard_cells,
          design=Design("simulated", TIMING_NULLS + PRECURSOR, ("hard-only",), "rankme_centred",
                        ("transition",)), figure="timing", effect_of_interest=None,
          effect_reason=SPECIFIC_EOI_REASON),
    Claim("collapse -> recovery -> acquisition", "per RankMe variant",
          "in hard runs the measure collapses, recovers, and acquisition follows",
          "per cell with a recovery, partial Spearman of log t_acq with log(t_recovery + 1) given the loss curve's"
          " events and the design, as the timing claim (Freedman-Lane p, Fisher-z bound, and the leave-one-out gain);"
          " the share of hard cells"
          " recovered before acquisition is descriptive (in the detail: any early recovery passes it)",
          "the recovery depends on the covariates only", UNITS_TEXT, "measure", collapse_recovery_acquisition,
          design=Design("simulated", TIMING_NULLS, PRECURSOR, "rankme_centred", ("recovery",)),
          figure="timing", effect_of_interest=TIMING_EOI, effect_reason=TIMING_EOI_REASON),
]
