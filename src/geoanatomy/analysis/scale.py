"""Scale invariance: Spearman rho between every pair of sizes, exact permutation p.

Units are (task, level) pairs ("task_level") in the toy grid, benchmarks for
Pythia. For sizes a and b:

* floors[measure]          rho of the per-unit floors (headline layer) at a vs b;
                           diverged runs and missing floors dropped (rising
                           measures, e.g. hessian_top and llc: their peaks)
* floors_by_task[measure]  the same with one value per task (median floor over
                           its levels): n = tasks
* acquisition_order        rho of the acquisition steps of the units acquired at
                           both sizes (units never acquired at either are left
                           out and counted in n_excluded_unacquired)

p-values are exact over all n! pairings for n <= exact_max_n (smallest
two-sided p at n = 6 is 2/720), else scipy.stats.permutation_test (stats.py).
Pythia: per-run precursor.json files whose size is not a toy size form their
own family; ``pythia_scale.json`` (Pythia branch) is read when present, in one
of the formats listed in ``pythia_records``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from .load import extreme, family, geometric_measures, size_order, step_or_none
from .stats import spearman_exact


def unit_table(pres: list[dict]) -> pd.DataFrame:
    """Long table: family, size, n_params, unit, task, measure ('acquisition' or a measure), value."""
    rows = []
    for p in pres:
        base = {"family": family(p["size"]), "size": p["size"], "n_params": p.get("n_params"),
                "unit": f"{p['task']}_{p['level']}", "task": p["task"]}
        if p["acquired"] and not p.get("diverged"):
            rows.append({**base, "measure": "acquisition", "value": float(p["acquisition_step"]),
                         "acquired": True})
        else:
            rows.append({**base, "measure": "acquisition", "value": np.nan, "acquired": False})
        if p.get("diverged"):
            continue
        for name, m in geometric_measures(p).items():
            fl = extreme(m)[1]                                  # floor, or peak of a rising measure
            rows.append({**base, "measure": name, "value": float(fl) if fl is not None else np.nan, "acquired": p["acquired"]})
    return pd.DataFrame(rows, columns=["family", "size", "n_params", "unit", "task", "measure", "value", "acquired"])


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
        n_params = {m.get("name"): m.get("n_params") for m in obj.get("models", []) if isinstance(m, dict)}
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
        fl = r.get("floor", r.get("rankme_floor"))
        if fl is None and isinstance(r.get("measures"), dict):
            fl = (r["measures"].get("rankme") or {}).get("floor")
        if size is None or unit is None:
            continue
        base = {"family": "pythia", "size": str(size), "n_params": r.get("n_params"), "unit": str(unit), "task": str(unit)}
        acq = step_or_none(r.get("acquisition_step"))
        rows.append({**base, "measure": "acquisition", "value": float(acq) if acq is not None else np.nan,
                     "acquired": acq is not None})
        if fl is not None:
            rows.append({**base, "measure": "rankme", "value": float(fl), "acquired": acq is not None})
    return pd.DataFrame(rows, columns=["family", "size", "n_params", "unit", "task", "measure", "value", "acquired"])


def pair_correlations(wide: pd.DataFrame, sizes: list[str], st: dict, excluded: dict | None = None) -> dict:
    """rho/p for every size pair from a units x sizes table (NaN = missing)."""
    k = len(sizes)
    rho, p, n = np.full((k, k), np.nan), np.full((k, k), np.nan), np.zeros((k, k), int)
    pairs = []
    for i in range(k):
        for j in range(i + 1, k):
            a, b = sizes[i], sizes[j]
            sub = wide[[a, b]].dropna()
            r = spearman_exact(sub[a], sub[b], st["exact_max_n"], st["n_resamples"], st["seed"])
            entry = {"a": a, "b": b, **r, "units": list(sub.index)}
            if excluded is not None:
                entry["n_excluded_unacquired"] = int(len(wide[[a, b]]) - len(sub))
            pairs.append(entry)
            n[i, j] = n[j, i] = r["n"]
            if r["rho"] is not None:
                rho[i, j] = rho[j, i] = r["rho"]
                p[i, j] = p[j, i] = r["p"]
    for i in range(k):
        n[i, i] = int(wide[sizes[i]].notna().sum())
    rhos = [e["rho"] for e in pairs if e["rho"] is not None]
    clean = lambda a: [[None if not np.isfinite(v) else float(v) for v in row] for row in a]  # noqa: E731
    return {"pairs": pairs, "matrix": {"sizes": sizes, "rho": clean(rho), "p": clean(p), "n": n.tolist()},
            "median_rho": float(np.median(rhos)) if rhos else None,
            "n_pairs_with_rho": len(rhos),
            "smallest_vs_largest": next((e for e in pairs if e["a"] == sizes[0] and e["b"] == sizes[-1]), None)}


def family_correlations(units: pd.DataFrame, st: dict) -> dict:
    sizes = size_order(units["size"], dict(zip(units["size"], units["n_params"])))
    out = {"sizes": sizes, "n_units": int(units["unit"].nunique()), "floors": {}, "floors_by_task": {}}
    for measure in [m for m in dict.fromkeys(units["measure"]) if m != "acquisition"]:
        g = units[units["measure"] == measure]
        wide = g.pivot_table(index="unit", columns="size", values="value", aggfunc="first").reindex(columns=sizes)
        out["floors"][measure] = {"units": "task_level" if g["family"].iloc[0] == "toy" else "benchmark",
                                  **pair_correlations(wide, sizes, st)}
        if g["family"].iloc[0] == "toy":
            bt = g.pivot_table(index="task", columns="size", values="value", aggfunc="median").reindex(columns=sizes)
            out["floors_by_task"][measure] = {"units": "task (median floor over its levels)",
                                              **pair_correlations(bt, sizes, st)}
    g = units[units["measure"] == "acquisition"]
    wide = g.pivot_table(index="unit", columns="size", values="value", aggfunc="first", dropna=False).reindex(columns=sizes)
    out["acquisition_order"] = {"units": "units acquired at both sizes", **pair_correlations(wide, sizes, st, excluded={})}
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
        reported = {k: v for k, v in obj.items() if isinstance(obj, dict) and any(s in k.lower() for s in ("rho", "spearman", "corr"))} if isinstance(obj, dict) else {}
        if reported:
            info["reported_by_pythia_branch"] = reported
    else:
        info.update(status="used", n_records=int(len(df)))
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
    return {"method": __doc__.strip(), "settings": {k: st[k] for k in ("exact_max_n", "n_resamples", "seed")},
            "n_runs": len(pres), "families": fams, "pythia_file": info}
