"""Collapse floors: per-run table, per-task trend across sizes, task vs size ANOVA.

Control runs (shuffled labels) are left out of every table here; diverged runs
are left out of the statistics (their curves stop early). For rising measures
(direction "rise": top Hessian eigenvalue, LLC) the same analyses use the peak
instead of the floor (column ``extreme``).

collapse_floors.csv: one row per (non-control) run and geometric measure
(headline layer): init, floor (minimum over checkpoints), floor_step,
floor/init, collapsed; seed says which replicate of its cell the run is.

Cells and seeds: a cell is task x level x size; its replicate seeds are nested
in it, and every cross-size statistic below uses one value per cell, the median
floor over its seeds (n counts cells; seeds per cell are listed).

floor_spread.csv: per measure x level x task, the cell floors across sizes:
min, median, max, SD of log10(floor) across sizes, and Spearman rho of floor vs
log10(n_params) (n = sizes) with its exact two-sided permutation p (analysis.stats;
raw p) and the Holm-adjusted p over the family of the tasks of one measure and
level (p_holm; the smallest exact p at 6 sizes is 2/720, so a family over all 24
task-levels could never reach 0.05). trend_with_capacity uses p_holm: "rising"
if rho > 0 and p_holm < alpha, "falling" if rho < 0 and p_holm < alpha, else
"no trend".

floor_summary.json: per measure x level (and "all" levels, unit = task_level):
a two-way ANOVA without replication (additive model: one value per cell) of
log10(cell floor) on the complete unit x size table. SS_total = SS_task +
SS_size + SS_residual, df_task = r - 1, df_size = c - 1, df_residual =
(r - 1)(c - 1), MS = SS / df, F_task = MS_task / MS_residual and F_size =
MS_size / MS_residual with p-values from the F distribution (df_factor,
df_residual), and omega squared per factor, omega2 = (SS_factor - df_factor *
MS_residual) / (SS_total + MS_residual). The task and size shares of SS_total
are kept as description only. Verdicts: task_specific = the F test for task is
significant at alpha AND omega2_task > omega2_size (raw shares ignore degrees of
freedom: with 8 tasks and 6 sizes pure noise gives task share > size share in
two thirds of tables); rising_with_capacity = k/n tasks with a significant
positive rho after Holm (per level; "all" sums the levels).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from .load import (
    extreme,
    geometric_measures,
    level_order,
    per_cell,
    run_facts,
    seeds_span,
    size_order,
    study_runs,
    task_order,
)
from .settings import summary_settings
from .stats import holm, spearman_exact

FLOOR_COLUMNS = ["run", "task", "level", "size", "seed", "family", "n_params", "steps", "difficulty", "acquired",
                 "diverged", "acquisition_step", "measure", "layer", "position", "variant", "n_samples",
                 "direction", "init", "floor", "floor_step", "floor_over_init", "floor_step_frac", "collapsed",
                 "peak", "peak_step", "extreme", "extreme_value", "extreme_step", "n_flagged"]
ANOVA_TEST = ("two-way ANOVA without replication (additive model) of log10(cell floor), unit x size; "
              "F tests for task and size against the residual mean square; omega squared per factor")
TREND_TEST = "Spearman rho of cell floor vs log10(n_params) over sizes, exact two-sided permutation p, Holm over tasks"


def collapse_floors(pres: list[dict]) -> pd.DataFrame:
    """One row per run and measure. ``extreme`` names the level the cross-size analyses use:
    the floor for collapsing measures, the peak for rising ones (load.extreme)."""
    rows = []
    for pre in study_runs(pres):
        f = run_facts(pre)
        for name, m in geometric_measures(pre).items():
            init, floor, fs = m.get("init"), m.get("floor"), m.get("floor_step")
            kind, xv, xs = extreme(m)
            rows.append({**f, "measure": name, "layer": m.get("layer"), "position": m.get("position"),
                         "variant": m.get("variant"), "n_samples": m.get("n_samples"),
                         "direction": m["direction"],
                         "init": init, "floor": floor, "floor_step": fs,
                         "floor_over_init": floor / init if floor is not None and init else None,
                         "floor_step_frac": fs / f["steps"] if fs is not None and f["steps"] else None,
                         "collapsed": m.get("collapsed"), "peak": m.get("peak"), "peak_step": m.get("peak_step"),
                         "extreme": kind, "extreme_value": xv, "extreme_step": xs, "n_flagged": m.get("n_flagged")})
    return pd.DataFrame(rows, columns=FLOOR_COLUMNS)


def _usable(floors: pd.DataFrame) -> pd.DataFrame:
    """Non-diverged, non-control rows with a positive extreme value (floor of collapsing,
    peak of rising measures) as ``floor``."""
    f = floors[~floors["diverged"].astype(bool) & floors["extreme_value"].notna()].copy()
    if "control" in f.columns:
        f = f[f["control"].fillna("") == ""]
    f = f[f["extreme_value"].astype(float) > 0]
    f["floor"] = f["extreme_value"].astype(float)
    if "seed" not in f.columns:
        f["seed"] = 0
    return f


def cell_floors(floors: pd.DataFrame) -> pd.DataFrame:
    """One row per measure x level x task x size cell: floor = median over its seeds,
    n_seeds, log10_floor, n_params (module doc)."""
    f = _usable(floors)
    cols = ["measure", "extreme", "level", "task", "size", "floor", "n_seeds", "log10_floor", "n_params"]
    if f.empty:
        return pd.DataFrame(columns=cols)
    c = per_cell(f, ["measure", "extreme", "level", "task", "size"], "floor")
    c["log10_floor"] = np.log10(c["floor"].astype(float))
    n_params = f.dropna(subset=["n_params"]).drop_duplicates("size").set_index("size")["n_params"]
    c["n_params"] = c["size"].map(n_params)
    return c[cols]


def floor_spread(floors: pd.DataFrame, st: dict) -> pd.DataFrame:
    """Per measure x level x task: cell floors across sizes and the trend with capacity
    (Holm over the tasks of one measure and level)."""
    out = []
    c = cell_floors(floors)
    alpha = st["alpha"]
    for (measure, level), g in c.groupby(["measure", "level"], sort=False):
        fam = []
        for task in task_order(g["task"]):
            t = g[g["task"] == task]
            sizes = size_order(t["size"], dict(zip(t["size"], t["n_params"])))
            t = t.set_index("size").loc[sizes]
            x = np.log10(t["n_params"].astype(float)) if t["n_params"].notna().all() else np.arange(len(t), dtype=float)
            sp = spearman_exact(x, t["floor"].astype(float), st["exact_max_n"], st["n_resamples"], st["seed"])
            fam.append({"measure": measure, "extreme": t["extreme"].iloc[0], "level": level, "task": task,
                        "n_sizes": len(t), "n_seeds_per_size": " ".join(str(int(v)) for v in t["n_seeds"]),
                        "sizes": " ".join(sizes), "floors": " ".join(f"{v:.4g}" for v in t["floor"]),
                        "floor_min": float(t["floor"].min()), "floor_median": float(t["floor"].median()),
                        "floor_max": float(t["floor"].max()),
                        "sd_log10_floor_across_sizes": float(t["log10_floor"].std(ddof=1)) if len(t) > 1 else None,
                        "rho_floor_vs_log10_params": sp.statistic, "p_raw": sp.p, "p_method": sp.null})
        for row, ph in zip(fam, holm([r["p_raw"] for r in fam])):
            trend = "no trend"
            if ph is not None and ph < alpha:
                trend = "rising" if row["rho_floor_vs_log10_params"] > 0 else "falling"
            n_fam = sum(r["p_raw"] is not None for r in fam)
            out.append({**row, "p_holm": ph, "holm_family": f"{n_fam} tasks of {measure} at level {level}",
                        "test": TREND_TEST, "trend_with_capacity": trend})
    cols = ["measure", "extreme", "level", "task", "n_sizes", "n_seeds_per_size", "sizes", "floors", "floor_min",
            "floor_median", "floor_max", "sd_log10_floor_across_sizes", "rho_floor_vs_log10_params", "p_raw",
            "p_holm", "p_method", "holm_family", "test", "trend_with_capacity"]
    return pd.DataFrame(out, columns=cols)


def two_way_anova(y, alpha: float = 0.05) -> dict:
    """Two-way ANOVA without replication (additive model) of a complete (units x sizes)
    table; F tests, omega squared and the task_specific verdict (module doc)."""
    y = np.asarray(y, dtype=float)
    r, c = y.shape
    grand = y.mean()
    ss_tot = float(((y - grand) ** 2).sum())
    ss_task = float(c * ((y.mean(1) - grand) ** 2).sum())
    ss_size = float(r * ((y.mean(0) - grand) ** 2).sum())
    ss_res = max(0.0, ss_tot - ss_task - ss_size)
    if ss_res <= 1e-12 * max(ss_tot, 1e-300):
        ss_res = 0.0                                               # exactly additive table
    df_task, df_size, df_res = r - 1, c - 1, (r - 1) * (c - 1)
    ms_task, ms_size, ms_res = ss_task / df_task, ss_size / df_size, ss_res / df_res

    def f_test(ms, df):
        if ms_res > 0:
            f = ms / ms_res
            return f, float(stats.f.sf(f, df, df_res))
        return (float("inf"), 0.0) if ms > 0 else (None, None)   # no residual variance

    f_task, p_task = f_test(ms_task, df_task)
    f_size, p_size = f_test(ms_size, df_size)
    omega = (lambda ss, df: (ss - df * ms_res) / (ss_tot + ms_res) if ss_tot + ms_res > 0 else None)
    w_task, w_size = omega(ss_task, df_task), omega(ss_size, df_size)
    share = (lambda v: v / ss_tot if ss_tot > 0 else None)
    task_specific = bool(p_task is not None and p_task < alpha and w_task is not None and w_size is not None
                         and w_task > w_size)
    return {"n_units": r, "n_sizes": c, "n_cells": r * c, "ss_total": ss_tot, "ss_task": ss_task,
            "ss_size": ss_size, "ss_residual": ss_res, "df_task": df_task, "df_size": df_size, "df_residual": df_res,
            "ms_task": ms_task, "ms_size": ms_size, "ms_residual": ms_res,
            "F_task": f_task if f_task is None or np.isfinite(f_task) else None, "p_task": p_task,
            "F_size": f_size if f_size is None or np.isfinite(f_size) else None, "p_size": p_size,
            "omega2_task": w_task, "omega2_size": w_size, "task_share": share(ss_task), "size_share": share(ss_size),
            "mean_sd_across_sizes_within_task": float(np.mean(y.std(1, ddof=1))) if c > 1 else None,
            "mean_sd_across_tasks_within_size": float(np.mean(y.std(0, ddof=1))) if r > 1 else None,
            "alpha": alpha, "task_specific": task_specific}


def floor_summary(floors: pd.DataFrame, spread: pd.DataFrame, st: dict | None = None) -> dict:
    """Per measure x level (+ 'all'): two-way ANOVA on cell floors and verdicts (module doc)."""
    alpha = (st or summary_settings())["alpha"]
    f = _usable(floors)
    cells = cell_floors(floors)
    out = {}
    for measure, g in cells.groupby("measure", sort=False):
        res = {}
        for level in level_order(g["level"]) + ["all"]:
            gl = g if level == "all" else g[g["level"] == level]
            unit = gl["task"] + ("_" + gl["level"] if level == "all" else "")
            gl = gl.assign(unit=unit)
            wide = gl.drop_duplicates(["unit", "size"]).set_index(["unit", "size"])["log10_floor"].unstack("size")
            n_all = wide.shape
            wide = wide.dropna(axis=0, how="any")
            used = gl[gl["unit"].isin(wide.index) & gl["size"].isin(wide.columns)]
            entry = {"units": "task_level" if level == "all" else "task",
                     "cell": "task x level x size; value = median floor over the cell's seeds",
                     "seeds_per_cell": seeds_span(used["n_seeds"]), "n_runs": int(used["n_seeds"].sum()),
                     "test": ANOVA_TEST, "table_shape_before_dropping_incomplete": list(n_all)}
            if wide.shape[0] >= 2 and wide.shape[1] >= 2:
                entry.update(two_way_anova(wide.to_numpy(float), alpha))
            else:
                entry["note"] = f"complete task x size table is {wide.shape[0]} x {wide.shape[1]}: need >= 2 x 2"
            sp = spread[(spread["measure"] == measure) & ((spread["level"] == level) if level != "all" else True)]
            sp = sp[sp["n_sizes"] >= 3]
            k = int((sp["trend_with_capacity"] == "rising").sum())
            entry["trend_test"] = TREND_TEST + " (floor_spread.csv; Holm family = the tasks of one level)"
            entry["rising_with_capacity_k_of_n"] = f"{k}/{len(sp)}"
            entry["falling_with_capacity_k_of_n"] = f"{int((sp['trend_with_capacity'] == 'falling').sum())}/{len(sp)}"
            rhos = sp["rho_floor_vs_log10_params"].dropna()
            entry["median_rho_floor_vs_size"] = float(rhos.median()) if len(rhos) else None
            res[level] = entry
        out[measure] = res
    return {"method": __doc__.split("floor_summary.json:")[1].strip(), "test": ANOVA_TEST, "measures": out,
            "n_runs_used": int(f["run"].nunique()), "n_cells_used": len(cells.drop_duplicates(
                ["level", "task", "size"])), "seeds_per_cell": seeds_span(cells.drop_duplicates(
                    ["level", "task", "size"])["n_seeds"]),
            "n_runs_excluded_diverged_or_no_floor": int(floors["run"].nunique() - f["run"].nunique()),
            "control_runs": "left out (collapse_floors keeps only study runs)"}
