"""Scale invariance: do per-task floors and acquisition order hold across sizes?

Units and cells. A unit is a task within a curriculum level (toy grid) or a
benchmark (Pythia); a cell is unit x size. Replicate seeds are nested in their
cell: every statistic here uses one value per cell, the median over its seeds
(n counts cells; ``seeds_per_cell`` shows how many seeds each median has).
Shuffled-label control runs are left out (they are controls: rates.control_rows)
and so are diverged runs (missing, not censored).

Headline: for sizes a and b, Spearman rho over the tasks *within one level*
(n = tasks, up to 8) with an exact two-sided permutation p (stats.py: exact for
n <= 10), per level. Levels are not pooled for the headline: the three levels
differ in floors and acquisition steps, so a level effect alone would give a
pooled rho near 0.8 with no task effect at all. Holm family: the per-level
correlations of one measure and one size pair (``p`` raw, ``p_holm`` adjusted;
``verdict`` uses p_holm: "same order" if rho > 0 and p_holm < alpha, "reversed
order" if rho < 0 and p_holm < alpha, else "no significant correlation").

Secondary (``pooled_levels``): rho over task_level units pooled across levels,
with p from permutations of the pairing *within* each level only (Monte Carlo,
``n_resamples``, ``seed``), so the level effect is part of the null. Its rho is
inflated by level differences by construction; read the p, not the rho.

* floors[measure]          cell floors (headline layer; rising measures, e.g.
                           hessian_top and llc: their peaks) at a vs b
* floors_by_task[measure]  one value per task: median cell floor over its
                           levels (n = tasks), exact p; descriptive check
                           (only when there is more than one level)
* acquisition_order        acquisition steps at a vs b, two versions:
                           censored_last - a cell not acquired (median over its
                           seeds, with unacquired seeds as +inf, is +inf) is
                           ranked last, tied with the other censored cells;
                           dropped - only cells acquired at both sizes.

The top-level ``matrix`` of each entry (for the rho_matrix figure) is the
pooled_levels one when there are several levels, else the single level's;
``matrix_source`` says which. Pythia: per-run precursor.json files whose size is
not a toy size form their own family (one level, "-"); ``pythia_scale.json``
(Pythia branch) is read when present, in one of the formats listed in
``pythia_records``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from .load import (
    extreme,
    family,
    geometric_measures,
    is_control,
    level_order,
    per_cell,
    seed_of,
    seeds_span,
    size_order,
    step_or_none,
    task_order,
)
from .stats import holm, spearman_exact, spearman_stratified

UNIT_COLUMNS = ["family", "size", "n_params", "level", "task", "unit", "seed", "run", "measure", "value", "acquired"]
CENSORED = 1e300            # stands in for "not acquired": ranked last, all censored cells tied
HEADLINE_TEST = ("Spearman rho over tasks within one level (one value per cell = median over seeds), exact "
                 "two-sided permutation p for n <= 10; Holm over the levels of one measure and size pair")
POOLED_TEST = ("Spearman rho over task_level units pooled across levels; two-sided p from permutations of the "
               "pairing within each level (Monte Carlo)")


def unit_table(pres: list[dict]) -> pd.DataFrame:
    """Long table, one row per study run and quantity (UNIT_COLUMNS): measure 'acquisition'
    (value = step, +inf when never acquired) or a geometric measure (floor, or peak of a
    rising measure). Control runs give no rows; a diverged run gives one acquisition row with
    value NaN (missing, not censored), so its size is still listed."""
    rows = []
    for p in pres:
        if is_control(p):
            continue
        base = {"family": family(p["size"]), "size": p["size"], "n_params": p.get("n_params"),
                "level": p["level"], "task": p["task"], "unit": f"{p['task']}_{p['level']}",
                "seed": seed_of(p), "run": p["run"]}
        if p.get("diverged"):
            rows.append({**base, "measure": "acquisition", "value": np.nan, "acquired": False})
            continue
        acq = step_or_none(p.get("acquisition_step")) if p["acquired"] else None
        rows.append({**base, "measure": "acquisition", "value": float(acq) if acq is not None else np.inf,
                     "acquired": acq is not None})
        for name, m in geometric_measures(p).items():
            fl = extreme(m)[1]                                  # floor, or peak of a rising measure
            rows.append({**base, "measure": name, "value": float(fl) if fl is not None else np.nan,
                         "acquired": p["acquired"]})
    return pd.DataFrame(rows, columns=UNIT_COLUMNS)


def pythia_records(obj) -> pd.DataFrame:
    """Accepted pythia_scale.json shapes (one row per model x benchmark):

    * the Pythia branch's own (geoanatomy.pythia.scale): {"per_model": {model:
      {benchmark: {rankme_floor, acquisition_step, ...}}}, "models": [{name, n_params}]};
    * a list of records, or {"records": [...]} / {"rows": [...]}: each with
      model|size, benchmark|task, floor|rankme_floor (or measures.rankme.floor),
      acquisition_step, optionally n_params;
    * {"models": {model: {"benchmarks": {bench: record}}}} or {model: {bench: record}}.
    """
    recs = []
    if isinstance(obj, dict) and isinstance(obj.get("per_model"), dict):     # geoanatomy.pythia.scale format
        n_params = {m.get("name"): m.get("n_params") for m in obj.get("models") or [] if isinstance(m, dict)}
        obj = {"models": {name: {"n_params": n_params.get(name), "benchmarks": benches}
                          for name, benches in obj["per_model"].items()}}
    if isinstance(obj, dict) and isinstance(obj.get("records") or obj.get("rows"), list):
        obj = obj.get("records") or obj.get("rows")
    if isinstance(obj, list):
        recs = [r for r in obj if isinstance(r, dict)]
    elif isinstance(obj, dict):
        models = obj.get("models", obj)
        for model, mv in (models.items() if isinstance(models, dict) else []):
            if not isinstance(mv, dict):
                continue
            benches = mv.get("benchmarks", mv)
            for bench, r in (benches.items() if isinstance(benches, dict) else []):
                if isinstance(r, dict):
                    recs.append({"model": model, "benchmark": bench, "n_params": mv.get("n_params"), **r})
    rows = []
    for r in recs:
        size = r.get("model", r.get("size"))
        unit = r.get("benchmark", r.get("task"))
        fl = r.get("rankme_floor_norm", r.get("floor", r.get("rankme_floor")))   # cap-normalised first
        if fl is None and isinstance(r.get("measures"), dict):
            fl = (r["measures"].get("rankme") or {}).get("floor")
        if size is None or unit is None:
            continue
        base = {"family": "pythia", "size": str(size), "n_params": r.get("n_params"), "level": "-",
                "task": str(unit), "unit": str(unit), "seed": 0, "run": f"pythia-{size}/{unit}"}
        acq = step_or_none(r.get("acquisition_step"))
        rows.append({**base, "measure": "acquisition", "value": float(acq) if acq is not None else np.inf,
                     "acquired": acq is not None})
        if fl is not None:
            rows.append({**base, "measure": "rankme", "value": float(fl), "acquired": acq is not None})
    return pd.DataFrame(rows, columns=UNIT_COLUMNS)


def _verdict(rho, p, alpha) -> str:
    if rho is None or p is None or p >= alpha:
        return "no significant correlation"
    return "same order" if rho > 0 else "reversed order"


def pair_correlations(wide: pd.DataFrame, seeds: pd.DataFrame, sizes: list[str], st: dict, mode: str = "plain",
                      strata: bool = False) -> dict:
    """rho/p for every size pair from a units x sizes table of cell values (NaN = no usable
    run; +inf = censored, i.e. not acquired). ``seeds``: the matching n_seeds table.
    mode: 'plain' (floors), 'censored_last' (+inf ranked last, tied) or 'dropped' (cells
    with +inf left out). strata: the index's first level is the stratum (within-level
    permutation, pooled_levels)."""
    k = len(sizes)
    rho, p, n = np.full((k, k), np.nan), np.full((k, k), np.nan), np.zeros((k, k), int)
    pairs = []
    for i in range(k):
        for j in range(i + 1, k):
            a, b = sizes[i], sizes[j]
            sub = wide[[a, b]].dropna()
            entry = {"a": a, "b": b}
            if mode == "dropped":
                fin = np.isfinite(sub[a]) & np.isfinite(sub[b])
                entry["n_excluded_unacquired"] = int((~fin).sum())
                sub = sub[fin]
            elif mode == "censored_last":
                entry["n_censored_ranked_last"] = int((~(np.isfinite(sub[a]) & np.isfinite(sub[b]))).sum())
                sub = sub.replace([np.inf], CENSORED)
            entry["n_missing"] = int(len(wide) - len(wide[[a, b]].dropna()))
            if strata:
                r = spearman_stratified(sub[a], sub[b], sub.index.get_level_values(0).astype(str),
                                        st["n_resamples"], st["seed"])
            else:
                r = spearman_exact(sub[a], sub[b], st["exact_max_n"], st["n_resamples"], st["seed"])
            sd = seeds.reindex(index=sub.index)[[a, b]]
            units = [" ".join(map(str, u)) if isinstance(u, tuple) else str(u) for u in sub.index]
            entry.update({**r.record(), "seeds_per_cell": seeds_span(sd.to_numpy().ravel()), "units": units})
            pairs.append(entry)
            n[i, j] = n[j, i] = r.n
            if r.statistic is not None:
                rho[i, j] = rho[j, i] = r.statistic
                p[i, j] = p[j, i] = r.p
    for i in range(k):
        n[i, i] = int(wide[sizes[i]].notna().sum())
    rhos = [e["rho"] for e in pairs if e["rho"] is not None]
    clean = lambda a: [[None if not np.isfinite(v) else float(v) for v in row] for row in a]
    return {"n_units": len(wide), "pairs": pairs,
            "matrix": {"sizes": sizes, "rho": clean(rho), "p": clean(p), "n": n.tolist()},
            "median_rho": float(np.median(rhos)) if rhos else None,
            "n_pairs_with_rho": len(rhos),
            "smallest_vs_largest": next((e for e in pairs if e["a"] == sizes[0] and e["b"] == sizes[-1]), None)}


def _holm_levels(by_level: dict, alpha: float) -> None:
    """Holm over the levels of each size pair (in place): p_holm, holm_family, verdict."""
    levels = list(by_level)
    if not levels:
        return
    for i in range(len(by_level[levels[0]]["pairs"])):
        ps = [by_level[lv]["pairs"][i]["p"] for lv in levels]
        m = sum(v is not None for v in ps)
        for lv, ph in zip(levels, holm(ps)):
            e = by_level[lv]["pairs"][i]
            e.update(p_holm=ph, holm_family=f"{m} level(s) of this size pair", verdict=_verdict(e["rho"], ph, alpha))
    for lv in levels:
        mat = by_level[lv]["matrix"]
        k = len(mat["sizes"])
        ph = [[None] * k for _ in range(k)]
        for e in by_level[lv]["pairs"]:
            i, j = mat["sizes"].index(e["a"]), mat["sizes"].index(e["b"])
            ph[i][j] = ph[j][i] = e["p_holm"]
        mat["p_holm"] = ph


def _tables(cells: pd.DataFrame, index, sizes):
    wide = cells.set_index(index + ["size"])["value"].unstack("size").reindex(columns=sizes)
    seeds = cells.set_index(index + ["size"])["n_seeds"].unstack("size").reindex(columns=sizes)
    return wide, seeds


def _by_level_and_pooled(cells: pd.DataFrame, sizes: list[str], levels: list[str], st: dict, mode: str,
                         units_note: str) -> dict:
    alpha = st["alpha"]
    by_level = {}
    for lv in levels:
        c = cells[cells["level"] == lv]
        if c.empty:
            continue
        wide, seeds = _tables(c, ["task"], sizes)
        wide = wide.reindex(task_order(wide.index))
        by_level[lv] = {"units": "task", "test": HEADLINE_TEST, **pair_correlations(wide, seeds, sizes, st, mode)}
    _holm_levels(by_level, alpha)
    out = {"units": units_note, "cell": "unit x size; value = median over the cell's seeds", "headline": "by_level",
           "by_level": by_level}
    if len(by_level) > 1:
        wide, seeds = _tables(cells, ["level", "task"], sizes)
        pooled = {"units": "task_level (pooled over levels; secondary)", "test": POOLED_TEST,
                  **pair_correlations(wide, seeds, sizes, st, mode, strata=True)}
        for e in pooled["pairs"]:
            e.update(p_holm=None, verdict=_verdict(e["rho"], e["p"], alpha))
        out["pooled_levels"] = pooled
        out.update(matrix=pooled["matrix"], matrix_source="pooled_levels (rho pooled; p within-level permutation)")
    elif by_level:
        lv = next(iter(by_level))
        out.update(matrix=by_level[lv]["matrix"], matrix_source=f"by_level[{lv!r}]")
    else:
        out.update(matrix={"sizes": sizes, "rho": [[None] * len(sizes)] * len(sizes),
                           "p": [[None] * len(sizes)] * len(sizes), "n": [[0] * len(sizes)] * len(sizes)},
                   matrix_source="no cells")
    out["headline_smallest_vs_largest"] = {
        lv: {k: (v["smallest_vs_largest"] or {}).get(k) for k in ("a", "b", "n", "rho", "p", "p_holm", "verdict",
                                                                  "seeds_per_cell")}
        for lv, v in by_level.items()}
    return out


def family_correlations(units: pd.DataFrame, st: dict) -> dict:
    """Every cross-size correlation of one family (module doc)."""
    sizes = size_order(units["size"], dict(zip(units["size"], units["n_params"])))
    levels = level_order(units["level"])
    cells = per_cell(units, ["family", "level", "task", "size", "measure"], "value")
    n_cells = cells.drop_duplicates(["level", "task", "size"])
    unit_kind = "task within level" if units["family"].iloc[0] == "toy" else "benchmark"
    out = {"sizes": sizes, "levels": levels, "n_units": int(units["unit"].nunique()),
           "n_cells": len(n_cells), "seeds_per_cell": seeds_span(n_cells["n_seeds"]),
           "n_runs": int(units.loc[units["value"].notna(), "run"].nunique()), "floors": {}, "floors_by_task": {}}
    for measure in [m for m in dict.fromkeys(units["measure"]) if m != "acquisition"]:
        g = cells[cells["measure"] == measure]
        if g.empty:
            continue
        out["floors"][measure] = _by_level_and_pooled(g, sizes, levels, st, "plain", unit_kind)
        if len(levels) > 1:
            bt = g.groupby(["task", "size"], sort=False).agg(value=("value", "median"), n_seeds=("n_seeds", "sum"))
            wide, seeds = _tables(bt.reset_index(), ["task"], sizes)
            wide = wide.reindex(task_order(wide.index))
            res = pair_correlations(wide, seeds, sizes, st)
            for e in res["pairs"]:
                e.update(verdict=_verdict(e["rho"], e["p"], st["alpha"]))
            out["floors_by_task"][measure] = {
                "units": "task (median cell floor over its levels; seeds_per_cell = runs in the task x size)",
                "test": "Spearman rho over tasks, exact two-sided permutation p (descriptive check)", **res}
    g = cells[cells["measure"] == "acquisition"]
    out["acquisition_order"] = {
        "censored_last": _by_level_and_pooled(g, sizes, levels, st, "censored_last",
                                              f"{unit_kind}; not acquired = ranked last (tied)"),
        "dropped": _by_level_and_pooled(g, sizes, levels, st, "dropped", f"{unit_kind}; acquired at both sizes only"),
    }
    d = out["acquisition_order"]["dropped"]
    out["acquisition_order"].update(units="units acquired at both sizes (version 'dropped')", matrix=d["matrix"],
                                    matrix_source="dropped: " + d["matrix_source"])
    return out


def read_pythia_file(path) -> tuple[pd.DataFrame, dict]:
    info = {"path": str(path), "status": "absent"}
    if path is None or not Path(path).exists():
        return pd.DataFrame(), info
    try:
        obj = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        info.update(status="unreadable", note=str(e))
        return pd.DataFrame(), info
    df = pythia_records(obj)
    if df.empty:
        info.update(status="unrecognised format (see analysis.scale.pythia_records)",
                    top_level_keys=sorted(obj)[:30] if isinstance(obj, dict) else type(obj).__name__)
        reported = {k: v for k, v in obj.items() if isinstance(obj, dict) and any(s in k.lower() for s in
                                                                                  ("rho", "spearman",
                                                                                   "corr"))} if isinstance(obj,
                                                                                                           dict) else {}
        if reported:
            info["reported_by_pythia_branch"] = reported
    else:
        info.update(status="used", n_records=len(df))
        if isinstance(obj, dict) and isinstance(obj.get("pairs"), list):   # the branch's own rho, for cross-checks
            info["reported_by_pythia_branch"] = [{k: e.get(k) for k in ("a", "b", "quantity", "n", "rho", "p_value")}
                                                 for e in obj["pairs"] if isinstance(e, dict)]
    return df, info


def scale_invariance(pres: list[dict], st: dict, pythia_path=None) -> dict:
    units = unit_table(pres)
    py, info = read_pythia_file(pythia_path)
    if not py.empty:
        have = set(units.loc[units["family"] == "pythia", "size"])   # per-run Pythia results win
        units = pd.concat([units, py[~py["size"].isin(have)]], ignore_index=True)
    fams = {}
    for fam in ["toy", "pythia"]:
        u = units[units["family"] == fam]
        if u["size"].nunique() >= 1 and len(u):
            fams[fam] = family_correlations(u, st)
    return {"method": __doc__.strip(), "test": {"headline": HEADLINE_TEST, "secondary": POOLED_TEST},
            "settings": {k: st[k] for k in ("exact_max_n", "n_resamples", "seed", "alpha") if k in st},
            "n_runs": len(pres), "n_control_runs_left_out": sum(is_control(p) for p in pres),
            "n_diverged_runs_left_out": sum(bool(p.get("diverged")) and not is_control(p) for p in pres),
            "families": fams, "pythia_file": info}
