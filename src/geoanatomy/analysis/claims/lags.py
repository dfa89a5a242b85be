"""The lag claims: a measure's transition simultaneous with acquisition (easy cells; the LLC, the
gradient ranks over acquired cells) or after it (the Hessian), as the lag in decades.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..stats import timing
from .base import LAG_NULLS, SIMULTANEOUS, UNITS_TEXT, Claim, ClaimRow, Design, MeasureView, fmt, n_runs


def _lag_row(m: MeasureView, claim: str, u: pd.DataFrame, rule: str, family: str, statement: str) -> ClaimRow:
    u = u[np.isfinite(u["lag_transition"].to_numpy(float))]           # the cells with the event
    res = u["res_transition"].to_numpy(float) if "res_transition" in u else None
    r = timing.lag_test(u["lag_transition"].to_numpy(float), m.delta, res, m.level)
    p = r.p_simultaneous if rule == "equivalence" else r.p
    d = r.delta
    return ClaimRow(claim, m.measure, m.variant,
                    "mean over cells of the lag log10(t_tr + 1) - log10(t_acq + 1) (decades)", r.statistic, r.ci,
                    r.n, n_runs(u), ("two one-sided t tests against +-delta" if rule == "equivalence"
                                         else "one-sided t test against 0"),
                    d if rule == "equivalence" else 0.0, p, family,
                    m.mean_direction(u) + f"{statement}; the interval reads '{r.reading}' (delta {fmt(d)} decade:"
                    f" the larger of summary.equivalence_decades {m.delta:g} and the grids' median resolution; sd over"
                    f" cells {fmt(r.sd)}, quantisation term {fmt(r.quantisation, 3)} decade)",
                    m.protocol, rule, "transition", m.level, headline=m.headline,
                    effect_of_interest=d if rule == "lag" else None, bound=r.ci[1] if rule == "lag" else None)


def easy_simultaneous(m: MeasureView) -> list[ClaimRow]:
    """The lag over easy cells; a collapse whose floor is searched at or before a window end
    (the loss onset) that comes more than delta before acquisition on average cannot show a
    floor at acquisition, so the row is forced by the window (``forced_by``: no word)."""
    u = m.acq[m.acq["difficulty"] == "easy"]
    if not len(u):
        return []
    row = _lag_row(m, "easy cells: transition simultaneous with acquisition", u, "equivalence",
                   "simultaneous (easy)", "easy cells")
    w = u[np.isfinite(u["lag_transition"].to_numpy(float))]
    tw = w["t_window"].to_numpy(float) if "t_window" in w else np.array([])
    if np.isfinite(tw).any():
        ok = np.isfinite(tw)
        wlag = float(np.mean(np.log10(tw[ok] + 1) - np.log10(w["t_acq"].to_numpy(float)[ok] + 1)))
        if wlag < -float(row.null_value or m.delta):
            row = replace(row, forced_by=f"the floor window: the floor is searched at or before the loss onset, which"
                                         f" ends {-wlag:.2f} decade before acquisition on average over these cells,"
                                         " so a floor at acquisition could not be seen")
    return [row]


def _acquired_lag(measures: tuple, claim: str, rule: str, family: str):
    """The rows function of a lag claim over the acquired cells of the named measures."""
    def rows(m: MeasureView) -> list[ClaimRow]:
        if m.measure not in measures or not len(m.acq):
            return []
        return [_lag_row(m, claim, m.acq, rule, family, "acquired cells")]
    rows.__name__ = rows.__qualname__ = f"lag_rows_{family}"
    return rows


llc_synchronous = _acquired_lag(("llc",), "LLC synchronous with acquisition", "equivalence", "synchronous")
gradient_ranks_in_step = _acquired_lag(("grad_erank", "grad_cov_erank"), "gradient ranks in step with acquisition",
                                       "equivalence", "synchronous")
hessian_lags = _acquired_lag(("hessian_top",), "Hessian lags acquisition", "lag", "lags")


CLAIMS = [
    Claim("easy cells: transition simultaneous with acquisition", "per measure and variant",
          "on easy runs the model learns during the initial collapse: no precursor, geometry and behaviour together",
          "mean over easy cells of the lag log10(t_tr + 1) - log10(t_acq + 1); 90% Student t interval widened by the"
          " grids' quantisation term inside (-delta, delta) (two one-sided tests; delta = the larger of"
          " summary.equivalence_decades and the grids' resolution); no word where the floor window ends more than"
          " delta before acquisition (column forced_by: a floor at acquisition could not be seen)",
          "a lag of at least delta either way", UNITS_TEXT, "measure", easy_simultaneous,
          design=Design("simulated", LAG_NULLS, SIMULTANEOUS, "rankme_centred", ("transition",),
                        units="easy"), figure="lags"),
    Claim("LLC synchronous with acquisition", "one row (llc)",
          "the LLC moves with acquisition",
          "the same lag over acquired cells; 90% t interval (with the quantisation term) inside (-delta, delta)",
          "a lag of at least delta either way", UNITS_TEXT, "measure", llc_synchronous,
          design=Design("simulated", LAG_NULLS, SIMULTANEOUS, "llc", ("transition",)), figure="lags"),
    Claim("gradient ranks in step with acquisition", "per gradient rank (grad_erank, grad_cov_erank)",
          "the gradient ranks move with acquisition",
          "as LLC synchronous", "a lag of at least delta either way", UNITS_TEXT, "measure", gradient_ranks_in_step,
          design=Design("simulated", LAG_NULLS, SIMULTANEOUS, "grad_erank", ("transition",)),
          figure="lags"),
    Claim("Hessian lags acquisition", "one row (hessian_top)",
          "the top Hessian eigenvalue's transition comes after acquisition",
          "the same lag over acquired cells; the 90% interval's lower end (one-sided 95% bound) above 0; not"
          " reproduced when its upper end is below delta (a lag shorter than the grid resolves or than"
          " summary.equivalence_decades)",
          "no lag (0)", UNITS_TEXT, "measure", hessian_lags,
          design=Design("simulated", ("simultaneous", "proportional"), ("lag", "lag-noisy"), "hessian_top",
                        ("transition",)), figure="lags"),
]
