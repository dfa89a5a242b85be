"""The two training protocols side by side: single-task runs and the combinations of mixture
models (geoanatomy.mixture; docs/mixture.md).

A mixture model is trained on several task x level combinations at once; each combination
is an analysis unit with its own precursor.json (``protocol: mixture``, ``model``: the
mixture's training run). Its combinations are not independent observations: they share one
set of weights, one initialisation and one batch stream. So every statistic on mixture units
treats the *model* as the unit of resampling:

* intervals: percentile bootstrap over models, the combinations of a drawn model resampled
  inside it (``stats.cluster_bootstrap`` with cells = models);
* permutation nulls: acquisition steps shuffled among the combinations of one model (the
  model's shared schedule and representation stay in the null);
* sign and binomial tests: one vote per model (the majority of its combinations), n = models;
* n_units = models, n_runs = combinations.

The single-task tables of results/summary/ (precursor_rates.csv, collapse_floors.csv, ...)
hold single-task runs only; mixture units go to the files written here and to the
``protocol: mixture`` rows of verdict.csv:

protocols.csv
    one row per task x level x size x control cell and RankMe variant (uncentred ``rankme``,
    centred ``rankme_centred``) present in either protocol: for each protocol the runs (single)
    or units (mixture) and models, acquisition (k/n, median step over seeds or models: a number,
    empty with acquisition_censored true when at least half never acquire), difficulty classes, the headline floor
    and floor step
    (medians), transitions k/n, precursors k/n and the median gap, top-down floor order k/n
    determined units; then mixture / single acquisition step.
protocol_rates.csv
    precursor rates with their nulls (rates.precursor_rates: clock null, permutation p, false
    alarms) for each protocol, one block per protocol (column ``protocol``); ``units`` says
    what the intervals resample and the permutation shuffles within.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import floors, prediction, rates, scale, topdown
from .claims import RANKME, row_dict
from .load import is_control, level_order, run_facts, size_order, task_order
from .stats import binomial_p, cluster_bootstrap, sign_test
from .verdict import json_claims, precursor_claims

MIXTURE = "mixture"
SINGLE = "single-task"
MODEL = ("model",)

MIXTURE_NOTE = ("mixture rows: units are the combinations of mixture models, which share weights and batches, "
                "so n_units counts models (n_runs combinations), intervals resample models with their "
                "combinations nested, permutation nulls shuffle acquisition steps within a model and sign "
                "tests give one vote per model")


def protocol_of(pre: dict) -> str:
    """'mixture' for a mixture model's combination, else 'single-task'."""
    return MIXTURE if pre.get("protocol") == "mixture" else SINGLE


def split(pres: list[dict]) -> tuple[list[dict], list[dict]]:
    """(single-task runs, mixture units), each in the input order."""
    return ([p for p in pres if protocol_of(p) == SINGLE], [p for p in pres if protocol_of(p) == MIXTURE])


def model_of(pre: dict) -> str:
    """The trained model a unit belongs to: the mixture's training run, or the run itself."""
    return str(pre.get("model") or pre["run"])


def _with_models(df: pd.DataFrame, pres: list[dict]) -> pd.DataFrame:
    models = {p["run"]: model_of(p) for p in pres}
    return df.assign(model=df["run"].map(models)) if len(df) else df.assign(model=pd.Series(dtype=str))


# ------------------------------------------------------------------ protocols.csv
def _median_step(steps: list) -> tuple[float | None, bool | None]:
    """(median acquisition step with never = +inf, censored): the median is None and censored
    True when at least half never acquire (the median is then beyond the run's last step)."""
    if not steps:
        return None, None
    v = float(np.median([math.inf if s is None else float(s) for s in steps]))
    return (None, True) if math.isinf(v) else (v, False)


def _median(values) -> float | None:
    v = [float(x) for x in values if x is not None and np.isfinite(float(x))]
    return float(np.median(v)) if v else None


def _side(pres: list[dict], measure: str, td: pd.DataFrame) -> dict:
    """One protocol's columns for one cell and measure."""
    if not pres:
        return {}
    acq = [p["acquisition_step"] if p["acquired"] else None for p in pres]
    ms = [p["measures"].get(measure) or {} for p in pres]
    t = td[td["run"].isin([p["run"] for p in pres]) & (td["measure"] == measure)]
    det = t[t["status"] == "determined"]
    return {"runs": len(pres), "models": len({model_of(p) for p in pres}),
            "acquired_k_of_n": f"{sum(a is not None for a in acq)}/{len(pres)}",
            "acquisition_step": _median_step(acq)[0], "acquisition_censored": _median_step(acq)[1],
            "difficulty": " ".join(sorted({p["difficulty"] for p in pres})),
            "floor": _median(m.get("floor") for m in ms), "floor_step": _median(m.get("floor_step") for m in ms),
            "transitioned_k_of_n": f"{sum(bool(m.get('collapsed')) for m in ms)}/{len(pres)}",
            "precursor_k_of_n": f"{sum(bool(m.get('precursor')) and bool(p['acquired']) for m, p in zip(ms, pres))}"
                                f"/{len(pres)}",
            "gap_steps": _median(m.get("gap_steps") for m in ms),
            "top_down_k_of_n": f"{int((det['direction'] == 'top-down').sum())}/{len(det)}" if len(t) else ""}


SIDE_COLUMNS = ["runs", "models", "acquired_k_of_n", "acquisition_step", "acquisition_censored", "difficulty", "floor",
                "floor_step",
                "transitioned_k_of_n", "precursor_k_of_n", "gap_steps", "top_down_k_of_n"]


def side_by_side(pres: list[dict], st: dict) -> pd.DataFrame:
    """protocols.csv (module doc): one row per cell x RankMe variant, the two protocols side by side."""
    td = topdown.top_down(pres, st["topdown_require_collapse"])
    # top_down() leaves controls out; their cells still get every other column
    cells: dict[tuple, dict[str, list]] = {}
    for p in pres:
        f = run_facts(p)
        key = (f["task"], f["level"], f["size"], "shuffled" if is_control(p) else "")
        cells.setdefault(key, {SINGLE: [], MIXTURE: []})[protocol_of(p)].append(p)
    sizes = size_order([k[2] for k in cells])
    tasks, levels = task_order([k[0] for k in cells]), level_order([k[1] for k in cells])
    rows = []
    for key in sorted(cells, key=lambda k: (levels.index(k[1]), tasks.index(k[0]), sizes.index(k[2]), k[3])):
        by = cells[key]
        for measure, variant in RANKME.items():
            head = next((p["measures"][measure] for p in by[SINGLE] + by[MIXTURE] if measure in p["measures"]), {})
            row = {"task": key[0], "level": key[1], "size": key[2], "control": key[3], "measure": measure,
                   "layer": head.get("layer"), "position": head.get("position"), "variant": variant,
                   "n_samples": head.get("n_samples")}
            for proto, prefix in ((SINGLE, "single"), (MIXTURE, "mixture")):
                side = _side(by[proto], measure, td)
                row.update({f"{prefix}_{c}": side.get(c) for c in SIDE_COLUMNS})
            shares = [(p.get("mixture") or {}).get("share") for p in by[MIXTURE]]
            row["mixture_share"] = _median(shares)
            a, b = row["single_acquisition_step"], row["mixture_acquisition_step"]
            row["acquisition_step_mixture_over_single"] = (b / a if isinstance(a, float) and isinstance(b, float)
                                                           and a > 0 else None)
            rows.append(row)
    cols = (["task", "level", "size", "control", "measure", "layer", "position", "variant", "n_samples"]
            + [f"single_{c}" for c in SIDE_COLUMNS] + [f"mixture_{c}" for c in SIDE_COLUMNS]
            + ["mixture_share", "acquisition_step_mixture_over_single"])
    return pd.DataFrame(rows, columns=cols)


PROTOCOLS_NOTES = [
    "one row per task x level x size x control cell and RankMe variant, the two training protocols side by side:"
    " single_* = single-task runs (one model per task x level x size x seed), mixture_* = the combinations of"
    " mixture models (one model per size x seed trained on every combination of its grid block).",
    "runs = single-task runs or mixture units in the cell, models = distinct trained models; acquired_k_of_n;"
    " acquisition_step = median over them with never-acquired as +inf (empty, and acquisition_censored true, when at "
    "least half never acquire: the median lies beyond the run);"
    " difficulty = the classes present (easy/hard by events.easy_max_step).",
    "floor, floor_step = medians of the headline curve's floor (layer/position/variant columns; n_samples held-out"
    " examples of that combination); transitioned = the curve collapsed; precursor = the events rule"
    " (acquired runs only); gap_steps = median t_acq - t_transition; top_down_k_of_n = units whose layers reach"
    " their floors output side first, out of determined units (controls and diverged runs left out).",
    "mixture_share = the combination's sampling share in its mixture; acquisition_step_mixture_over_single ="
    " mixture / single-task acquisition step (both acquired).",
    "no test here: the combinations of one mixture model are not independent (verdict.csv's protocol = mixture"
    " rows resample models).",
]


# ------------------------------------------------------------ protocol_rates.csv
def protocol_rates(pres: list[dict], st: dict) -> pd.DataFrame:
    """protocol_rates.csv (module doc): precursor rates with nulls for each protocol."""
    single, mix = split(pres)
    out = []
    for proto, ps, cl, grp, units in (
            (SINGLE, single, rates.CELLS, "size", "task x level x size cells (seeds nested); permutation within sizes"),
            (MIXTURE, mix, MODEL, "model", "models (their combinations nested); permutation within a model")):
        if not ps:
            continue
        rows = _with_models(rates.measure_rows(ps, st["coincide_log10_tol"]), ps)
        pr = rates.precursor_rates(rows, st, cluster_cols=cl, perm_group=grp)
        if len(pr):
            pr = pr.rename(columns={"n_cells": "n_units"})
            pr.insert(0, "units", units)
            pr.insert(0, "protocol", proto)
            out.append(pr)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


# ------------------------------------------------------------------- verdict rows
def _row(*a, **k):
    return row_dict(*a, **k, protocol=MIXTURE)


def _fam(name: str) -> str:
    return f"{name} (mixture)"


def _model_votes(df: pd.DataFrame, value: str) -> tuple[int, int]:
    """(models whose mean of ``value`` is above 1/2, models not exactly at 1/2)."""
    m = df.groupby("model")[value].mean()
    return int((m > 0.5).sum()), int((m != 0.5).sum())


def behaviour_claims(mix: list[dict], st: dict) -> list[dict]:
    """verdict rows (protocol mixture) for the acquisition rate, log-prob before accuracy and
    probes before behaviour, with models as units (module doc)."""
    nb, seed = int(st["n_bootstrap"]), int(st["seed"])
    runs = pd.DataFrame([{"model": model_of(p), "task": p["task"], "level": p["level"], "size": p["size"],
                          "acquired": float(bool(p["acquired"])), "t_acq": p.get("acquisition_step"),
                          "t_lp": p.get("logprob_emergence_step"), "t_first": p.get("first_token_acquisition_step"),
                          "t_probe": (p.get("probes") or {}).get("acquisition_step")}
                         for p in mix if not is_control(p) and not p.get("diverged")])
    if not len(runs):
        return []
    out = []
    acq = runs["acquired"].to_numpy(float)
    k, n = _model_votes(runs, "acquired")
    n_models = int(runs["model"].nunique())
    out.append(_row("acquisition rate", "accuracy", "", "share of combinations acquired (models resampled)",
                    float(acq.mean()), cluster_bootstrap(runs, lambda i: float(acq[i].mean()), nb, seed, MODEL),
                    n_models, len(runs), "exact binomial test against 1/2 over models (a model votes 'acquired' when"
                    " most of its combinations are)", 0.5, binomial_p(k, n, "greater"), _fam("acquisition rate"),
                    f"{int(acq.sum())}/{len(runs)} combinations; {k}/{n} models with most combinations acquired"))
    for claim, a, b, stat_name in (("log-prob before accuracy", "t_acq", "t_lp", "median lead of log-prob emergence "
                                                                                 "(steps)"),
                                   ("probes before behaviour", "t_first", "t_probe",
                                    "median lead of final-layer probe over first-token acquisition (steps)")):
        d = runs.dropna(subset=[a, b]).reset_index(drop=True)
        lead = (pd.to_numeric(d[a]) - pd.to_numeric(d[b])).to_numpy(float)
        per_model = pd.Series(lead).groupby(d["model"]).median().to_numpy(float) if len(d) else np.array([])
        res = sign_test(per_model, "greater")
        out.append(_row(claim, "accuracy" if claim.startswith("log") else "probe_accuracy_norm", "", stat_name,
                        float(np.median(lead)) if len(d) else None,
                        cluster_bootstrap(d, lambda i: float(np.median(lead[i])), nb, seed, MODEL) if len(d)
                        else (None, None), int(d["model"].nunique()) if len(d) else 0, len(d),
                        "exact one-sided sign test over models (a model's median lead > 0)", 0.0, res.p,
                        _fam(claim), f"{res.wins} of {res.n} models lead; {int((lead > 0).sum())} of {len(d)}"
                        " combinations" if len(d) else "no combination has both events"))
    return out


def top_down_claims(mix: list[dict], st: dict) -> list[dict]:
    """verdict rows (protocol mixture) for top-down propagation per RankMe variant: one vote per
    model (most of its determined combinations top-down or bottom-up), intervals over models."""
    nb, seed = int(st["n_bootstrap"]), int(st["seed"])
    td = topdown.top_down(mix, st["topdown_require_collapse"])
    td = td[~td["diverged"].astype(bool) & (td["status"] == "determined")]
    td = _with_models(td, mix).reset_index(drop=True)
    out = []
    for m, variant in RANKME.items():
        g = td[td["measure"] == m].reset_index(drop=True)
        top = (g["direction"] == "top-down").to_numpy(float)
        g = g.assign(top=top)
        k, n = _model_votes(g, "top") if len(g) else (0, 0)
        out.append(_row("top-down propagation", m, variant, "share of determined combinations whose floors run "
                                                            "top-down",
                        float(top.mean()) if len(g) else None,
                        cluster_bootstrap(g, lambda i: float(top[i].mean()), nb, seed, MODEL) if len(g) else (None,
                                                                                                              None),
                        int(g["model"].nunique()) if len(g) else 0, len(g),
                        "exact one-sided sign test against 1/2 over models (a model's majority of determined "
                        "combinations)",
                        0.5, binomial_p(k, n, "greater"), _fam("top-down"),
                        f"{int(top.sum())}/{len(g)} combinations top-down; {k}/{n} models mostly top-down"))
    return out


def summary_claims(mix: list[dict], st: dict) -> list[dict]:
    """verdict rows (protocol mixture) for the floors, scale and cross-scale claims, from the
    same statistics as the single-task ones computed on the mixture units. Within a size the
    mixture's units are one model's, so the ANOVA's size factor is the model (a block), and a
    rank correlation across tasks between two sizes pairs two independently trained models."""
    fl = floors.collapse_floors(mix)
    jsons = {"floor_summary.json": floors.floor_summary(fl, floors.floor_spread(fl, st), st),
             "scale_invariance.json": scale.scale_invariance(mix, st),
             "prediction.json": prediction.prediction(rates.measure_rows(mix, st["coincide_log10_tol"]), st)}
    note = {"floors task-specific": "units = task_level x size cells; the size factor is the mixture model of that "
                                    "size (a block); combinations of one model stay correlated beyond it",
            "floor rank agreement across sizes": "tasks paired across two independently trained mixture models",
            "acquisition order scale-invariant": "tasks paired across two independently trained mixture models",
            "smaller-size geometry predicts larger-size acquisition order": "tasks paired across two mixture models"}
    out = []
    for r in json_claims(jsons, st):
        if r["claim"] == "top-down propagation":      # top_down_claims votes by model
            continue
        out.append({**r, "protocol": MIXTURE, "family": _fam(r["family"]),
                    "detail": "; ".join(x for x in (r["detail"], note.get(r["claim"], "")) if x)})
    return out


def mixture_claims(mix: list[dict], st: dict) -> list[dict]:
    """Every verdict row of the mixture protocol (before Holm; verdict.finish adjusts per family)."""
    rows = _with_models(rates.measure_rows(mix, st["coincide_log10_tol"]), mix)
    return (behaviour_claims(mix, st)
            + [{**r, "family": _fam(r["family"])} for r in precursor_claims(rows, st, protocol=MIXTURE,
                                                                          cluster_cols=MODEL, perm_group="size")]
            + top_down_claims(mix, st) + summary_claims(mix, st))
