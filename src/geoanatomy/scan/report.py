"""precursor.json and trajectory.png of a monitored run or a scanned checkpoint folder
(torch-free), from its long table (``geoanatomy.table``) with the pipeline's own code.

Geometry: ``precursor.rankme_entry`` for both variants (``measures.rankme`` uncentred,
``measures.rankme_centred``): headline layer events, precursor verdict, mean share at init,
floor and final steps, events of every layer; the detectors are ``geoanatomy.detectors``
with the ``events:`` thresholds (``defaults.DEFAULTS["events"]`` unless given).

Behaviour, whichever the table has:

* ``accuracy_norm`` rows (a benchmark with answers, or a monitor probe with labels and a
  chance level): acquisition = ``events.acquisition_step`` (the pipeline's definition);
  with ``logprob_choice`` rows (benchmarks) log-prob emergence as in the Pythia branch.
* otherwise (prompts without answers, or a monitor probe without chance level): there is no
  accuracy and no acquisition; the behaviour curve is the probe-set ``loss`` (mean next-token
  loss), its matched events (``events.matched_events``, direction down, from its first value)
  are reported under ``behaviour``, and ``behaviour.note`` says so.

The figure: ``plots.plot_run`` when the table has accuracy and token accuracy (the monitor
with labels), ``pythia.plot.plot_pythia_run`` for benchmarks, and a loss panel otherwise.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .. import detectors as ev
from ..defaults import DEFAULTS
from ..files import json_safe
from ..precursor import RANKME_ENTRIES, SCHEMA_VERSION, difficulty, easy_max_of_budget, rankme_entry
from ..table import curve, select


def events_settings(cfg_events: dict | None, layer: str, position: str) -> dict:
    """The ``events:`` block (defaults filled in) with the headline layer and position set."""
    e = {**DEFAULTS["events"], **(cfg_events or {})}
    e["layer"], e["position"] = layer, position
    return e


def headline_layer(df, wanted: str | None) -> str:
    """The table's layer called ``wanted`` ("final"/"ln_final"/None: the deepest layer)."""
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
            "loss": {"definition": st.get("definition", "mean next-token loss over the probe set"),
                     "init": m["start"], "final": m["final"], "min": m["extreme"], "changed": m["changed"],
                     "drop_onset_step": m["onset_step"], "half_step": m["half_step"],
                     "min_step": m["extreme_step"], "rebound_step": m["return_step"]},
            "note": "the probe set has no answers, so there is no accuracy and no acquisition step: the "
                    "behaviour curve is the probe-set loss (mean next-token loss over the prompts); its "
                    "events are the matched detector's on a falling curve from its first value"}


def _acc_position(df) -> str | None:
    pos = list(dict.fromkeys(select(df, "accuracy")["position"]))
    return pos[0] if pos else None


def build_report(df, *, run: str, kind: str, n_params: int | None, cfg_events: dict | None = None,
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
    e = events_settings(cfg_events, layer, position)
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
    from ..config.pythia import EASY_MAX_FRAC
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


def plot_report(df, pre: dict, out_png: str | Path) -> None:
    """trajectory.png of a report (module doc)."""
    from ..plots import plot_run
    measures = set(df["measure"])
    if pre["behaviour"]["kind"] == "accuracy":
        if "token_accuracy" in measures:
            return plot_run(df, pre, out_png)
        from ..pythia.plot import plot_pythia_run
        return plot_pythia_run(df, {**pre, "scoring": pre.get("scoring", "sum")}, out_png)
    return plot_loss_run(df, pre, out_png)


def plot_loss_run(df, pre: dict, out_png: str | Path) -> None:
    """Two panels: probe-set loss + headline RankMe with its events, RankMe of every layer."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..plots import _x, curve_getter, mark_events, plot_layers, save_png, title_and_legend
    rm = pre["measures"]["rankme"]
    pos, var, layer = rm["position"], rm["variant"], rm["layer"]
    get = curve_getter(df)
    fig, (ax1, ax3) = plt.subplots(2, 1, figsize=(8, 7.5), sharex=True, constrained_layout=True)
    s, loss = get("loss")
    ax1.plot(_x(s), loss, color="tab:green", lw=2, label="probe-set loss (mean next-token)")
    ax1.set_ylabel("loss (nats per token)")
    ax2 = ax1.twinx()
    s, r = get("rankme", layer=layer, position=pos, variant=var)
    ax2.plot(_x(s), r, color="tab:blue", lw=2, label=f"RankMe {layer}, pos={pos}, {var}")
    ax2.set_ylabel(f"RankMe ({layer}, {pos}, {var}, N={rm['n_samples']})", color="tab:blue")
    mark_events(ax1, pre)
    title_and_legend(ax1, ax2, {**pre, "n_params": pre.get("n_params") or 0}, loc="upper right")
    plot_layers(ax3, get, pre, f"RankMe per layer ({pos}, {var})")
    save_png(fig, out_png)
