"""The timing claims: does a measure's event say when a cell acquires beyond what the loss curve
says (the headline test, ``analysis.timing``), the precursor rate on hard cells, its
specificity to hard cells, and the collapse -> recovery -> acquisition sequence.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...precursor import difficulty, is_precursor
from .. import timing
from ..stats import strata_permutations
from ..units import EVENTS
from .base import (PRECURSOR, TIMING_NULLS, UNITS_TEXT, Claim, ClaimRow, Design, MeasureView, clopper_pearson, fmt,
                   n_runs)


def timing_beyond_loss(m: MeasureView) -> list[ClaimRow]:
    """Per event kind: partial rank correlation of log t_acq with the measure's event given the
    loss curve's event of the same kind, and the leave-one-cell-out gain (analysis.timing)."""
    out = []
    a = m.acq
    for ev in EVENTS:
        u = a[np.isfinite(a[f"t_{ev}"].astype(float)) & np.isfinite(a[f"t_ref_{ev}"].astype(float))]
        if not len(u):
            continue
        r = timing.beyond_loss(u["t_acq"], u[f"t_{ev}"], u[f"t_ref_{ev}"], u[m.strata].to_numpy(),
                               min(m.n_perm, 10_000), m.nb, m.seed)
        pr, lo = r["partial"], r["loo"]
        cp, cl = r["clock_partial"], r["clock_loo"]
        detail = (m.mean_direction(u) + f"partial r {fmt(pr['r'])} (p {fmt(pr['p'], 3)}), leave-one-out gain "
                  f"{fmt(lo['gain'])} [{fmt(lo['gain_ci95'][0])}, {fmt(lo['gain_ci95'][1])}] (MSE of log t_acq: "
                  f"loss alone {fmt(lo['mse_loss'], 3)}, loss + geometry {fmt(lo['mse_loss_geometry'], 3)});"
                  f" the clock (median {ev} step of the other cells of the size): partial r {fmt(cp['r'])}"
                  f" (p {fmt(cp['p'], 3)}), gain {fmt(cl['gain'])} [{fmt(cl['gain_ci95'][0])},"
                  f" {fmt(cl['gain_ci95'][1])}]" + (f"; {pr['reason']}" if pr.get("reason") else ""))
        out.append(ClaimRow("timing beyond the loss curve", m.measure, m.variant,
                            f"partial Spearman of log t_acq with the measure's {ev} given the loss curve's {ev}",
                            pr["r"], (None, None), r["n"], n_runs(u),
                            f"Freedman-Lane: residuals of the {ev} on the loss's {ev} permuted within {m.strata}s"
                            f" ({pr['n_permutations']} permutations)", 0.0, pr["p"], "timing beyond the loss curve",
                            detail, m.protocol, "greater+gain", ev,
                            second=("leave-one-cell-out gain 1 - SSE(loss, geometry) / SSE(loss)", lo["gain"],
                                    *lo["gain_ci95"]), headline=m.headline))
    return out


def _cell_precursor(u: pd.DataFrame, col: str = "t_transition", frac=None) -> np.ndarray:
    f = u["min_gap_frac"].to_numpy(float) if frac is None else frac
    return np.asarray(is_precursor(u[col].to_numpy(float), u["t_acq"].to_numpy(float), f), dtype=float)


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
    frac = float(a["min_gap_frac"].iloc[0])
    t = a["t_transition"].to_numpy(float)
    res = _step_permutation(m, a, t, hard, frac)
    cands = np.unique(t[np.isfinite(t)])
    t_h = a.loc[hard, "t_acq"].to_numpy(float)
    clock = max((float(is_precursor(np.full(len(t_h), c), t_h, frac).mean()), c) for c in cands) if len(cands) else None
    return [ClaimRow("precursor rate on hard cells (descriptive)", m.measure, m.variant,
                     "share of hard cells whose transition passes t_tr <= (1 - f) t_acq",
                     res["k"] / res["n"], clopper_pearson(res["k"], res["n"]), res["n"], n_runs(a[hard]),
                     f"acquisition steps permuted across {m.unit_word} within {m.strata}s", res["null_rate"], res["p"],
                     "precursor rate (descriptive)",
                     m.mean_direction(a[hard]) + f"{res['k']}/{res['n']} hard cells; best fixed clock: rate "
                     + (f"{clock[0]:.2f} at step {clock[1]:.0f}" if clock else "NA")
                     + "; descriptive: a late-acquired cell passes the rule with any early event",
                     m.protocol, event="transition", headline=m.headline)]


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
    frac = a["min_gap_frac"].to_numpy(float)
    t_acq = a["t_acq"].to_numpy(float)
    strata = a[m.strata].to_numpy()
    t = a["t_transition"].to_numpy(float)

    def excess(tt):                    # tt (R, n) or (n,): transition steps
        tt = np.atleast_2d(tt)
        clock = timing.clock_of(tt, strata)
        d = []
        for x in (tt, clock):
            pre = is_precursor(x, t_acq[None, :], frac[None, :]).astype(float)
            d.append(pre[:, hard].mean(axis=1) - pre[:, ~hard].mean(axis=1))
        return d[0] - d[1], d[0], d[1]
    obs, d_obs, d_clock = (float(x[0]) for x in excess(t))
    rng = np.random.default_rng(m.seed)
    n_perm = min(m.n_perm, 2000)
    perm = t[strata_permutations(strata, n_perm, rng)]
    null = excess(perm)[0]
    p = float((1 + np.sum(null >= obs - 1e-12)) / (1 + n_perm))
    pre = _cell_precursor(a)
    lab = timing.label_permutation(pre, hard, strata, m.n_perm, m.seed)
    # interval: cells resampled within each class, each with its own pass/fail and its clock's
    pc = is_precursor(timing.clock_of(t, strata), t_acq, frac).astype(float)
    diff = pre - pc
    dh, de = diff[hard], diff[~hard]
    boots = (dh[rng.integers(0, len(dh), (m.nb, len(dh)))].mean(axis=1)
             - de[rng.integers(0, len(de), (m.nb, len(de)))].mean(axis=1))
    ci = tuple(float(x) for x in np.nanquantile(boots, [0.025, 0.975]))
    return [ClaimRow("precursor specific to hard cells", m.measure, m.variant,
                     "[rate(hard) - rate(easy)] of the measure minus that of the clock (cells)", obs, ci, len(a),
                     n_runs(a), f"transition steps permuted across {m.unit_word} within {m.strata}s "
                     f"({n_perm} permutations)", 0.0, p, "precursor specific to hard cells",
                     m.mean_direction(a) + f"measure: hard {pre[hard].mean():.2f} ({int(hard.sum())} {m.unit_word}),"
                     f" easy {pre[~hard].mean():.2f} ({int((~hard).sum())}), difference {d_obs:.2f}; clock difference"
                     f" {d_clock:.2f}; class-label permutation p of the measure's difference {fmt(lab['p'], 3)}"
                     " (not the test: a clock passes it too)", m.protocol, event="transition", headline=m.headline)]


def collapse_recovery_acquisition(m: MeasureView) -> list[ClaimRow]:
    a = m.acq
    hard = (a["difficulty"] == "hard").to_numpy()
    if not (m.measure.startswith("rankme") and hard.any() and "t_recovery" in a):
        return []
    res = _step_permutation(m, a, a["t_recovery"].to_numpy(float), hard, 0.0)
    return [ClaimRow("collapse -> recovery -> acquisition", m.measure, m.variant,
                     "share of hard cells that collapsed and recovered before acquisition",
                     res["k"] / res["n"], clopper_pearson(res["k"], res["n"]), res["n"], n_runs(a[hard]),
                     f"acquisition steps permuted across {m.unit_word} within {m.strata}s", res["null_rate"], res["p"],
                     "sequence", m.mean_direction(a[hard]) + f"{res['k']}/{res['n']} hard cells", m.protocol,
                     event="recovery", headline=m.headline)]


CLAIMS = [
    Claim("timing beyond the loss curve", "per measure and event kind (onset, extreme); the headline test",
          "geometry changes before behaviour in a way the loss curve does not already show (on hard runs geometry"
          " changes first and behaviour follows after a clear gap)",
          "per cell y = log t_acq, g = log(t_event + 1), l = log(t_loss event + 1) of the same kind; partial Spearman"
          " of y with g given l (one-sided Freedman-Lane permutation p) and the leave-one-cell-out gain of"
          " predicting y from (l, g) over l alone (bootstrap interval over cells); both must say yes. The same test"
          " against a clock (the median step of the other cells of the size) is in the detail",
          "g depends on l only (its residuals on l exchangeable within a size)", UNITS_TEXT, "measure",
          timing_beyond_loss,
          design=Design("simulated", TIMING_NULLS, PRECURSOR, "rankme_centred", ("onset", "extreme")),
          figure="timing", draws="second"),
    Claim("precursor rate on hard cells (descriptive)", "per measure and variant",
          "in hard runs the transition precedes acquisition by the precursor rule",
          "share of hard cells passing t_tr <= (1 - f) t_acq (Clopper-Pearson); permutation p and the best fixed"
          " clock beside it. Descriptive: a hard cell is acquired late, so any early event passes",
          "acquisition steps permuted across cells within a size (class-file classes stay with their cells)",
          UNITS_TEXT, "measure", precursor_rate_descriptive,
          design=Design("simulated", TIMING_NULLS, PRECURSOR, "rankme_centred", ("transition",), units="hard"),
          figure="timing"),
    Claim("precursor specific to hard cells", "per measure and variant",
          "the precursor rate of hard runs exceeds that of easy runs",
          "rate(hard cells) - rate(easy cells) minus the same difference of a clock (each cell: the median"
          " transition step of the other cells of its size), bootstrap within classes; the class-label permutation"
          " p in the detail (a clock passes that one too)", "transition steps permuted across cells within a size",
          UNITS_TEXT, "measure", precursor_specific_to_hard_cells,
          design=Design("simulated", TIMING_NULLS + PRECURSOR, ("hard-only",), "rankme_centred",
                        ("transition",)), figure="timing"),
    Claim("collapse -> recovery -> acquisition", "per RankMe variant",
          "in hard runs the measure collapses, recovers, and acquisition follows",
          "share of hard cells whose recovery precedes acquisition; permutation p",
          "acquisition steps permuted across cells within a size", UNITS_TEXT, "measure", collapse_recovery_acquisition,
          figure="timing"),
]
