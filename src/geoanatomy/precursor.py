"""Assemble a run's ``precursor.json`` from its metrics table and training summary.

Schema (README, "precursor.json"): top-level run facts and behavioural events,
then ``measures.<name>`` per geometric measure with the headline layer's curve
events and precursor verdict, plus ``per_layer`` events for every layer.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import events as ev
from .config import RunSpec
from .tasks import TaskData, make_task, marginal_logprob

SCHEMA_VERSION = 1


def _curve(df, measure: str, **match) -> tuple[np.ndarray, np.ndarray]:
    m = df["measure"] == measure
    for k, v in match.items():
        m &= df[k] == v
    sub = df[m].sort_values("step")
    return sub["step"].to_numpy(np.int64), sub["value"].to_numpy(np.float64)


def headline_layer(cfg_events: dict) -> str:
    return "ln_final" if cfg_events["layer"] == "final" else cfg_events["layer"]


def build_precursor(spec: RunSpec, train_summary: dict, df, cfg_events: dict, measures_df=None,
                    probes_df=None) -> dict:
    """The precursor.json dict for one run (see module and ``events`` docs).

    With ``measures_df`` (measures.csv) ``measures`` also gets grad_erank, grad_cov_erank,
    hessian_top and llc; with ``probes_df`` (probes.csv) a top-level ``probes`` entry
    (definitions: ``measures.transitions``)."""
    e = cfg_events
    p = e["persist"]
    data = TaskData(make_task(spec.task, spec.level, spec.level_params), spec.seed,
                    spec.data["n_heldout"], spec.data["heldout_frac"])
    n_eval = int(spec.eval["n_samples"])
    answers = data.eval_set(n_eval)[:, -data.spec.n_answer:]
    baseline = marginal_logprob(answers)

    steps, acc_norm = _curve(df, "accuracy_norm")
    _, acc = _curve(df, "accuracy")
    t_acq = ev.acquisition_step(steps, acc_norm, e["acquisition_threshold"], p)
    s_lp, lp = _curve(df, "logprob_per_token")
    t_lp = ev.emergence_step(s_lp, lp, baseline, e["logprob_margin"], p)
    s_tl, tl = _curve(df, "train_loss")
    t_plateau = ev.plateau_exit_step(s_tl, tl, baseline, e["logprob_margin"], p)
    diverged = bool(train_summary.get("diverged", False)) or not np.all(np.isfinite(tl))
    acc_rows = df.loc[df["measure"] == "accuracy_norm", "settings"]
    chance = float(json.loads(acc_rows.iloc[0])["chance"]) if len(acc_rows) else None

    layer = headline_layer(e)
    layers = list(dict.fromkeys(df.loc[df["measure"] == "rankme"].sort_values("layer_index")["layer"]))
    per_layer = {}
    for name in layers:
        s, v = _curve(df, "rankme", layer=name, position=e["position"], variant=e["variant"])
        cev = ev.curve_events(s, v, e["collapse_drop"], e["collapse_half"], e["recovery_rise"], p)
        cev["constant_by_construction"] = bool(name == "embed" and e["position"] == "first")
        per_layer[name] = cev
    head = dict(per_layer.get(layer) or ev.curve_events([], []))
    head.update(ev.precursor(head, t_acq, e["transition"], e["precursor_min_gap_frac"]))
    rankme_entry = {"layer": layer, "position": e["position"], "variant": e["variant"],
                    "n_samples": n_eval, "eps": float(spec.eval["rankme_eps"]), **head,
                    "per_layer": per_layer}

    out = {
        "schema_version": SCHEMA_VERSION,
        "run": spec.name, "task": spec.task, "level": spec.level, "size": spec.size,
        "level_params": spec.level_params,
        "n_params": train_summary.get("n_params"), "steps": spec.train["steps"],
        "n_checkpoints": int(len(steps)), "diverged": diverged,
        "acquired": t_acq is not None, "acquisition_step": t_acq,
        "logprob_emergence_step": t_lp, "loss_plateau_exit_step": t_plateau,
        "difficulty": ev.difficulty(t_acq, spec.train["steps"], e["easy_max_frac"], diverged),
        "final_accuracy": float(acc[-1]) if len(acc) else None,
        "max_accuracy": float(np.nanmax(acc)) if len(acc) and np.isfinite(acc).any() else None,
        "chance_accuracy": chance, "marginal_logprob_per_token": baseline,
        "eval": {"n_samples": n_eval, "split": "held-out", "positions": {
            "first": "position predicting the first answer token",
            "answer_mean": "mean over positions predicting answer tokens"}},
        "events_settings": dict(e),
        "measures": {"rankme": rankme_entry},
    }
    if measures_df is not None or probes_df is not None:
        from .measures.transitions import measure_entries, probe_entry
        if measures_df is not None:
            out["measures"].update(measure_entries(measures_df, t_acq, e))
        if probes_df is not None and len(probes_df):
            out["probes"] = probe_entry(probes_df, t_acq, e, layer)
    return ev.json_safe(out)


def load_and_build(spec: RunSpec, run_dir: Path, metrics_csv: Path, cfg_events: dict) -> dict:
    from .extract import read_table
    summary = json.loads((Path(run_dir) / "train.json").read_text())
    extra = {f"{k}_df": read_table(Path(run_dir) / f"{k}.csv")          # expensive measures, probes
             for k in ("measures", "probes") if (Path(run_dir) / f"{k}.csv").exists()}
    return build_precursor(spec, summary, read_table(metrics_csv), cfg_events, **extra)
