"""precursor.json: its three builders, in one place (torch-free). Each reads a run's long table
(``geoanatomy.table``) and assembles the record from the same entries (``precursor.entries``:
``rankme_entry``, ``layer_events``, ``headline_entry``, ...), the same detectors
(``geoanatomy.detectors``) and the same rules (``precursor.rules``); the callers write it with
``precursor.seal.write_sealed``.

``events_record`` - an algorithmic run of the workflow (the events stage; docs/outputs.md):
    top-level run facts and behavioural events, ``measures.<name>`` per geometric measure,
    with probes a top-level ``probes`` entry. Behaviour: acquisition (chance-normalised
    accuracy of the whole answer, and of its first token), log-probability emergence over the
    input-blind baseline, the loss-plateau exit (``plateau_rule``: "matched" = the matched
    onset of the training-sample loss measured from the input-blind loss; "margin" = the legacy
    margin rule), divergence (a non-finite loss).

``pythia_record`` - one Pythia model x benchmark (``pythia.events``): acquisition on
    ``accuracy_norm`` (chance-normalised multiple-choice accuracy), log-prob emergence on
    ``logprob_choice`` over chance, RankMe at the last prompt token of ``pythia.layer``; where a
    key of the algorithmic record has no counterpart it is null and ``not_applicable`` says why;
    ``final_accuracy_norm``, ``floor_norm`` (floor / min(N, d)) and ``last_token_stratum`` for
    comparisons across benchmarks and sizes (``pythia.events`` module doc).

``report_record`` - a monitored run (``kind`` "monitor") or a scan ("scan"). Behaviour,
    whichever the table has:

    * ``accuracy_norm`` rows (a benchmark with answers, or a monitor probe with labels and a
      chance level): acquisition = ``detectors.acquisition_step`` (the pipeline's definition);
      with ``logprob_choice`` rows (benchmarks) log-prob emergence as in the Pythia branch.
    * otherwise (prompts without answers, or a monitor probe without chance level): there is
      no accuracy and no acquisition; the behaviour curve is the probe-set ``loss`` (mean
      next-token loss), its matched events (``detectors.matched_events``, direction down, from
      its first value) are reported under ``behaviour``, and ``behaviour.note`` says so.

    ``difficulty``: one rule for both, the Pythia branch's (acquired within ``EASY_MAX_FRAC``
    of the last step seen; ``difficulty_rule`` says so); "no accuracy" without accuracy.
"""
from __future__ import annotations

import json
import math

import numpy as np

from .. import detectors as ev
from ..config.pythia import EASY_MAX_FRAC
from ..defaults import events_settings
from ..errors import ConfigError
from ..files import json_safe
from ..table import curve, select
from .entries import (RANKME_ENTRIES, floor_window_end, headline_entry, layer_events, measure_entries,
                      probe_entry, rankme_entry, run_difficulty)
from .rules import SCHEMA_VERSION, difficulty, easy_max_of_budget


# ------------------------------------------------------------- an algorithmic run
def events_record(facts: dict, df, cfg_events: dict, baselines: dict, n_eval: int, eps: float,
               diverged: bool = False, measures_df=None, probes_df=None, n_eval_distinct: int | None = None) -> dict:
    """The precursor.json dict of one algorithmic run (module doc; not yet ``json_safe``).

    ``facts``: run, task, level, size, seed, control, level_params, n_params, steps (in this
    order); ``df``: metrics.csv rows; ``baselines``: the training distribution's chance and
    input-blind levels (``geoanatomy.baselines``); ``diverged``: training said so (a
    non-finite loss in the table also counts). ``measures``: ``rankme`` (uncentred, as
    defined) and ``rankme_centred`` side by side; with ``measures_df`` (measures.csv) every
    expensive measure present; with ``probes_df`` (probes.csv) a top-level ``probes`` entry.
    ``n_eval_distinct``: how many different inputs the evaluation set holds (recorded)."""
    e, base = cfg_events, baselines
    p = e["persist"]
    steps, acc_norm = curve(df, "accuracy_norm", position="answer")
    _, acc = curve(df, "accuracy", position="answer")
    t_acq = ev.acquisition_step(steps, acc_norm, e["acquisition_threshold"], p)
    s1, acc1 = curve(df, "accuracy_norm", position="first")
    t_acq_first = ev.acquisition_step(s1, acc1, e["acquisition_threshold"], p)
    # the training side's acquisition (chance-normalised like the held-out one): grokking's
    # delay is acquisition_step - train_acquisition_step; None when the table predates the row
    s_tr, acc_tr = curve(df, "train_accuracy", variant="train")
    c = base["chance_accuracy"]
    t_train = (ev.acquisition_step(s_tr, (acc_tr - c) / (1.0 - c), e["acquisition_threshold"], p)
               if len(s_tr) and c < 1 else None)
    # an in-context task's mechanism: the first checkpoint some head's prefix-matching score
    # (measures.induction) holds >= 0.5 at the query; None where the table has no such rows
    ind = select(df, "prefix_matching", variant="max")
    t_ind = None
    if len(ind):
        best = ind.groupby("step")["value"].max()
        t_ind = ev.acquisition_step(best.index.to_numpy(), best.to_numpy(float), 0.5, p)
    s_lp, lp = curve(df, "logprob_per_token")
    t_lp = ev.emergence_step(s_lp, lp, base["logprob_per_token"], e["logprob_margin"], p)
    matched = dict(onset_frac=e["onset_frac"], extreme_tol=e["extreme_tol"], return_frac=e["return_frac"],
                   min_change=e["collapse_drop"], persist=p)
    # log-probability at the depth accuracy is read at: half of its rise from the input-blind level
    lp_m = ev.matched_events(s_lp, lp, "up", start=base["logprob_per_token"], **matched)
    s_tl, tl = curve(df, "loss", variant="train")
    blind_loss = -base["train_logprob_per_token"]
    # the loss curve's matched events, measured from the input-blind level
    loss_m = ev.matched_events(s_tl, tl, "down", start=blind_loss, **matched)
    if e["plateau_rule"] == "margin":
        t_plateau = ev.plateau_exit_step(s_tl, tl, base["train_logprob_per_token"], e["logprob_margin"], p)
    else:
        t_plateau = loss_m["onset_step"]
    window = floor_window_end(e, loss_m["onset_step"])
    _, batch_loss = curve(df, "train_loss")
    diverged = (bool(diverged) or not np.all(np.isfinite(tl)) or not np.all(np.isfinite(batch_loss)))
    cls, cls_source = run_difficulty(facts, t_acq, e, diverged)

    out = {
        "schema_version": SCHEMA_VERSION, **facts,
        "n_checkpoints": int(len(steps)), "diverged": diverged,
        "acquired": t_acq is not None, "acquisition_step": t_acq,
        "first_token_acquisition_step": t_acq_first,
        "train_acquisition_step": t_train,
        "induction_head_step": t_ind,
        "generalisation_delay": (t_acq - t_train) if t_acq is not None and t_train is not None else None,
        "logprob_emergence_step": t_lp, "logprob_half_step": lp_m["half_step"],
        "loss_plateau_exit_step": t_plateau,
        "loss_events": {"onset_step": loss_m["onset_step"], "half_step": loss_m["half_step"],
                        "extreme_step": loss_m["extreme_step"], "changed": loss_m["changed"],
                        "curve": "float64 loss of a fixed training sample, matched events from the input-blind loss"},
        "floor_window": {"rule": e["floor_window"], "end_step": window,
                         "meaning": "a collapse's floor is its extreme at or before end_step (the loss's matched "
                                    "onset; the whole run when None); the run's own extreme is global_floor"},
        "difficulty": cls, "difficulty_source": cls_source,
        "final_accuracy": float(acc[-1]) if len(acc) else None,
        "max_accuracy": float(np.nanmax(acc)) if len(acc) and np.isfinite(acc).any() else None,
        "chance_accuracy": base["chance_accuracy"], "first_token_chance": base["first_token_chance"],
        "baseline_logprob_per_token": base["logprob_per_token"],
        "baselines": base,
        "eval": {"n_samples": n_eval, "distinct_inputs": n_eval_distinct, "split": "held-out", "positions": {
            "first": "position predicting the first answer token",
            "answer_mean": "mean over positions predicting answer tokens"},
            "plateau_exit": f"{e['plateau_rule']} rule on the float64 loss of a fixed training sample at "
                            f"the checkpoint's weights, from the input-blind loss {blind_loss:.4f}"},
        "events_settings": dict(e),
        "measures": {name: rankme_entry(df, variant, t_acq, e, n_eval, eps, window)
                     for name, variant in RANKME_ENTRIES.items()},
    }
    if measures_df is not None:
        out["measures"].update(measure_entries(measures_df, t_acq, e, window))
    if probes_df is not None and len(probes_df):
        out["probes"] = probe_entry(probes_df, t_acq, e, ev.headline_layer(e), t_acq_first)
    return out


# ------------------------------------------------------------- a Pythia model x benchmark
def _curve(df, measure: str, **match):
    """(steps, values, rows) of one curve (the rows carry each point's settings)."""
    sub = select(df, measure, **match)
    return sub["step"].to_numpy(np.int64), sub["value"].to_numpy(np.float64), sub


SHARED_LAST_TOKEN = 0.5      # top last-token share at or above which a benchmark's stratum is "shared"


def safe_ratio(a, b):
    """a / b as a float; None when either is missing, b is 0 or a is not finite."""
    if a is None or b in (None, 0):
        return None
    a = float(a)
    return a / float(b) if math.isfinite(a) else None


def pythia_record(df, run: str, bench: str, extract: dict, dups: dict, e: dict) -> dict:
    """precursor.json dict for one model x benchmark; ``df`` = that run's rows only."""
    p = e["persist"]
    steps, acc_norm, sub = _curve(df, "accuracy_norm")
    if len(steps) == 0:
        raise ValueError(f"{run}: no accuracy rows for benchmark {bench!r} in metrics.csv")
    chance = float(json.loads(sub["settings"].iloc[0])["chance"])
    _, acc, _ = _curve(df, "accuracy")
    t_acq = ev.acquisition_step(steps, acc_norm, e["acquisition_threshold"], p)
    s_lc, lc, sub_lc = _curve(df, "logprob_choice")
    chance_lc = float(json.loads(sub_lc["settings"].iloc[0])["chance"])
    t_lp = ev.emergence_step(s_lc, lc, chance_lc, e["logprob_margin"], p)

    rm = df[(df["measure"] == "rankme") & (df["position"] == "last_prompt") & (df["variant"] == e["variant"])]
    layers = list(dict.fromkeys(rm.sort_values("layer_index")["layer"]))
    if e["layer"] not in layers:
        raise ConfigError(f"config field 'pythia.layer': {e['layer']!r} is not a layer of {run}; "
                          f"layers: {layers}")

    def layer_facts(name, cev):                    # what the rows' settings say of each layer
        st = json.loads(select(rm, "rankme", layer=name)["settings"].iloc[0])
        return {"constant_by_construction": bool(st.get("constant_by_construction")),
                "max_rank": st.get("max_rank"), "floor_norm": safe_ratio(cev.get("floor"), st.get("max_rank"))}
    per_layer = layer_events(rm, e, "last_prompt", e["variant"], layer_facts)
    head = headline_entry(per_layer, e["layer"], t_acq, e)
    st_head = json.loads(rm[rm["layer"] == e["layer"]]["settings"].iloc[0])
    n_last = st_head.get("n_unique_last_tokens")
    top = st_head.get("top_last_token_share")
    head.update(n_unique_last_tokens=n_last, top_last_token_share=top,
                last_token_stratum=None if top is None else ("shared" if top >= SHARED_LAST_TOKEN else "diverse"))
    n_items = int(sub["n_samples"].iloc[0])
    total = int(extract["max_step"])
    out = {
        "schema_version": SCHEMA_VERSION, "kind": "pythia",
        "run": f"{run}_{bench}", "task": bench, "level": None, "size": extract["name"],
        "model_source": extract["source"], "benchmark": bench,
        "n_params": extract["model"]["n_params"], "steps": total,
        "n_checkpoints": int(len(steps)), "n_duplicates_excluded": int(dups["n_duplicates"]),
        "duplicates_excluded": [d["revision"] for d in dups["duplicates"]],
        "diverged": False, "acquired": t_acq is not None, "acquisition_step": t_acq,
        "logprob_emergence_step": t_lp, "loss_plateau_exit_step": None,
        "difficulty": difficulty(t_acq, easy_max_of_budget(total, e["easy_max_frac"])),
        "final_accuracy": float(acc[-1]), "max_accuracy": float(np.nanmax(acc)),
        "final_accuracy_norm": float((acc[-1] - chance) / (1 - chance)),
        "chance_accuracy": chance, "chance_logprob_choice": chance_lc,
        "scoring": e["scoring"],
        "eval": {"n_samples": n_items, "split": f"benchmark items ({bench})", "positions": {
            "last_prompt": "last prompt token (predicts the first option token)"}},
        "not_applicable": {"loss_plateau_exit_step": "no training loss is measured at Pythia revisions",
                           "marginal_logprob_per_token": "replaced by chance_logprob_choice"},
        "events_settings": dict(e),
        "measures": {"rankme": {"layer": e["layer"], "position": "last_prompt", "variant": e["variant"],
                                "n_samples": n_items, "eps": float(extract["rankme_eps"]), **head,
                                "per_layer": per_layer}},
    }
    return json_safe(out)


# ------------------------------------------------------------- a monitored or scanned run
# what a probe-set loss is when its rows do not say (tables written before the rows carried it)
LOSS_DEFINITION = "mean next-token loss over the probe set"


def headline_layer(df, wanted: str | None) -> str:
    """The table's layer called ``wanted`` ("final"/"ln_final"/None: the deepest layer)."""
    from ..sizes import canonical_layer
    wanted = canonical_layer(wanted) if wanted else wanted        # final_ln_post, layerK: read as ln_final, block{K-1}
    rm = select(df, "rankme").sort_values("layer_index", kind="stable")
    layers = list(dict.fromkeys(rm["layer"]))
    if not layers:
        raise ValueError("the table has no rankme rows")
    if wanted in (None, "final", "ln_final") and wanted not in layers:
        return layers[-1]
    if wanted not in layers:
        raise ValueError(f"layer {wanted!r} is not in the table; layers: {layers}")
    return wanted


def _settings_of(df, measure: str, **match) -> dict:
    sub = select(df, measure, **match)
    if not len(sub):
        return {}
    s = sub["settings"].iloc[0]
    return json.loads(s) if isinstance(s, str) and s else {}


def behaviour_entry(df, e: dict) -> dict:
    """Behavioural events of the table (module doc)."""
    p = e["persist"]
    s_acc, acc_norm = curve(df, "accuracy_norm", position=_acc_position(df))
    if len(s_acc):
        t_acq = ev.acquisition_step(s_acc, acc_norm, e["acquisition_threshold"], p)
        _, acc = curve(df, "accuracy", position=_acc_position(df))
        chance = _settings_of(df, "accuracy_norm").get("chance")
        out = {"kind": "accuracy", "acquired": t_acq is not None, "acquisition_step": t_acq,
               "final_accuracy": float(acc[-1]) if len(acc) else None,
               "max_accuracy": float(np.nanmax(acc)) if len(acc) and np.isfinite(acc).any() else None,
               "chance_accuracy": chance,
               "definition": f"first checkpoint with chance-normalised accuracy >= {e['acquisition_threshold']} "
                             f"for {p} consecutive checkpoints (events.acquisition_step)"}
        s_lc, lc = curve(df, "logprob_choice")
        if len(s_lc):
            c = _settings_of(df, "logprob_choice").get("chance")
            out["chance_logprob_choice"] = c
            out["logprob_emergence_step"] = ev.emergence_step(s_lc, lc, c, e["logprob_margin"], p)
        return out
    s, loss = curve(df, "loss")
    m = ev.matched_events(s, loss, "down", onset_frac=e["onset_frac"], extreme_tol=e["extreme_tol"],
                          return_frac=e["return_frac"], min_change=e["collapse_drop"], persist=p)
    st = _settings_of(df, "loss")
    return {"kind": "loss", "acquired": None, "acquisition_step": None,
            "loss": {"definition": st.get("definition") or LOSS_DEFINITION,
                     "init": m["start"], "final": m["final"], "min": m["extreme"], "changed": m["changed"],
                     "drop_onset_step": m["onset_step"], "half_step": m["half_step"],
                     "min_step": m["extreme_step"], "rebound_step": m["return_step"]},
            "note": "the probe set has no answers, so there is no accuracy and no acquisition step: the "
                    "behaviour curve is the probe-set loss (mean next-token loss over the prompts); its "
                    "events are the matched detector's on a falling curve from its first value"}


def _acc_position(df) -> str | None:
    pos = list(dict.fromkeys(select(df, "accuracy")["position"]))
    return pos[0] if pos else None


def report_record(df, *, run: str, kind: str, n_params: int | None, cfg_events: dict | None = None,
                 layer: str | None = None, position: str | None = None, eps: float = 1e-7,
                 extra: dict | None = None) -> dict:
    """The precursor.json dict of a monitored run (``kind`` "monitor") or a scanned folder
    ("scan") from its long table ``df`` (module doc). ``difficulty`` (``precursor.difficulty``):
    one rule for both, the Pythia branch's (acquired within ``EASY_MAX_FRAC`` of the last step
    seen; ``difficulty_rule`` says so); "no accuracy" without accuracy. ``warnings``: what the
    reader must know (curves that start after step 0)."""
    layer = headline_layer(df, layer)
    rm = select(df, "rankme")
    if position is None:
        position = str(rm["position"].iloc[0])
    e = events_settings(cfg_events, layer=layer, position=position)
    beh = behaviour_entry(df, e)
    t_acq = beh["acquisition_step"]
    n = int(select(df, "rankme", layer=layer, position=position)["n_samples"].iloc[0])
    steps = sorted({int(x) for x in rm["step"]})
    measures = {name: rankme_entry(df, variant, t_acq, e, n, eps) for name, variant in RANKME_ENTRIES.items()}
    for m in measures.values():                    # per-layer facts the rows' settings carry
        for name, cev in m["per_layer"].items():
            st = _settings_of(df, "rankme", layer=name, position=position)
            cev["max_rank"] = st.get("max_rank")
            cev["constant_by_construction"] = bool(cev.get("constant_by_construction")
                                                   or st.get("constant_by_construction"))
    # one difficulty rule for a monitored and a scanned run (they once disagreed on the same
    # run): acquired within the first EASY_MAX_FRAC of the steps seen, as the Pythia branch
    easy_max = easy_max_of_budget(steps[-1], EASY_MAX_FRAC) if steps else None
    cls = "no accuracy" if beh["kind"] != "accuracy" else difficulty(t_acq, easy_max)
    warns = []
    if steps and steps[0] > 0:
        warns.append(f"the curves start at step {steps[0]}, not 0 (no checkpoint before it): a collapse or an"
                     f" acquisition before step {steps[0]} cannot be seen, so 'no collapse' means none after it")
    out = {
        "schema_version": SCHEMA_VERSION, "kind": kind, "run": run, "n_params": n_params,
        "n_checkpoints": len(steps), "steps": steps[-1] if steps else None, "checkpoint_steps": steps,
        "acquired": beh["acquired"], "acquisition_step": t_acq,
        "logprob_emergence_step": beh.get("logprob_emergence_step"),
        "difficulty": cls, "difficulty_rule": f"easy when acquired by step {easy_max:g} (the first {EASY_MAX_FRAC:g}"
                                                  " of the steps seen), hard later", "behaviour": beh,
        "warnings": warns,
        "eval": {"n_samples": n, "position": position, "layer": layer},
        "events_settings": e, "measures": measures,
    }
    for k in ("final_accuracy", "max_accuracy", "chance_accuracy"):
        if k in beh:
            out[k] = beh[k]
    # the training-fit event (a monitor's train_probe, a scan's --train-probe): the first checkpoint
    # whose chance-normalised training-probe accuracy holds the acquisition threshold; grokking's
    # delay is the held-out acquisition step minus it
    s_tr, acc_tr = curve(df, "train_accuracy_norm", variant="train")
    if len(s_tr):
        t_train = ev.acquisition_step(s_tr, acc_tr, e["acquisition_threshold"], e["persist"])
        out["train_acquisition_step"] = t_train
        out["generalisation_delay"] = (t_acq - t_train) if t_acq is not None and t_train is not None else None
    if beh["kind"] == "loss":
        rmh = measures["rankme"]
        t_tr = rmh.get("transition_step")
        half = beh["loss"]["half_step"]
        out["geometry_vs_loss"] = {
            "transition": rmh["transition"], "transition_step": t_tr, "loss_half_step": half,
            "lead_steps": (half - t_tr) if (half is not None and t_tr is not None) else None,
            "note": "informational: with no accuracy there is no precursor verdict; lead = loss half-drop "
                    "step - the RankMe transition step"}
    out.update(extra or {})
    return json_safe(out)
