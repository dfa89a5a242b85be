"""Top-down propagation: the order in which layers reach their floors.

For each run and each geometric measure with ``per_layer`` events (RankMe: embed,
block0, ..., ln_final at the events position/variant), layers are ranked by
``floor_step``. Excluded: layers flagged ``constant_by_construction`` (embed at
position "first" is the same token at the same position for every example,
so its RankMe is exactly 1) and, with
``topdown_require_collapse`` (default), layers whose curve did not collapse (a
flat curve's argmin is noise). Depth = index in the network (embed 0,
block i -> i + 1, ln_final last).

top_down: Kendall tau_b(depth, floor_step) < 0, i.e. more layer pairs reach
their floor output side first than input side first; ``top_down_strict``:
floor_step never increases with depth (ties allowed, not all tied). Runs with
fewer than 2 usable layers or all floor steps tied are "undetermined" and
count in neither k nor n. first_layer = earliest floor (ties joined by '='),
deepest_layer = smallest floor / init.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
from scipy import stats

from .load import DIFFICULTIES, run_facts, size_order, task_order

COLUMNS = ["run", "task", "level", "size", "family", "n_params", "difficulty", "acquired", "acquisition_step",
           "measure", "position", "variant", "n_layers", "n_used", "excluded_constant", "excluded_not_collapsed",
           "order_by_floor_step", "floor_steps", "first_layer", "deepest_layer", "kendall_tau_depth_vs_floor_step",
           "top_down", "top_down_strict", "status"]


def depth_key(name: str, position: int, n: int) -> float:
    if name == "embed":
        return 0.0
    m = re.fullmatch(r"block(\d+)", name)
    if m:
        return 1.0 + int(m.group(1))
    if name == "ln_final":
        return 1e6
    return float(position)


def run_order(per_layer: dict, require_collapse: bool = True) -> dict:
    """The top-down verdict for one run's per-layer curve events (see module doc)."""
    names = list(per_layer)
    depth = {n: depth_key(n, i, len(names)) for i, n in enumerate(names)}
    const = [n for n in names if per_layer[n].get("constant_by_construction")]
    flat = [n for n in names if n not in const and require_collapse and not per_layer[n].get("collapsed")]
    used = [n for n in names if n not in const and n not in flat and per_layer[n].get("floor_step") is not None]
    used.sort(key=lambda n: depth[n])
    out = {"n_layers": len(names), "n_used": len(used), "excluded_constant": " ".join(const),
           "excluded_not_collapsed": " ".join(flat), "order_by_floor_step": "", "floor_steps": "",
           "first_layer": None, "deepest_layer": None, "kendall_tau_depth_vs_floor_step": None,
           "top_down": None, "top_down_strict": None, "status": "undetermined"}
    if not used:
        return out
    fs = np.array([per_layer[n]["floor_step"] for n in used], dtype=float)
    groups = {}
    for n, s in sorted(zip(used, fs), key=lambda t: (t[1], -depth[t[0]])):
        groups.setdefault(s, []).append(n)
    out["order_by_floor_step"] = " < ".join("=".join(g) for g in groups.values())
    out["floor_steps"] = " ".join(f"{n}:{int(s)}" for n, s in zip(used, fs))
    out["first_layer"] = "=".join(groups[min(groups)])
    ratio = {n: per_layer[n]["floor"] / per_layer[n]["init"] for n in used
             if per_layer[n].get("floor") is not None and per_layer[n].get("init")}
    if ratio:
        out["deepest_layer"] = min(ratio, key=ratio.get)
    if len(used) < 2 or np.ptp(fs) == 0:
        out["status"] = "undetermined: <2 usable layers" if len(used) < 2 else "undetermined: all floor steps tied"
        return out
    tau = float(stats.kendalltau(np.arange(len(used)), fs).statistic)
    out.update(kendall_tau_depth_vs_floor_step=tau, top_down=bool(tau < 0),
               top_down_strict=bool(np.all(np.diff(fs) <= 0)), status="determined")
    return out


def top_down(pres: list[dict], require_collapse: bool = True) -> pd.DataFrame:
    rows = []
    for pre in pres:
        f = run_facts(pre)
        for name, m in pre["measures"].items():
            if not isinstance(m, dict) or not isinstance(m.get("per_layer"), dict) or len(m["per_layer"]) < 2:
                continue
            rows.append({**f, "measure": name, "position": m.get("position"), "variant": m.get("variant"),
                         **run_order(m["per_layer"], require_collapse)})
    return pd.DataFrame(rows, columns=COLUMNS)


def _kn(df: pd.DataFrame) -> dict:
    det = df[df["status"] == "determined"]
    return {"top_down": f"{int(det['top_down'].sum())}/{len(det)}",
            "top_down_strict": f"{int(det['top_down_strict'].sum())}/{len(det)}",
            "undetermined": int(len(df) - len(det)), "runs": int(len(df))}


def top_down_summary(td: pd.DataFrame) -> dict:
    """k/n top-down counts per measure: overall, per size, per task, per difficulty class."""
    out = {}
    for measure, g in td.groupby("measure", sort=False):
        out[measure] = {
            "all": _kn(g),
            "by_size": {s: _kn(g[g["size"] == s]) for s in size_order(g["size"], dict(zip(g["size"], g["n_params"])))},
            "by_task": {t: _kn(g[g["task"] == t]) for t in task_order(g["task"])},
            "by_difficulty": {d: _kn(g[g["difficulty"] == d]) for d in DIFFICULTIES if (g["difficulty"] == d).any()},
            "first_layer_counts": {k: int(v) for k, v in g.loc[g["status"] == "determined", "first_layer"].value_counts().items()},
            "deepest_layer_counts": {k: int(v) for k, v in g["deepest_layer"].dropna().value_counts().items()},
        }
    return out
