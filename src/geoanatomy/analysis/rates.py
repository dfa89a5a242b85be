"""The per-run x per-measure long table and ``precursor_rates.csv``.

Geometric measures are read as the events job wrote them (``transition_step``,
``precursor``, ``gap_steps`` of the headline layer). Two *reference measures*
come from the same precursor.json so every claim is judged against what the
loss curve already tells:

* ``loss_plateau_exit``  step the training loss leaves its early plateau
  (``loss_plateau_exit_step``)
* ``logprob_emergence``  step the answer log-probability beats the input-blind
  predictor (``logprob_emergence_step``)

For a reference, precursor = ``precursor.is_precursor(t_ref, t_acq, precursor_min_gap_frac)``
(the run's own ``events_settings``), i.e. the geometric rule without the collapse condition.
gap_steps = t_acq - t_transition whenever both exist (negative: the event lags).
transitioned = collapsed (falling measures) or risen (``direction: rise``: hessian_top,
llc); extreme = floor or peak (load.extreme) with its value and step.
coincides_plateau_exit = |log10(t_tr + 1) - log10(t_exit + 1)| <= coincide_log10_tol.

Beside every rate, its nulls (``analysis.stats``): the clock null (best rate and median
lead of one fixed step), the permutation p of the rate and of the median lead
(acquisition steps shuffled within a size), false alarms (the measure transitioned in a
run that never acquired, or in a shuffled-label control run) and, in ``paired_leads``,
each measure's lead over the loss-plateau exit per run with a sign test and a bootstrap
interval.
"""
from __future__ import annotations

import pandas as pd

import numpy as np

from ..precursor import difficulty, is_precursor
from .load import (DIFFICULTIES, REFERENCES, calibration_step, extreme, geometric_measures, lag_resolution,
                   clear_gap, min_gap_frac, run_facts, size_order, step_or_none)
from .stats import CELLS, cluster_bootstrap, clock_null, paired_lead, permutation_null
from .settings import summary_settings
from .stats import log_steps_close, quantiles

ROW_COLUMNS = ["run", "task", "level", "size", "family", "n_params", "steps", "difficulty", "acquired",
               "diverged", "control", "easy_max_step", "min_gap_frac", "acquisition_step", "measure", "kind", "layer",
               "position", "variant",
               "direction", "transition", "transition_step", "recovery_step", "precursor", "gap_steps", "transitioned",
               "init",
               "extreme", "extreme_value", "extreme_step", "loss_plateau_exit_step", "coincides_plateau_exit",
               "onset_step", "loss_onset_step", "loss_extreme_step", "difficulty_fixed", "mean_share_rho",
               "loss_half_step", "calibration_step", "lag_resolution", "window_end_step"]


def measure_rows(pres: list[dict], tol_log10: float) -> pd.DataFrame:
    """One row per run and measure (geometric measures present in that run + the references)."""
    rows = []
    for pre in pres:
        es = pre.get("events_settings") or {}
        f = {**run_facts(pre), "control": pre.get("control") or "",
             "easy_max_step": es.get("easy_max_step"), "min_gap_frac": min_gap_frac(pre)}
        t_acq, t_exit = f["acquisition_step"], step_or_none(pre.get("loss_plateau_exit_step"))
        le = pre.get("loss_events") or {}
        f.update(loss_onset_step=step_or_none(le.get("onset_step")),
                 loss_extreme_step=step_or_none(le.get("extreme_step")),
                 loss_half_step=step_or_none(le.get("half_step")), calibration_step=calibration_step(pre),
                 difficulty_fixed=bool((pre.get("difficulty_source") or {}).get("fixed_before_outcome")))
        for name, m in geometric_measures(pre).items():
            kind, xv, xs = extreme(m)
            t_tr = step_or_none(m.get("transition_step", m.get("floor_step")))
            gap = m.get("gap_steps")
            gap = step_or_none(gap) if gap is not None else (t_acq - t_tr if t_acq is not None and t_tr is not None
                                                             else None)
            rows.append({**f, "measure": name, "kind": "geometric", "layer": m.get("layer"),
                         "position": m.get("position"), "variant": m.get("variant"),
                         "transition": m["transition"], "transition_step": t_tr,
                         "recovery_step": step_or_none(m.get("recovery_step", m.get("settle_step"))),
                         "precursor": bool(m.get("precursor")) and f["acquired"], "gap_steps": gap,
                         "direction": m["direction"],
                         "transitioned": m.get("risen") if m.get("direction") == "rise" else m.get("collapsed"),
                         "init": m.get("init"), "extreme": kind, "extreme_value": xv, "extreme_step": xs,
                         "loss_plateau_exit_step": t_exit,
                         "coincides_plateau_exit": log_steps_close(t_tr, t_exit, tol_log10),
                         "onset_step": step_or_none(m.get("rise_step") if m.get("direction") == "rise"
                                                    else m.get("collapse_step")),
                         "mean_share_rho": (m.get("mean_share") or {}).get("rank_corr_with_rankme"),
                         "lag_resolution": lag_resolution(pre, name, t_tr, t_acq),
                         "window_end_step": step_or_none(m.get("window_end")) if m.get("direction") == "collapse"
                         else None})
        frac = f["min_gap_frac"]
        for name, key in REFERENCES.items():
            t_ref = step_or_none(pre.get(key))
            rows.append({**f, "measure": name, "kind": "reference", "layer": "output", "position": "answer",
                         "variant": "", "transition": key, "transition_step": t_ref, "recovery_step": None,
                         "precursor": is_precursor(t_ref, t_acq, frac),
                         "gap_steps": t_acq - t_ref if t_acq is not None and t_ref is not None else None,
                         "direction": "", "transitioned": None, "init": None, "extreme": None,
                         "extreme_value": None, "extreme_step": None, "onset_step": None, "mean_share_rho": None,
                         "loss_plateau_exit_step": t_exit, "lag_resolution": None, "window_end_step": None,
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


def effective_transition(r: pd.DataFrame) -> np.ndarray:
    """Transition steps that count for the precursor rule: none where the measure did not
    transition (a geometric measure must have collapsed/risen; references always count)."""
    t = pd.to_numeric(r["transition_step"], errors="coerce").to_numpy(float)
    ok = (r["kind"] == "reference").to_numpy() | r["transitioned"].fillna(False).astype(bool).to_numpy()
    return np.where(ok, t, np.nan)


def null_columns(rm: pd.DataFrame, diff: str, size: str, st: dict, frac: float, perm_group: str = "size") -> dict:
    """Clock null, permutation p and false alarms of one measure's cell (module doc).
    ``perm_group``: the column within whose values acquisition steps are shuffled (the size;
    a mixture's combinations: the model, geoanatomy.analysis.protocols)."""
    out = {"clock_best_step": None, "clock_best_rate": None, "clock_best_median_lead": None,
           "clock_median_step": None, "clock_median_rate": None, "perm_p_rate": None,
           "perm_p_median_lead": None, "n_permutations": None, "false_alarms_k_of_n": ""}
    real = rm[(rm["control"] == "") & ~rm["diverged"].astype(bool)]
    scope = real if size == "all" else real[real["size"] == size]
    if diff in ("easy", "hard"):
        cell = scope[scope["difficulty"] == diff]
        if not len(cell):
            return out
        t_acq = pd.to_numeric(cell["acquisition_step"], errors="coerce").to_numpy(float)
        out.update({k: v for k, v in clock_null(effective_transition(cell), t_acq, frac).record().items() if k != "n"})
        acq = scope[scope["acquired"].astype(bool)]
        emax = pd.to_numeric(acq["easy_max_step"], errors="coerce").to_numpy(float)
        fixed = acq["difficulty_fixed"].fillna(False).astype(bool).to_numpy() if "difficulty_fixed" in acq else None
        labels = (acq["difficulty"] == diff).to_numpy()
        # classes from a class file belong to the cell, not to the acquisition step: they stay put
        # when acquisition steps are shuffled; post-hoc classes follow the shuffled steps
        in_class = ((lambda a: labels) if fixed is not None and fixed.all()
                    else (lambda a: difficulty(a, emax) == diff))
        res = permutation_null(effective_transition(acq), pd.to_numeric(acq["acquisition_step"]).to_numpy(float),
                               acq[perm_group].to_numpy(), in_class, frac,
                               n_resamples=int(st["n_permutations"]), seed=int(st["seed"]))
        out.update(perm_p_rate=res.p, perm_p_median_lead=res.p_median_lead, n_permutations=res.n_permutations)
    elif diff == "unlearned":
        cell = scope[scope["difficulty"] == "unlearned"]
        fired = np.isfinite(effective_transition(cell))
        out["false_alarms_k_of_n"] = f"{int(fired.sum())}/{len(cell)}"
    return out


def control_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """False alarms in shuffled-label control runs: per measure, the runs where it transitioned."""
    out = []
    ctrl = rows[rows["control"] != ""]
    for measure in ordered_measures(rows):
        c = ctrl[ctrl["measure"] == measure]
        if not len(c):
            continue
        fired = np.isfinite(effective_transition(c))
        out.append({"measure": measure, "control": "shuffled labels", "runs": len(c),
                    "acquired": int(c["acquired"].astype(bool).sum()),
                    "transition_fired_k_of_n": f"{int(fired.sum())}/{len(c)}",
                    "runs_fired": ",".join(c.loc[fired, "run"])})
    return pd.DataFrame(out, columns=["measure", "control", "runs", "acquired", "transition_fired_k_of_n",
                                      "runs_fired"])


# Same kind and depth: a geometric event is compared with the loss curve's event of its kind
# (onset with onset, at onset_frac of each curve's change; extreme with extreme, within
# extreme_tol of each curve's extreme).
PAIRS = (("onset", "onset_step", "loss_onset_step"), ("extreme", "extreme_step", "loss_extreme_step"))


def paired_leads(rows: pd.DataFrame, st: dict) -> pd.DataFrame:
    """Per measure x event kind x class (easy, hard, all acquired): the lead of the measure's
    event over the loss curve's event of the same kind in the same run (``PAIRS``;
    stats.paired_lead). A measure that did not transition has no event."""
    out = []
    real = rows[(rows["control"] == "") & rows["acquired"].astype(bool) & ~rows["diverged"].astype(bool)]
    for measure in ordered_measures(rows):
        rm = real[(real["measure"] == measure) & (real["kind"] == "geometric")]
        for event, col, ref in PAIRS:
            for diff in ("easy", "hard", "acquired"):
                r = rm if diff == "acquired" else rm[rm["difficulty"] == diff]
                if not len(r):
                    continue
                t = pd.to_numeric(r[col], errors="coerce").to_numpy(float)
                t = np.where(r["transitioned"].fillna(False).astype(bool).to_numpy(), t, np.nan)
                pl = paired_lead(t, pd.to_numeric(r[ref], errors="coerce"),
                                 n_resamples=int(st["n_bootstrap"]), seed=int(st["seed"]))
                out.append({"measure": measure, "event": event, "reference": f"loss {event}", "difficulty": diff,
                            "runs": len(r), "n_pairs": pl.n, "wins": pl.sign.wins, "losses": pl.sign.losses,
                            "ties": pl.sign.ties, "sign_test_p": pl.p, "median_lead_steps": pl.statistic,
                            "ci95_lo_steps": pl.ci[0], "ci95_hi_steps": pl.ci[1], "median_lead_decades": pl.decades,
                            "ci95_lo_decades": pl.ci_decades[0], "ci95_hi_decades": pl.ci_decades[1]})
    return pd.DataFrame(out, columns=PAIRED_COLUMNS)


PAIRED_COLUMNS = ["measure", "event", "reference", "difficulty", "runs", "n_pairs", "wins", "losses", "ties",
                  "sign_test_p",
                  "median_lead_steps", "ci95_lo_steps", "ci95_hi_steps", "median_lead_decades",
                  "ci95_lo_decades", "ci95_hi_decades"]


def _intervals(r: pd.DataFrame, st: dict, cluster_cols=CELLS) -> tuple:
    """95% intervals of the precursor rate and of the median gap over cells (seeds nested), or
    over the clusters ``cluster_cols`` (a mixture's models, their combinations nested)."""
    if not len(r):
        return (None, None), (None, None)
    r = r.reset_index(drop=True)
    nb, seed = int(st["n_bootstrap"]), int(st["seed"])
    pre = r["precursor"].astype(float).to_numpy()
    gap = pd.to_numeric(r["gap_steps"], errors="coerce").to_numpy(float)

    def med(idx):
        g = gap[idx]
        g = g[np.isfinite(g)]
        return float(np.median(g)) if len(g) else None
    return (cluster_bootstrap(r, lambda idx: float(pre[idx].mean()), nb, seed, cluster_cols),
            cluster_bootstrap(r, med, nb, seed, cluster_cols) if np.isfinite(gap).any() else (None, None))


def precursor_rates(rows: pd.DataFrame, st: dict | None = None, cluster_cols=CELLS,
                    perm_group: str = "size") -> pd.DataFrame:
    """Per measure x difficulty class x size (and size 'all'): k/n precursors, the gap, and the
    nulls beside them (clock, permutation p, false alarms). Control runs are left out here
    (``control_rows``). ``cluster_cols``, ``perm_group``: the units intervals resample (n_cells
    counts them) and the groups the permutation null shuffles within (defaults: task x level x
    size cells, sizes; a mixture's combinations: its models, geoanatomy.analysis.protocols)."""
    st = st or summary_settings()
    out = []
    rows = rows[rows["control"] == ""]
    frac = clear_gap(rows["min_gap_frac"])
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
                ci_rate, ci_gap = _intervals(r, st, cluster_cols)
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
                    "n_cells": int(r.groupby(list(cluster_cols)).ngroups) if n else 0,
                    "rate_ci95_lo": ci_rate[0], "rate_ci95_hi": ci_rate[1],
                    "gap_median_ci95_lo": ci_gap[0], "gap_median_ci95_hi": ci_gap[1],
                    "coincide_plateau_k_of_n": f"{int(coinc.astype(bool).sum())}/{len(coinc)}"
                    if measure != "loss_plateau_exit" else "",
                    **null_columns(rm, diff, size, st, frac, perm_group),
                })
    return pd.DataFrame(out)


RATES_NOTES = [
    "intervals: rate_ci95_* and gap_median_ci95_* are percentile bootstrap 95% intervals over task x level x size"
    " cells (n_cells), the seeds of a drawn cell resampled inside it.",
    "nulls: clock_best_* = the best rate (and median lead) that one fixed step, the same in every run, gets under"
    " the same rule (steps tried: the measure's own transition steps in the cell); clock_median_* = the step at"
    " the median of those; perm_p_rate / perm_p_median_lead = permutation p of the count and of the median lead,"
    " acquisition steps shuffled across the acquired runs of each size (the class moves with the step);"
    " false_alarms_k_of_n (unlearned rows) = runs that never acquired whose measure transitioned anyway.",
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
