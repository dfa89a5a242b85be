"""Collapse floors: per-run table, per-task spread across sizes, task vs size variance.

collapse_floors.csv: one row per run and geometric measure (headline layer):
init, floor (minimum over checkpoints), floor_step, floor/init, collapsed.

floor_spread.csv: per measure x level x task, the floors across sizes: min,
median, max, SD of log10(floor) across sizes, and Spearman rho of floor vs
log10(n_params) with its exact permutation p (n = sizes; "rising" if rho > 0
and p < alpha, "falling" if rho < 0 and p < alpha, else "no trend").

floor_summary.json: per measure x level (and "all" levels, unit = task_level):
a two-way decomposition of log10(floor) on the complete task x size table,
SS_total = SS_task + SS_size + SS_residual (additive model), the task and size
shares of SS_total; mean within-task SD across sizes vs mean within-size SD
across tasks. Verdicts: task_specific = task share > size share;
rising_with_capacity = k/n tasks with a significant positive rho.
Diverged runs are excluded from floors (their curves stop early). For rising
measures (direction "rise": top Hessian eigenvalue, LLC) the same analyses use
the peak instead of the floor (column ``extreme``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .load import extreme, geometric_measures, level_order, run_facts, size_order, task_order
from .stats import spearman_exact

FLOOR_COLUMNS = ["run", "task", "level", "size", "family", "n_params", "steps", "difficulty", "acquired",
                 "diverged", "acquisition_step", "measure", "layer", "position", "variant", "n_samples",
                 "direction", "init", "floor", "floor_step", "floor_over_init", "floor_step_frac", "collapsed",
                 "peak", "peak_step", "extreme", "extreme_value", "extreme_step", "n_flagged"]


def collapse_floors(pres: list[dict]) -> pd.DataFrame:
    """One row per run and measure. ``extreme`` names the level the cross-size analyses use:
    the floor for collapsing measures, the peak for rising ones (load.extreme)."""
    rows = []
    for pre in pres:
        f = run_facts(pre)
        for name, m in geometric_measures(pre).items():
            init, floor, fs = m.get("init"), m.get("floor"), m.get("floor_step")
            kind, xv, xs = extreme(m)
            rows.append({**f, "measure": name, "layer": m.get("layer"), "position": m.get("position"),
                         "variant": m.get("variant"), "n_samples": m.get("n_samples"),
                         "direction": m.get("direction", "collapse"),
                         "init": init, "floor": floor, "floor_step": fs,
                         "floor_over_init": floor / init if floor is not None and init else None,
                         "floor_step_frac": fs / f["steps"] if fs is not None and f["steps"] else None,
                         "collapsed": m.get("collapsed"), "peak": m.get("peak"), "peak_step": m.get("peak_step"),
                         "extreme": kind, "extreme_value": xv, "extreme_step": xs, "n_flagged": m.get("n_flagged")})
    return pd.DataFrame(rows, columns=FLOOR_COLUMNS)


def _usable(floors: pd.DataFrame) -> pd.DataFrame:
    """Non-diverged rows with a positive extreme value; ``log10_floor`` = log10(extreme_value)."""
    f = floors[~floors["diverged"].astype(bool) & floors["extreme_value"].notna()].copy()
    f = f[f["extreme_value"].astype(float) > 0]
    f["floor"] = f["extreme_value"].astype(float)      # floor of collapsing, peak of rising measures
    f["log10_floor"] = np.log10(f["floor"])
    return f


def floor_spread(floors: pd.DataFrame, st: dict) -> pd.DataFrame:
    """Per measure x level x task: floors across sizes and the trend with capacity."""
    out = []
    f = _usable(floors)
    for (measure, level), g in f.groupby(["measure", "level"], sort=False):
        for task in task_order(g["task"]):
            t = g[g["task"] == task]
            sizes = size_order(t["size"], dict(zip(t["size"], t["n_params"])))
            t = t.set_index("size").loc[sizes]
            x = np.log10(t["n_params"].astype(float)) if t["n_params"].notna().all() else np.arange(len(t), dtype=float)
            sp = spearman_exact(x, t["floor"].astype(float), st["exact_max_n"], st["n_resamples"], st["seed"])
            trend = "no trend"
            if sp["p"] is not None and sp["p"] < st["alpha"]:
                trend = "rising" if sp["rho"] > 0 else "falling"
            out.append({"measure": measure, "extreme": t["extreme"].iloc[0], "level": level, "task": task,
                        "n_sizes": len(t),
                        "sizes": " ".join(sizes), "floors": " ".join(f"{v:.4g}" for v in t["floor"]),
                        "floor_min": float(t["floor"].min()), "floor_median": float(t["floor"].median()),
                        "floor_max": float(t["floor"].max()),
                        "sd_log10_floor_across_sizes": float(t["log10_floor"].std(ddof=1)) if len(t) > 1 else None,
                        "rho_floor_vs_log10_params": sp["rho"], "p_exact": sp["p"], "p_method": sp["method"],
                        "trend_with_capacity": trend})
    cols = ["measure", "extreme", "level", "task", "n_sizes", "sizes", "floors", "floor_min", "floor_median", "floor_max",
            "sd_log10_floor_across_sizes", "rho_floor_vs_log10_params", "p_exact", "p_method", "trend_with_capacity"]
    return pd.DataFrame(out, columns=cols)


def _two_way(table: pd.DataFrame) -> dict:
    """Additive two-way sums of squares of a complete (rows x cols) table of log10 floors."""
    y = table.to_numpy(float)                                           # (units, sizes)
    r, c = y.shape
    grand = y.mean()
    ss_tot = float(((y - grand) ** 2).sum())
    ss_row = float(c * ((y.mean(1) - grand) ** 2).sum())
    ss_col = float(r * ((y.mean(0) - grand) ** 2).sum())
    share = (lambda s: s / ss_tot if ss_tot > 0 else None)
    return {"n_units": r, "n_sizes": c, "ss_total": ss_tot, "ss_task": ss_row, "ss_size": ss_col,
            "ss_residual": max(0.0, ss_tot - ss_row - ss_col), "task_share": share(ss_row), "size_share": share(ss_col),
            "mean_sd_across_sizes_within_task": float(np.mean(y.std(1, ddof=1))) if c > 1 else None,
            "mean_sd_across_tasks_within_size": float(np.mean(y.std(0, ddof=1))) if r > 1 else None}


def floor_summary(floors: pd.DataFrame, spread: pd.DataFrame) -> dict:
    """Per measure x level (+ 'all'): variance decomposition and verdicts (see module doc)."""
    f = _usable(floors)
    out = {}
    for measure, g in f.groupby("measure", sort=False):
        res = {}
        for level in level_order(g["level"]) + ["all"]:
            gl = g if level == "all" else g[g["level"] == level]
            unit = gl["task"] + ("_" + gl["level"] if level == "all" else "")
            wide = gl.assign(unit=unit).pivot_table(index="unit", columns="size", values="log10_floor", aggfunc="first")
            n_all = wide.shape
            wide = wide.dropna(axis=0, how="any")
            entry = {"units": "task_level" if level == "all" else "task", "table_shape_before_dropping_incomplete": list(n_all)}
            if wide.shape[0] >= 2 and wide.shape[1] >= 2:
                entry.update(_two_way(wide))
                ts, ss = entry["task_share"], entry["size_share"]
                entry["task_specific"] = bool(ts is not None and ss is not None and ts > ss)
            else:
                entry["note"] = f"complete task x size table is {wide.shape[0]} x {wide.shape[1]}: need >= 2 x 2"
            sp = spread[(spread["measure"] == measure) & ((spread["level"] == level) if level != "all" else True)]
            sp = sp[sp["n_sizes"] >= 3]
            k = int((sp["trend_with_capacity"] == "rising").sum())
            entry["rising_with_capacity_k_of_n"] = f"{k}/{len(sp)}"
            entry["falling_with_capacity_k_of_n"] = f"{int((sp['trend_with_capacity'] == 'falling').sum())}/{len(sp)}"
            rhos = sp["rho_floor_vs_log10_params"].dropna()
            entry["median_rho_floor_vs_size"] = float(rhos.median()) if len(rhos) else None
            res[level] = entry
        out[measure] = res
    return {"method": __doc__.split("floor_summary.json:")[1].strip(), "measures": out,
            "n_runs_used": int(f["run"].nunique()), "n_runs_excluded_diverged_or_no_floor":
            int(floors["run"].nunique() - f["run"].nunique())}
