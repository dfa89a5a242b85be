"""The per-run x per-measure long table and ``precursor_rates.csv``.

Geometric measures are read as the events job wrote them (``transition_step``,
``precursor``, ``gap_steps`` of the headline layer). Two *reference measures*
come from the same precursor.json so every claim is judged against what the
loss curve already tells:

* ``loss_plateau_exit``  step the training loss leaves its early plateau
  (``loss_plateau_exit_step``)
* ``logprob_emergence``  step the answer log-probability beats the input-blind
  predictor (``logprob_emergence_step``)

For a reference, precursor = acquired and t_ref < t_acq and
t_acq - t_ref >= precursor_min_gap_frac * t_acq (the run's own
``events_settings``), i.e. the geometric rule without the collapse condition.
gap_steps = t_acq - t_transition whenever both exist (negative: the event lags).
transitioned = collapsed (falling measures) or risen (``direction: rise``: hessian_top,
llc); extreme = floor or peak (load.extreme) with its value and step.
coincides_plateau_exit = |log10(t_tr + 1) - log10(t_exit + 1)| <= coincide_log10_tol.
"""
from __future__ import annotations

import pandas as pd

from .load import DIFFICULTIES, REFERENCES, extreme, geometric_measures, run_facts, size_order, step_or_none
from .stats import log_steps_close, quantiles

ROW_COLUMNS = ["run", "task", "level", "size", "family", "n_params", "steps", "difficulty", "acquired",
               "diverged", "acquisition_step", "measure", "kind", "layer", "position", "variant",
               "direction", "transition", "transition_step", "precursor", "gap_steps", "transitioned", "init",
               "extreme", "extreme_value", "extreme_step", "loss_plateau_exit_step", "coincides_plateau_exit"]


def _ref_precursor(t_ref, t_acq, min_gap_frac) -> bool:
    return bool(t_ref is not None and t_acq is not None and t_ref < t_acq and (t_acq - t_ref) >= min_gap_frac * t_acq)


def measure_rows(pres: list[dict], tol_log10: float) -> pd.DataFrame:
    """One row per run and measure (geometric measures present in that run + the references)."""
    rows = []
    for pre in pres:
        f = run_facts(pre)
        t_acq, t_exit = f["acquisition_step"], step_or_none(pre.get("loss_plateau_exit_step"))
        for name, m in geometric_measures(pre).items():
            kind, xv, xs = extreme(m)
            t_tr = step_or_none(m.get("transition_step", m.get("floor_step")))
            gap = m.get("gap_steps")
            gap = step_or_none(gap) if gap is not None else (t_acq - t_tr if t_acq is not None and t_tr is not None else None)
            rows.append({**f, "measure": name, "kind": "geometric", "layer": m.get("layer"),
                         "position": m.get("position"), "variant": m.get("variant"),
                         "transition": m.get("transition", "floor"), "transition_step": t_tr,
                         "precursor": bool(m.get("precursor", False)) and f["acquired"], "gap_steps": gap,
                         "direction": m.get("direction", "collapse"),
                         "transitioned": m.get("risen") if m.get("direction") == "rise" else m.get("collapsed"),
                         "init": m.get("init"), "extreme": kind, "extreme_value": xv, "extreme_step": xs,
                         "loss_plateau_exit_step": t_exit,
                         "coincides_plateau_exit": log_steps_close(t_tr, t_exit, tol_log10)})
        frac = float((pre.get("events_settings") or {}).get("precursor_min_gap_frac", 0.25))
        for name, key in REFERENCES.items():
            t_ref = step_or_none(pre.get(key))
            rows.append({**f, "measure": name, "kind": "reference", "layer": "output", "position": "answer",
                         "variant": "", "transition": key, "transition_step": t_ref,
                         "precursor": _ref_precursor(t_ref, t_acq, frac),
                         "gap_steps": t_acq - t_ref if t_acq is not None and t_ref is not None else None,
                         "direction": "", "transitioned": None, "init": None, "extreme": None,
                         "extreme_value": None, "extreme_step": None,
                         "loss_plateau_exit_step": t_exit,
                         "coincides_plateau_exit": None if name == "loss_plateau_exit"
                         else log_steps_close(t_ref, t_exit, tol_log10)})
    return pd.DataFrame(rows, columns=ROW_COLUMNS)


def ordered_measures(rows: pd.DataFrame) -> list[str]:
    geo = [m for m in dict.fromkeys(rows.loc[rows["kind"] == "geometric", "measure"])]
    geo = sorted(geo, key=lambda n: (n != "rankme", geo.index(n)))
    return geo + [m for m in REFERENCES if m in set(rows["measure"])]


def _one(values):
    vals = [v for v in dict.fromkeys(values) if v is not None and v == v]
    return vals[0] if len(vals) == 1 else ("mixed" if vals else None)


def precursor_rates(rows: pd.DataFrame) -> pd.DataFrame:
    """Per measure x difficulty class x size (and size 'all'): k/n precursors and the gap."""
    out = []
    sizes = size_order(rows["size"], dict(zip(rows["size"], rows["n_params"])))
    for measure in ordered_measures(rows):
        rm = rows[rows["measure"] == measure]
        for diff in DIFFICULTIES:
            rd = rm[rm["difficulty"] == diff]
            for size in sizes + ["all"]:
                r = rd if size == "all" else rd[rd["size"] == size]
                if size != "all" and not len(r):
                    continue
                q = quantiles(r["gap_steps"].tolist())
                k, n = int(r["precursor"].sum()), int(len(r))
                coinc = r["coincides_plateau_exit"].dropna()
                out.append({
                    "measure": measure, "kind": rm["kind"].iloc[0], "layer": _one(rm["layer"]),
                    "position": _one(rm["position"]), "variant": _one(rm["variant"]),
                    "transition": _one(rm["transition"]), "difficulty": diff, "size": size,
                    "n_params": None if size == "all" else _one(r["n_params"]),
                    "runs": n, "precursors": k, "rate_k_of_n": f"{k}/{n}",
                    "rate": k / n if n else None, "n_gap": q["n"],
                    "gap_median_steps": q["median"], "gap_q25_steps": q["q25"], "gap_q75_steps": q["q75"],
                    "gap_iqr_steps": q["iqr"], "n_leads": int((r["gap_steps"].dropna() > 0).sum()),
                    "coincide_plateau_k_of_n": f"{int(coinc.astype(bool).sum())}/{len(coinc)}"
                    if measure != "loss_plateau_exit" else "",
                })
    return pd.DataFrame(out)


RATES_NOTES = [
    "precursor_rates: per measure x behavioural difficulty class x size ('all' = pooled sizes).",
    "runs = runs in the cell (unlearned/diverged runs are counted: they can have no precursor);"
    " precursors = runs whose measure's transition precedes acquisition (rate_k_of_n = k/n).",
    "geometric measures: the events job's verdict (collapsed, t_tr < t_acq, gap >= precursor_min_gap_frac * t_acq)"
    " at the layer/position/variant named; transition = the event used (default floor).",
    "reference measures loss_plateau_exit and logprob_emergence: same rule without the collapse condition.",
    "gap = t_acq - t_transition in optimizer steps over runs where both exist (n_gap; negative = lags);"
    " median and IQR (q25..q75, linear interpolation); n_leads = gaps > 0.",
    "coincide_plateau_k_of_n: runs whose transition lies within {tol} decades of the loss-plateau exit"
    " (|log10(t+1) - log10(t_exit+1)| <= {tol}) out of runs where both exist.",
]
