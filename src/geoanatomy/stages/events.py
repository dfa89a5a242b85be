"""The events stage: a run's ``precursor.json`` and ``trajectory.png`` from its tables.

precursor.json (docs/outputs.md): top-level run facts and behavioural events, then
``measures.<name>`` per geometric measure with the headline layer's curve events and
precursor verdict, plus ``per_layer`` events for every layer; with probes.csv a
top-level ``probes`` entry. The detectors are ``geoanatomy.events``.
Thresholds are the ``events:`` block's (drop/half/rise/persist/transition/min gap), so
every measure is judged by the same numbers as RankMe.

Direction of each measure's transition (``DIRECTIONS``):

collapse (grad_erank, grad_cov_erank)
    exactly RankMe's events (``events.curve_events``): init, floor, floor_step,
    collapsed, collapse_step (half-drop), recovery_step.
rise (hessian_top, llc)
    these grow during learning (sharpening; a more complex solution), so the mirror image
    is detected (``rise_events``)::

        peak       = max over checkpoints, peak_step its first step
        risen      = init <= (1 - collapse_drop) * peak            (and peak > 0)
        rise_step  = first step with value >= init + collapse_half * (peak - init)
        settle_step= first step after the peak with value <= peak / (1 + recovery_rise)
                     for ``persist`` consecutive measured checkpoints

    The configured transition maps collapse -> rise, floor -> peak, recovery -> settle.
    The collapse keys (floor, floor_step, collapse_step, ...) are reported too.

Precursor (both directions, ``events.precursor``): the measure transitioned (collapsed /
risen), the run acquired, the transition step is strictly before acquisition and
t_acq - t_transition >= precursor_min_gap_frac * t_acq. Points whose row is flagged
(LLC negative / chains disagree / non-finite; power iteration not converged) are left
out of the curve; ``n_flagged`` and ``flagged_steps`` say which.

Probes: per layer the probe acquisition step, defined like behavioural acquisition: the
first checkpoint whose chance-normalised probe accuracy (acc - chance) / (1 - chance) is
>= ``acquisition_threshold`` (0.5) there and at the next persist - 1 probed checkpoints.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .. import events as ev
from ..files import atomic_write_json, json_safe
from ..spec import RunSpec
from ..table import curve
from ..table import read_table, select
from ..baselines import training_baselines
from .common import run_record, task_data, training_dir

SCHEMA_VERSION = 2  # 2: matched detectors, both RankMe variants, training-distribution baselines
DIRECTIONS = {"grad_erank": "collapse", "grad_cov_erank": "collapse", "hessian_top": "rise", "llc": "rise"}
HEADLINE_VARIANT = {"grad_erank": "roy_vetterli", "grad_cov_erank": "roy_vetterli",
                    "hessian_top": "power_iteration", "llc": "sgld"}
RISE_NAMES = {"collapse": "rise", "floor": "peak", "recovery": "settle"}
# per-checkpoint diagnostics that are not settings of the measure
_PER_POINT = {"selected_because", "iterations", "converged", "batch_loss", "std", "per_chain", "init_loss",
              "mean_sampled_loss", "flags", "clean", "drift", "top_singular_value"}



RANKME_ENTRIES = {"rankme": "uncentred", "rankme_centred": "centred"}


def _mean_shares(df, layer: str, position: str, steps_wanted: dict) -> dict:
    """Mean share of the RankMe matrix at the named steps (init, extreme, final...)."""
    s, v = curve(df, "mean_share", layer=layer, position=position)
    at = dict(zip(s.tolist(), v.tolist()))
    return {k: (at.get(t) if t is not None else None) for k, t in steps_wanted.items()}


def rankme_entry(df, variant: str, t_acq, e: dict, n_eval: int, eps: float) -> dict:
    """precursor.json entry of RankMe in one variant: the headline layer's events, precursor
    verdict and the mean share at its init, floor and final steps; events of every layer."""
    layer = ev.headline_layer(e)
    layers = list(dict.fromkeys(select(df, "rankme").sort_values("layer_index", kind="stable")["layer"]))
    per_layer = {}
    for name in layers:
        s, v = curve(df, "rankme", layer=name, position=e["position"], variant=variant)
        cev = ev.curve_entry(s, v, "down", e)
        cev["constant_by_construction"] = bool(name == "embed" and e["position"] == "first")
        per_layer[name] = cev
    head = dict(per_layer.get(layer) or ev.curve_entry([], [], "down", e))
    head.update(ev.precursor(head, t_acq, e["transition"], e["precursor_min_gap_frac"]))
    s, _ = curve(df, "rankme", layer=layer, position=e["position"], variant=variant)
    head["mean_share"] = _mean_shares(df, layer, e["position"], {
        "init": int(s[0]) if len(s) else None, "floor": head.get("floor_step"),
        "final": int(s[-1]) if len(s) else None})
    return {"layer": layer, "position": e["position"], "variant": variant, "direction": "collapse",
            "n_samples": n_eval, "eps": eps, **head, "per_layer": per_layer}


def build_precursor(spec: RunSpec, train_summary: dict, df, cfg_events: dict, measures_df=None,
                    probes_df=None, baselines: dict | None = None) -> dict:
    """The precursor.json dict for one run (see module and ``events`` docs).

    ``measures``: ``rankme`` (uncentred, as defined) and ``rankme_centred`` side by side;
    with ``measures_df`` (measures.csv) also grad_erank, grad_cov_erank, hessian_top and llc;
    with ``probes_df`` (probes.csv) a top-level ``probes`` entry. ``baselines``: the
    training distribution's chance and input-blind levels (computed when not given)."""
    e = cfg_events
    p = e["persist"]
    base = baselines or training_baselines(task_data(spec))
    n_eval = int(spec.eval["n_samples"])

    steps, acc_norm = curve(df, "accuracy_norm", position="answer")
    _, acc = curve(df, "accuracy", position="answer")
    t_acq = ev.acquisition_step(steps, acc_norm, e["acquisition_threshold"], p)
    s1, acc1 = curve(df, "accuracy_norm", position="first")
    t_acq_first = ev.acquisition_step(s1, acc1, e["acquisition_threshold"], p)
    s_lp, lp = curve(df, "logprob_per_token")
    t_lp = ev.emergence_step(s_lp, lp, base["logprob_per_token"], e["logprob_margin"], p)
    s_tl, tl = curve(df, "loss", variant="train")
    blind_loss = -base["train_logprob_per_token"]
    if e["plateau_rule"] == "margin":
        t_plateau = ev.plateau_exit_step(s_tl, tl, base["train_logprob_per_token"], e["logprob_margin"], p)
    else:  # the matched onset of the loss curve, measured from the input-blind level
        m = ev.matched_events(s_tl, tl, "down", start=blind_loss, onset_frac=e["onset_frac"],
                              extreme_tol=e["extreme_tol"], return_frac=e["return_frac"],
                              min_change=e["collapse_drop"], persist=p)
        t_plateau = m["onset_step"]
    _, batch_loss = curve(df, "train_loss")
    diverged = (bool(train_summary.get("diverged", False)) or not np.all(np.isfinite(tl))
                or not np.all(np.isfinite(batch_loss)))

    out = {
        "schema_version": SCHEMA_VERSION,
        "run": spec.name, "task": spec.task, "level": spec.level, "size": spec.size,
        "seed": spec.seed, "control": spec.control, "level_params": spec.level_params,
        "n_params": train_summary.get("n_params"), "steps": spec.train["steps"],
        "n_checkpoints": int(len(steps)), "diverged": diverged,
        "acquired": t_acq is not None, "acquisition_step": t_acq,
        "first_token_acquisition_step": t_acq_first,
        "logprob_emergence_step": t_lp, "loss_plateau_exit_step": t_plateau,
        "difficulty": ev.difficulty_by_step(t_acq, e["easy_max_step"], diverged),
        "final_accuracy": float(acc[-1]) if len(acc) else None,
        "max_accuracy": float(np.nanmax(acc)) if len(acc) and np.isfinite(acc).any() else None,
        "chance_accuracy": base["chance_accuracy"], "first_token_chance": base["first_token_chance"],
        "baseline_logprob_per_token": base["logprob_per_token"],
        "baselines": base,
        "eval": {"n_samples": n_eval, "split": "held-out", "positions": {
            "first": "position predicting the first answer token",
            "answer_mean": "mean over positions predicting answer tokens"},
            "plateau_exit": f"{e['plateau_rule']} rule on the float64 loss of a fixed training sample at "
                            f"the checkpoint's weights, from the input-blind loss {blind_loss:.4f}"},
        "events_settings": dict(e),
        "measures": {name: rankme_entry(df, variant, t_acq, e, n_eval, float(spec.eval["rankme_eps"]))
                     for name, variant in RANKME_ENTRIES.items()},
    }
    if spec.is_unit:
        out = mixture_facts(spec, out)
    if measures_df is not None:
        out["measures"].update(measure_entries(measures_df, t_acq, e))
    if probes_df is not None and len(probes_df):
        out["probes"] = probe_entry(probes_df, t_acq, e, ev.headline_layer(e), t_acq_first)
    return json_safe(out)


def mixture_facts(spec: RunSpec, out: dict) -> dict:
    """``out`` with the multi-task protocol's facts after ``control``: protocol, the model
    (the mixture's training run) and the mixture (combinations, sampling shares, this one's)."""
    from ..mixture import combination_names, shares
    names = combination_names(spec.mixture)
    share = dict(zip(names, shares(spec.mixture).tolist()))
    me = spec.name.rsplit("/", 1)[1]
    facts = {"protocol": "mixture", "model": spec.train_name,
             "mixture": {"name": spec.mixture["name"], "combinations": names, "shares": share,
                         "share": share[me], "n_combinations": len(names),
                         "evaluation": "this combination's own held-out samples (unpadded), as its "
                                       "single-task run's with the same seed",
                         "independence": "combinations of one model are not independent: "
                                         "summary statistics resample models"}}
    keys = list(out)
    i = keys.index("control") + 1
    return {**{k: out[k] for k in keys[:i]}, **facts, **{k: out[k] for k in keys[i:]}}


def _flagged(settings: str) -> bool:
    st = json.loads(settings) if isinstance(settings, str) and settings else {}
    return bool(st.get("flags")) or st.get("converged") is False


def measure_entry(mdf, measure: str, t_acq, cfg_events: dict) -> dict:
    """The precursor.json entry of one expensive measure from measures.csv rows (DataFrame)."""
    e = cfg_events
    variant = HEADLINE_VARIANT[measure]
    sub = select(mdf, measure, variant=variant)
    flags = np.array([_flagged(x) for x in sub["settings"]], dtype=bool)
    steps = sub["step"].to_numpy(np.int64)
    vals = sub["value"].to_numpy(np.float64).copy()
    vals[flags] = np.nan
    settings = {}
    if len(sub):
        st = json.loads(sub["settings"].iloc[0])
        settings = {k: v for k, v in st.items() if k not in _PER_POINT}
    direction = DIRECTIONS[measure]
    entry = {"layer": "all_params", "position": "answer", "variant": variant, "direction": direction,
             "n_samples": int(sub["n_samples"].iloc[0]) if len(sub) else None,
             "n_points": int(len(sub)), "measured_steps": [int(x) for x in steps],
             "n_flagged": int(flags.sum()), "flagged_steps": [int(x) for x in steps[flags]]}
    entry.update(ev.curve_entry(steps, vals, "down" if direction == "collapse" else "up", e))
    if direction == "collapse":
        entry.update(ev.precursor(entry, t_acq, e["transition"], e["precursor_min_gap_frac"]))
    else:
        like = {"collapsed": entry["risen"], "collapse_step": entry["rise_step"], "floor_step": entry["peak_step"],
                "recovery_step": entry["settle_step"]}
        pre = ev.precursor(like, t_acq, e["transition"], e["precursor_min_gap_frac"])
        pre["transition"] = RISE_NAMES[pre["transition"]]
        pre["gaps"] = {RISE_NAMES[k]: v for k, v in pre["gaps"].items()}
        entry.update(pre)
    entry["settings"] = settings
    return entry


def measure_entries(mdf, t_acq, cfg_events: dict) -> dict:
    """{measure: entry} for every expensive measure present in measures.csv."""
    present = set(mdf["measure"])
    return {m: measure_entry(mdf, m, t_acq, cfg_events) for m in DIRECTIONS if m in present}


def probe_entry(pdf, t_acq, cfg_events: dict, headline_layer: str = "ln_final", t_acq_first=None) -> dict:
    """precursor.json ``probes`` entry: probe acquisition step per layer (module doc).

    A probe at position "first" predicts the first answer token, so it is compared with the
    acquisition of that token (``t_acq_first``: first-token accuracy, chance-normalised,
    same threshold and persistence), not with whole-answer exact match, which a multi-token
    answer reaches later by construction. Other positions are compared with ``t_acq``."""
    e = cfg_events
    pos = e["position"] if e["position"] in set(pdf["position"]) else "first"
    if pos == "first":
        t_acq, compared_with = t_acq_first, "first-token acquisition"
    else:
        compared_with = "whole-answer acquisition"
    per_layer = {}
    sub = pdf[(pdf["measure"] == "probe_accuracy_norm") & (pdf["position"] == pos)]
    for (li, layer), g in sorted(sub.groupby(["layer_index", "layer"]), key=lambda kv: kv[0][0]):
        g = g.sort_values("step")
        s, v = g["step"].to_numpy(np.int64), g["value"].to_numpy(np.float64)
        t = ev.acquisition_step(s, v, e["acquisition_threshold"], e["persist"])
        st = json.loads(g["settings"].iloc[0]) if len(g) else {}
        acc = pdf[(pdf["measure"] == "probe_accuracy") & (pdf["layer"] == layer) & (pdf["position"] == pos)]
        ch = pdf[(pdf["measure"] == "probe_chance") & (pdf["layer"] == layer) & (pdf["position"] == pos)]
        per_layer[layer] = {
            "layer_index": int(li), "acquisition_step": t,
            "before_behaviour": bool(t is not None and t_acq is not None and t < t_acq),
            "gap_steps": (t_acq - t) if (t is not None and t_acq is not None) else None,
            "precursor": bool(t is not None and t_acq is not None and t < t_acq
                              and (t_acq - t) >= e["precursor_min_gap_frac"] * t_acq),
            "final_accuracy": float(acc.sort_values("step")["value"].iloc[-1]) if len(acc) else None,
            "chance": float(ch["value"].iloc[0]) if len(ch) else None,
            "constant_by_construction": bool(st.get("constant_by_construction", False)),
        }
    real = {k: v for k, v in per_layer.items() if not v["constant_by_construction"] and v["acquisition_step"] is not None}
    earliest = min(real, key=lambda k: (real[k]["acquisition_step"], -per_layer[k]["layer_index"])) if real else None
    head = per_layer.get(headline_layer, {})
    any_row = json.loads(sub["settings"].iloc[0]) if len(sub) else {}
    return {
        "measure": "probe_accuracy_norm", "position": pos, "layer": headline_layer,
        "compared_with": compared_with, "behaviour_acquisition_step": t_acq,
        "definition": f"first probed checkpoint with chance-normalised probe accuracy >= "
                      f"{e['acquisition_threshold']} for {e['persist']} consecutive probed checkpoints",
        "acquisition_step": head.get("acquisition_step"), "gap_steps": head.get("gap_steps"),
        "precursor": head.get("precursor", False),
        "earliest_layer": earliest, "earliest_acquisition_step": real[earliest]["acquisition_step"] if earliest else None,
        "n_test": int(sub["n_samples"].iloc[0]) if len(sub) else None,
        "n_checkpoints": int(sub["step"].nunique()),
        "settings": {k: v for k, v in any_row.items()
                     if k not in ("answer_token", "n_classes", "converged", "n_iter", "train_accuracy",
                                  "constant_by_construction")},
        "per_layer": per_layer,
    }


def precursor_of_run(spec: RunSpec, run_dir: str | Path, cfg_events: dict):
    """(precursor dict, metrics DataFrame) of a run folder, writing nothing."""
    run_dir = Path(run_dir)
    summary = run_record(spec, training_dir(spec, run_dir))    # a mixture unit: its mixture's train.json
    recorded = sorted(int(x) for x in summary.get("checkpoint_steps", []))
    tables = {k: read_table(run_dir / f"{k}.csv") for k in ("metrics", "measures", "probes")
              if k == "metrics" or (run_dir / f"{k}.csv").exists()}
    for k, df in tables.items():
        check_table_against_record(df, run_dir / f"{k}.csv", spec.name, recorded, exact=(k == "metrics"))
    extra = {f"{k}_df": tables[k] for k in ("measures", "probes") if k in tables}
    return build_precursor(spec, summary, tables["metrics"], cfg_events, **extra), tables["metrics"]


def check_table_against_record(df, path: Path, run: str, recorded: list[int], exact: bool) -> None:
    """A per-run table must be this run's (``run`` column) and its steps must be the
    checkpoint steps train.json records (all of them when ``exact``; a subset otherwise)."""
    from ..table import TableError
    fix = f"recompute it with `geoanatomy clean-run {path.parent}` and rerun snakemake"
    runs = sorted(set(df["run"].astype(str))) if len(df) else []
    if runs and runs != [run]:
        raise TableError(f"table {path} holds rows of runs {runs[:5]}, expected only {run!r}; {fix}")
    steps = sorted(set(int(x) for x in df["step"])) if len(df) else []
    if exact and steps != recorded:
        extra, missing = sorted(set(steps) - set(recorded)), sorted(set(recorded) - set(steps))
        raise TableError(f"table {path} does not cover the checkpoints of train.json "
                         f"({len(steps)} steps against {len(recorded)}; extra {extra[:5]}, missing {missing[:5]}); {fix}")
    if not exact and not set(steps) <= set(recorded):
        raise TableError(f"table {path} has steps that are not checkpoints of this run: "
                         f"{sorted(set(steps) - set(recorded))[:5]}; {fix}")


def run(spec: RunSpec, run_dir: str | Path, cfg_events: dict, log=print) -> dict:
    """Write ``run_dir/precursor.json`` and ``run_dir/trajectory.png`` from train.json,
    metrics.csv and (when present) measures.csv and probes.csv. Returns the precursor dict."""
    from ..plots import plot_run
    run_dir = Path(run_dir)
    pre, df = precursor_of_run(spec, run_dir, cfg_events)
    atomic_write_json(run_dir / "precursor.json", pre)
    plot_run(df, pre, run_dir / "trajectory.png")
    rm = pre["measures"]["rankme"]
    log(f"[events] {spec.name}: {pre['difficulty']}, acquisition {pre['acquisition_step']}, "
        f"rankme floor {rm['floor']} @ {rm['floor_step']}, precursor {rm['precursor']}, gap {rm['gap_steps']}")
    return pre
