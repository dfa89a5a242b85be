"""Behavioural references: log-probability emergence and linear-probe acquisition.

emergence.csv (one row per study run; shuffled-label control runs are left
out, they are controls reported by rates.control_rows): acquisition step (accuracy definition),
log-probability emergence step and loss-plateau exit step (detectors.py
definitions), and the lead of each over acquisition in steps
(lead = t_acq - t_event; positive = the event comes first). Runs that never
acquired keep their emergence step with an empty lead.

probes.csv (one row per run and layer): probe acquisition step (from the
run's ``probes`` entry, top level or under ``measures``) vs behavioural
acquisition; lead = t_acq - t_probe (positive: the hidden states held the
answer before the model emitted it). Control runs are kept here, flagged
in column ``control`` (a probe that reads shuffled labels is a false alarm).
Accepted shapes of the probes entry:
{"per_layer": {layer: step | {"acquisition_step": step, ...}}, ...} or
{layer: step | {...}}; extra scalar fields per layer are kept as columns
(prefixed ``probe_``, e.g. probe_constant_by_construction, probe_final_accuracy); the
entry's measure, position, definition and settings go to ``probe_settings`` (JSON).
"""
from __future__ import annotations

import json

import pandas as pd

from .load import run_facts, step_or_none, study_runs

EMERGENCE_COLUMNS = ["run", "task", "level", "size", "seed", "family", "n_params", "steps", "difficulty", "acquired",
                     "diverged", "acquisition_step", "logprob_emergence_step", "lead_logprob_steps",
                     "loss_plateau_exit_step", "lead_plateau_exit_steps", "logprob_before_acquisition",
                     "final_accuracy", "max_accuracy", "chance_accuracy", "n_checkpoints"]
PROBE_COLUMNS = ["run", "task", "level", "size", "seed", "control", "family", "n_params", "difficulty", "acquired",
                 "acquisition_step", "layer", "probe_acquisition_step", "lead_steps", "probe_before_behaviour",
                 "probe_settings"]
_STEP_KEYS = ("acquisition_step", "probe_acquisition_step", "step")


def _lead(t_acq, t_ev):
    return t_acq - t_ev if t_acq is not None and t_ev is not None else None


def emergence(pres: list[dict]) -> pd.DataFrame:
    rows = []
    for p in study_runs(pres):
        f = run_facts(p)
        t_lp, t_pl = step_or_none(p.get("logprob_emergence_step")), step_or_none(p.get("loss_plateau_exit_step"))
        lead = _lead(f["acquisition_step"], t_lp)
        rows.append({**f, "logprob_emergence_step": t_lp, "lead_logprob_steps": lead,
                     "loss_plateau_exit_step": t_pl, "lead_plateau_exit_steps": _lead(f["acquisition_step"], t_pl),
                     "logprob_before_acquisition": (lead > 0) if lead is not None else None,
                     "final_accuracy": p.get("final_accuracy"), "max_accuracy": p.get("max_accuracy"),
                     "chance_accuracy": p.get("chance_accuracy"), "n_checkpoints": p.get("n_checkpoints")})
    return pd.DataFrame(rows, columns=EMERGENCE_COLUMNS)


def probes_entry(pre: dict):
    e = pre.get("probes")
    if e is None and isinstance(pre.get("measures"), dict):
        e = pre["measures"].get("probes")
    return e if isinstance(e, dict) and e else None


def probes(pres: list[dict]) -> pd.DataFrame:
    rows = []
    for p in pres:
        e = probes_entry(p)
        if e is None:
            continue
        f = run_facts(p)
        per = e.get("per_layer") if isinstance(e.get("per_layer"), dict) else e
        settings = {}
        if per is not e:   # what the probes were and how acquisition was defined (geoanatomy.stages.probes)
            settings = {k: e[k] for k in ("measure", "position", "definition", "n_test", "n_checkpoints") if k in e}
            settings.update(e.get("settings") if isinstance(e.get("settings"), dict) else {})
        for layer, v in per.items():
            if isinstance(v, dict):
                t = next((step_or_none(v[k]) for k in _STEP_KEYS if k in v), None)
                extra = {f"probe_{k}": x for k, x in v.items() if k not in _STEP_KEYS
                         and f"probe_{k}" not in PROBE_COLUMNS and isinstance(x, (int, float, str, bool))}
            elif v is None or isinstance(v, (int, float)):
                t, extra = step_or_none(v), {}
            else:
                continue
            lead = _lead(f["acquisition_step"], t)
            rows.append({**{k: f[k] for k in PROBE_COLUMNS if k in f}, "layer": layer, "probe_acquisition_step": t,
                         "lead_steps": lead, "probe_before_behaviour": (lead > 0) if lead is not None else None,
                         "probe_settings": json.dumps(settings, sort_keys=True) if settings else "", **extra})
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=PROBE_COLUMNS)
    return df[PROBE_COLUMNS + [c for c in df.columns if c not in PROBE_COLUMNS]]
