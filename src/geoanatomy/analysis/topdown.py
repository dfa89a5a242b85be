"""Top-down propagation: the order in which layers reach their floors (and recover).

Runs used: study runs (shuffled-label control runs are left out of the table);
diverged runs stay in top_down.csv with status "excluded: diverged run" and are
counted in no k/n and no test (their curves stop early).

For each run and each geometric measure with ``per_layer`` events (RankMe: embed,
block0, ..., ln_final at the events position/variant), layers are ranked by
``floor_step``. Excluded: layers flagged ``constant_by_construction`` (embed at
position "first" is the same token at the same position for every example,
so its RankMe is exactly 1) and, with
``topdown_require_collapse`` (default), layers whose curve did not collapse (a
flat curve's argmin is noise). Depth = index in the network (embed 0,
block i -> i + 1); ln_final gets the depth of the last block: the last block's
output and ln_final are one residual stream before and after the final
LayerNorm, so they are one unit and their mutual order is evidence neither way
(at nano, 2 blocks, that leaves two units after embed: block0 and
block1 = ln_final).

Per run: Kendall tau_b(depth, floor_step); direction "top-down" if tau < 0
(more layer pairs reach their floor output side first than input side first),
"bottom-up" if tau > 0, "tied" if tau = 0 (undetermined: neither, counted
separately, not as "not top-down"). ``top_down_strict``: a top-down run whose
floor_step never increases with depth (ties allowed; False for other determined
runs). Runs with fewer than 2 usable
units or all floor steps tied are "undetermined". first_layer = earliest floor
(ties joined by '='), deepest_layer = smallest floor / init.

Recovery order (columns ``recovery_*``): the same analysis on the layers'
``recovery_step`` (the step a collapsed curve climbs back), over collapsed,
non-constant layers that recovered.

top_down_summary.json: per measure (floor order, and ``recovery``), overall and
by size, task and difficulty class: counts of top-down, bottom-up, tied and
undetermined runs, and an exact two-sided sign test of top-down vs bottom-up
over the determined runs (binomial, p = 1/2; tied and undetermined runs are
not in n). Holm over each family of subgroups (the sizes, the tasks, the
classes of one measure and order); ``verdict`` uses the adjusted p: "top-down"
/ "bottom-up" when p_holm < alpha, else "no significant order". Runs are the
units; ``cells_all`` repeats the overall test with one vote per task x level x
size cell (the sign of the median tau over its seeds) so that replicate seeds
do not count as independent cells.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
from scipy import stats

from .load import (
    DIFFICULTIES,
    run_facts,
    seeds_span,
    size_order,
    study_runs,
    task_order,
)
from .settings import summary_settings
from .stats import binomial_p, holm

COLUMNS = ["run", "task", "level", "size", "seed", "family", "n_params", "difficulty", "acquired", "acquisition_step",
           "diverged", "measure", "position", "variant", "n_layers", "n_used", "units", "excluded_constant",
           "excluded_not_collapsed", "order_by_floor_step", "floor_steps", "first_layer", "deepest_layer",
           "kendall_tau_depth_vs_floor_step", "direction", "top_down", "top_down_strict", "status",
           "recovery_n_used", "recovery_order_by_step", "recovery_kendall_tau_depth_vs_step",
           "recovery_direction", "recovery_status"]
SIGN_TEST = ("exact two-sided sign test (binomial, p = 1/2) of top-down vs bottom-up runs; tied and undetermined"
             " left out")


def depth_key(name: str, position: int, n: int, last_block: int | None = None) -> float:
    """Depth of a layer name; ln_final shares the last block's depth (one residual stream)."""
    if name == "embed":
        return 0.0
    m = re.fullmatch(r"block(\d+)", name)
    if m:
        return 1.0 + int(m.group(1))
    if name == "ln_final":
        return 1.0 + last_block if last_block is not None else 1e6
    return float(position)


def _last_block(names) -> int | None:
    idx = [int(m.group(1)) for n in names if (m := re.fullmatch(r"block(\d+)", n))]
    return max(idx) if idx else None


def _order(per_layer: dict, names: list[str], depth: dict, step_key: str) -> dict:
    """Direction of one ordering (floor or recovery steps) over the usable layers ``names``."""
    used = sorted([n for n in names if per_layer[n].get(step_key) is not None], key=lambda n: depth[n])
    out = {"n_used": len(used), "order": "", "steps": "", "first": None, "tau": None, "direction": None,
           "strict": None, "status": "undetermined: <2 usable layers", "used": used}
    if not used:
        return out
    fs = np.array([per_layer[n][step_key] for n in used], dtype=float)
    d = np.array([depth[n] for n in used], dtype=float)
    groups = {}
    for n, s in sorted(zip(used, fs), key=lambda t: (t[1], -depth[t[0]])):
        groups.setdefault(s, []).append(n)
    out["order"] = " < ".join("=".join(g) for g in groups.values())
    out["steps"] = " ".join(f"{n}:{int(s)}" for n, s in zip(used, fs))
    out["first"] = "=".join(groups[min(groups)])
    if len(used) < 2 or np.ptp(d) == 0:
        out["status"] = "undetermined: <2 usable units"
        return out
    if np.ptp(fs) == 0:
        out["status"] = "undetermined: all steps tied"
        return out
    tau = float(stats.kendalltau(d, fs).statistic)
    i, j = np.triu_indices(len(used), 1)
    deeper = d[j] > d[i]
    strict = bool(np.all(fs[j][deeper] <= fs[i][deeper]))
    direction = "top-down" if tau < 0 else ("bottom-up" if tau > 0 else "tied")
    out.update(tau=tau, direction=direction, strict=strict,
               status="determined" if direction != "tied" else "tied: tau = 0 (undetermined)")
    return out


def run_order(per_layer: dict, require_collapse: bool = True) -> dict:
    """The top-down verdicts (floor and recovery order) for one run's per-layer events."""
    names = list(per_layer)
    last = _last_block(names)
    depth = {n: depth_key(n, i, len(names), last) for i, n in enumerate(names)}
    const = [n for n in names if per_layer[n].get("constant_by_construction")]
    flat = [n for n in names if n not in const and require_collapse and not per_layer[n].get("collapsed")]
    usable = [n for n in names if n not in const and n not in flat]
    fl = _order(per_layer, usable, depth, "floor_step")
    rec = _order(per_layer, [n for n in usable if per_layer[n].get("collapsed")], depth, "recovery_step")
    units = {}
    for n in fl["used"]:
        units.setdefault(depth[n], []).append(n)
    out = {"n_layers": len(names), "n_used": fl["n_used"], "units": " ".join("+".join(v) for v in units.values()),
           "excluded_constant": " ".join(const), "excluded_not_collapsed": " ".join(flat),
           "order_by_floor_step": fl["order"], "floor_steps": fl["steps"], "first_layer": fl["first"],
           "deepest_layer": None, "kendall_tau_depth_vs_floor_step": fl["tau"], "direction": fl["direction"],
           "top_down": None if fl["direction"] in (None, "tied") else fl["direction"] == "top-down",
           "top_down_strict": fl["strict"] if fl["direction"] == "top-down" else
           (False if fl["direction"] is not None else None), "status": fl["status"],
           "recovery_n_used": rec["n_used"], "recovery_order_by_step": rec["order"],
           "recovery_kendall_tau_depth_vs_step": rec["tau"], "recovery_direction": rec["direction"],
           "recovery_status": rec["status"]}
    ratio = {n: per_layer[n]["floor"] / per_layer[n]["init"] for n in fl["used"]
             if per_layer[n].get("floor") is not None and per_layer[n].get("init")}
    if ratio:
        out["deepest_layer"] = min(ratio, key=ratio.get)
    return out


def top_down(pres: list[dict], require_collapse: bool = True) -> pd.DataFrame:
    rows = []
    for pre in study_runs(pres):
        f = run_facts(pre)
        for name, m in pre["measures"].items():
            if not isinstance(m, dict) or not isinstance(m.get("per_layer"), dict) or len(m["per_layer"]) < 2:
                continue
            r = {**f, "measure": name, "position": m.get("position"), "variant": m.get("variant"),
                 **run_order(m["per_layer"], require_collapse)}
            if f["diverged"]:
                r.update(direction=None, top_down=None, top_down_strict=None, status="excluded: diverged run",
                         recovery_direction=None, recovery_status="excluded: diverged run")
            rows.append(r)
    return pd.DataFrame(rows, columns=COLUMNS)


def _kn(df: pd.DataFrame, col: str = "direction") -> dict:
    """Counts and the sign test of one group of runs (diverged runs already removed)."""
    td, bu = int((df[col] == "top-down").sum()), int((df[col] == "bottom-up").sum())
    tied = int((df[col] == "tied").sum())
    out = {"top_down": f"{td}/{td + bu}", "bottom_up": f"{bu}/{td + bu}", "n_determined": td + bu,
           "tied_tau0": tied, "undetermined": int(len(df) - td - bu - tied), "runs": len(df),
           "sign_test_p": binomial_p(td, td + bu)}
    if col == "direction":
        out["top_down_strict"] = f"{int(df['top_down_strict'].eq(True).sum())}/{td + bu}"
    return out


def _verdict(e: dict, p, alpha: float) -> str:
    if p is None or p >= alpha:
        return "no significant order"
    td, bu = int(e["top_down"].split("/")[0]), int(e["bottom_up"].split("/")[0])
    return "top-down" if td > bu else "bottom-up"


def _family(groups: dict, alpha: float) -> dict:
    """Holm over one family of subgroup sign tests (in place)."""
    keys = list(groups)
    ps = [groups[k]["sign_test_p"] for k in keys]
    for k, ph in zip(keys, holm(ps)):
        groups[k].update(p_holm=ph, verdict=_verdict(groups[k], ph, alpha))
    return groups


def _cells(df: pd.DataFrame, tau_col: str) -> dict:
    """The overall sign test with one vote per cell: sign of the median tau over its seeds."""
    d = df[df[tau_col].notna()]
    med = d.groupby(["task", "level", "size"])[tau_col].median()
    n_seeds = d.groupby(["task", "level", "size"]).size()
    td, bu = int((med < 0).sum()), int((med > 0).sum())
    return {"units": "task x level x size cells (sign of the median tau over the cell's determined seeds)",
            "top_down": f"{td}/{td + bu}", "bottom_up": f"{bu}/{td + bu}", "tied_median_tau0": int((med == 0).sum()),
            "seeds_per_cell": seeds_span(n_seeds), "sign_test_p": binomial_p(td, td + bu)}


def _summary(g: pd.DataFrame, col: str, tau_col: str, alpha: float) -> dict:
    sizes = size_order(g["size"], dict(zip(g["size"], g["n_params"])))
    allg = _kn(g, col)
    allg.update(p_holm=allg["sign_test_p"], verdict=_verdict(allg, allg["sign_test_p"], alpha))
    return {
        "test": SIGN_TEST, "all": allg, "cells_all": _cells(g, tau_col),
        "by_size": _family({s: _kn(g[g["size"] == s], col) for s in sizes}, alpha),
        "by_task": _family({t: _kn(g[g["task"] == t], col) for t in task_order(g["task"])}, alpha),
        "by_difficulty": _family({d: _kn(g[g["difficulty"] == d], col) for d in DIFFICULTIES
                                  if (g["difficulty"] == d).any()}, alpha),
        "holm_families": "the sizes, the tasks, the difficulty classes (each a family); 'all' is one test",
    }


def top_down_summary(td: pd.DataFrame, st: dict | None = None) -> dict:
    """Per measure: counts, sign tests and Holm-adjusted verdicts for the floor order (top level)
    and the recovery order (``recovery``); see module doc."""
    alpha = (st or summary_settings())["alpha"]
    out = {}
    for measure, g0 in td.groupby("measure", sort=False):
        g = g0[~g0["diverged"].astype(bool)]
        det = g[g["status"] == "determined"]
        out[measure] = {
            **_summary(g, "direction", "kendall_tau_depth_vs_floor_step", alpha),
            "n_diverged_runs_excluded": int(g0["diverged"].astype(bool).sum()),
            "units_note": "the last block and ln_final count as one unit (one residual stream before and after "
                          "the final LayerNorm; at nano: block0 vs block1+ln_final)",
            "first_layer_counts": {k: int(v) for k, v in det["first_layer"].value_counts().items()},
            "deepest_layer_counts": {k: int(v) for k, v in g["deepest_layer"].dropna().value_counts().items()},
            "recovery": _summary(g, "recovery_direction", "recovery_kendall_tau_depth_vs_step", alpha),
        }
    return out
