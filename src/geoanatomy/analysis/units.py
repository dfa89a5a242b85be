"""The units of every claim: one row per unit (a task x level x size cell; a mixture's model)
and measure, its seeds nested inside it.

Replicate seeds of one cell share its task, level and size, so they are not independent
evidence about how timing depends on difficulty or scale: each claim reads one number per
unit, the median over the unit's seeds, and counts units (runs in brackets).

``unit_events(rows)`` (rows: ``rates.measure_rows``, shuffled-label controls and diverged runs
left out) has, per unit and measure:

runs, acquired_runs
    the unit's seeds and those that acquired.
acquired
    at least half of the seeds acquired (the median acquisition step, a seed that never
    acquired counted as +inf, is finite).
difficulty
    the unit's class: the class file's (fixed before the outcome, the same for every seed),
    else the post-hoc rule on the unit's median acquisition step (``precursor.difficulty``).
t_acq
    median acquisition step over the seeds (+inf for a seed that never acquired).
t_<event>, t_ref_<event>, n_<event>  for event in ``EVENTS``
    the measure's event and the loss curve's event of the same kind and depth (onset with
    onset, extreme with extreme; ``rates.PAIRS``), each the median over the acquired seeds
    where the measure transitioned and both events exist; n_<event> counts those seeds. NaN
    when fewer than half of the acquired seeds have both.
t_transition
    the step the precursor rule reads (``rates.effective_transition``: the configured
    transition event, a measure that never transitioned has none), median as above (no
    reference needed).
t_recovery
    the recovery step (RankMe: back above its floor), median as t_transition.
t_loss_exit, t_loss_onset, t_loss_half, t_loss_extreme
    median over the acquired seeds of the loss curve's plateau exit and of its events
    (onset, half-rise, extreme): the timing claims' covariates (those before acquisition),
    whatever the measure's event.
calibration_step
    the class file's calibration acquisition step of the cell (+inf: never; NaN without a
    class file), known before training.
t_window
    median over the seeds with a transition of the step its floor window ends on (a collapse's
    floor is searched at or before it; NaN for rises and unwindowed floors).
res_transition
    median over the seeds with a transition of the half-width in decades within which the
    grids place its lag (``rates`` column lag_resolution).
lag_<event>, lag_transition
    median over the same seeds of log10(t + 1) - log10(t_acq + 1), decades (< 0: before
    acquisition).
mean_share_rho
    median over the seeds of the rank correlation of RankMe with 1 - mean share over
    checkpoints (RankMe rows only; precursor.json ``mean_share.rank_corr_with_rankme``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..precursor import difficulty
from .stats import CELLS
from .rates import PAIRS, effective_transition

EVENTS = tuple(name for name, _, _ in PAIRS)       # ("onset", "extreme")


def _median(x) -> float:
    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)]
    return float(np.median(x)) if len(x) else float("nan")


def _lag(t, t_acq) -> np.ndarray:
    return np.log10(np.asarray(t, dtype=float) + 1) - np.log10(np.asarray(t_acq, dtype=float) + 1)


def unit_events(rows: pd.DataFrame, unit_cols=CELLS) -> pd.DataFrame:
    """One row per unit and measure (module doc), in first-seen order."""
    d = rows[(rows["control"] == "") & ~rows["diverged"].astype(bool)].reset_index(drop=True)
    if not len(d):
        return pd.DataFrame()
    keys = ["measure"] + list(unit_cols)
    num = {c: pd.to_numeric(d[c], errors="coerce").to_numpy(float)
           for c in ("acquisition_step", "recovery_step", "loss_plateau_exit_step", "mean_share_rho",
                     "easy_max_step", "loss_onset_step", "loss_half_step", "loss_extreme_step", "lag_resolution",
                     "calibration_step", "window_end_step")
           + tuple(c for _, c, r in PAIRS) + tuple(r for _, c, r in PAIRS)}
    acq = d["acquired"].astype(bool).to_numpy()
    t_acq = num["acquisition_step"]
    trans = (d["transitioned"].fillna(False).astype(bool) | (d["kind"] == "reference")).to_numpy() & acq
    cols = {"_inf_acq": np.where(acq, t_acq, np.inf), "_acq": acq.astype(float)}

    def event(name, t_ev, t_ref):
        ok = trans & np.isfinite(t_ev) & (np.isfinite(t_ref) if t_ref is not None else True)
        cols[f"t_{name}"] = np.where(ok, t_ev, np.nan)
        cols[f"n_{name}"] = ok.astype(float)
        with np.errstate(invalid="ignore"):
            cols[f"lag_{name}"] = np.where(ok, _lag(t_ev, t_acq), np.nan)
        if t_ref is not None:
            cols[f"t_ref_{name}"] = np.where(ok, t_ref, np.nan)
    for name, col, ref in PAIRS:
        event(name, num[col], num[ref])
    event("transition", effective_transition(d), None)
    event("recovery", num["recovery_step"], None)
    cols["t_loss_exit"] = np.where(acq, num["loss_plateau_exit_step"], np.nan)
    for ev in ("onset", "half", "extreme"):
        cols[f"t_loss_{ev}"] = np.where(acq, num[f"loss_{ev}_step"], np.nan)
    cols["res_transition"] = np.where(np.isfinite(cols["t_transition"]), num["lag_resolution"], np.nan)
    cols["t_window"] = np.where(np.isfinite(cols["t_transition"]), num["window_end_step"], np.nan)
    cols["mean_share_rho"] = np.where(acq, num["mean_share_rho"], np.nan)
    # one group code per row (units in first-seen order); every aggregate below is a numpy
    # array in that order, put into one DataFrame at the end
    code = d.groupby(keys, sort=False).ngroup().to_numpy()
    n_g = int(code.max()) + 1
    first_row = np.full(n_g, len(d))
    np.minimum.at(first_row, code, np.arange(len(d)))
    frame = pd.DataFrame(cols)
    frame["_g"] = code
    g = frame.groupby("_g", sort=True)
    med = g[[c for c in cols if c.startswith(("t_", "lag_", "mean_share", "res_"))]].median()
    sums = g[[c for c in cols if c.startswith("n_")] + ["_acq"]].sum()
    t_cell = g["_inf_acq"].median().to_numpy(float)
    runs = np.bincount(code, minlength=n_g)
    fixed_row = d["difficulty_fixed"].astype("boolean").fillna(False).astype(bool).to_numpy()
    fixed = np.bincount(code, weights=fixed_row, minlength=n_g) == runs
    label = np.full(n_g, "unlearned", dtype=object)
    diff_row = d["difficulty"].to_numpy(object)
    for i in np.flatnonzero(acq)[::-1]:                       # the first acquired seed's class
        label[code[i]] = diff_row[i]
    head = d.iloc[first_row]
    out = {c: head[c].to_numpy() for c in keys}
    for c in ("kind", "variant", "layer", "position", "n_params", "easy_max_step"):
        out[c] = head[c].to_numpy()
    if "size" not in unit_cols:
        out["size"] = head["size"].to_numpy()
    out["variant"] = np.array(["" if v is None or v != v else str(v) for v in out["variant"]], dtype=object)
    acq_runs = sums["_acq"].to_numpy(float).astype(int)
    acquired = np.isfinite(t_cell)
    emax = pd.to_numeric(pd.Series(out["easy_max_step"]), errors="coerce").to_numpy(float)
    posthoc = difficulty(np.where(acquired, t_cell, np.nan), emax)
    out.update(runs=runs, acquired_runs=acq_runs, acquired=acquired, difficulty_fixed=fixed,
               difficulty=np.where(~acquired, "unlearned", np.where(fixed, label, posthoc)), t_acq=t_cell)
    for name in EVENTS + ("transition", "recovery"):
        n_ev = sums[f"n_{name}"].to_numpy(float)
        keep = (2 * n_ev >= np.clip(acq_runs, 1, None)) & (acq_runs > 0)
        out[f"n_{name}"] = n_ev.astype(int)
        for c in (f"t_{name}", f"lag_{name}", f"t_ref_{name}"):
            if c in med:
                out[c] = np.where(keep, med[c].to_numpy(float), np.nan)
    for c in ("t_loss_exit", "t_loss_onset", "t_loss_half", "t_loss_extreme", "res_transition", "t_window"):
        out[c] = med[c].to_numpy(float)
    out["calibration_step"] = num["calibration_step"][first_row]
    out["mean_share_rho"] = med["mean_share_rho"].to_numpy(float)
    return pd.DataFrame(out)


def unit_medians(df: pd.DataFrame, cols: list[str], unit_cols=CELLS) -> pd.DataFrame:
    """One row per unit: the median of each column of ``cols`` over the unit's rows with a
    value (NaN when none has one) and ``runs`` = the unit's rows."""
    d = df.copy()
    for c in cols:
        d[c] = pd.to_numeric(d[c], errors="coerce").astype(float)
    g = d.groupby(list(unit_cols), sort=False)
    return pd.concat([g[cols].median(), g.size().rename("runs")], axis=1).reset_index()
