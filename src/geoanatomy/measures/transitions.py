"""precursor.json entries for the expensive measures (measures.csv) and the probes (probes.csv).

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

import numpy as np

from .. import events as ev

DIRECTIONS = {"grad_erank": "collapse", "grad_cov_erank": "collapse", "hessian_top": "rise", "llc": "rise"}
HEADLINE_VARIANT = {"grad_erank": "roy_vetterli", "grad_cov_erank": "roy_vetterli",
                    "hessian_top": "power_iteration", "llc": "sgld"}
RISE_NAMES = {"collapse": "rise", "floor": "peak", "recovery": "settle"}
# per-checkpoint diagnostics that are not settings of the measure
_PER_POINT = {"selected_because", "iterations", "converged", "batch_loss", "std", "per_chain", "init_loss",
              "mean_sampled_loss", "flags", "clean", "drift", "top_singular_value"}


def rise_events(steps, values, collapse_drop: float = 0.3, collapse_half: float = 0.5,
                recovery_rise: float = 0.25, persist: int = 3) -> dict:
    """init, peak, peak_step, risen, rise_step, settle_step, final of a rising curve (module doc)."""
    s, v = ev._clean(steps, values)
    out = {"init": None, "peak": None, "peak_step": None, "risen": False, "rise_step": None,
           "settle_step": None, "final": None}
    if len(v) == 0:
        return out
    init, k = float(v[0]), int(np.argmax(v))
    peak = float(v[k])
    out.update(init=init, peak=peak, peak_step=int(s[k]), final=float(v[-1]))
    if peak > 0 and init <= (1.0 - collapse_drop) * peak:
        out["risen"] = True
        out["rise_step"] = int(s[np.argmax(v >= init + collapse_half * (peak - init))])
        after = slice(k + 1, None)
        out["settle_step"] = ev.first_sustained(s[after], v[after] <= peak / (1.0 + recovery_rise), persist)
    return out


def _flagged(settings: str) -> bool:
    st = json.loads(settings) if isinstance(settings, str) and settings else {}
    return bool(st.get("flags")) or st.get("converged") is False


def measure_entry(mdf, measure: str, t_acq, cfg_events: dict) -> dict:
    """The precursor.json entry of one expensive measure from measures.csv rows (DataFrame)."""
    e = cfg_events
    variant = HEADLINE_VARIANT[measure]
    sub = mdf[(mdf["measure"] == measure) & (mdf["variant"] == variant)].sort_values("step")
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
    col = ev.curve_events(steps, vals, e["collapse_drop"], e["collapse_half"], e["recovery_rise"], e["persist"])
    entry.update(col)
    if direction == "collapse":
        entry.update(ev.precursor(col, t_acq, e["transition"], e["precursor_min_gap_frac"]))
    else:
        rise = rise_events(steps, vals, e["collapse_drop"], e["collapse_half"], e["recovery_rise"], e["persist"])
        entry.update(rise)
        like = {"collapsed": rise["risen"], "collapse_step": rise["rise_step"], "floor_step": rise["peak_step"],
                "recovery_step": rise["settle_step"]}
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


def probe_entry(pdf, t_acq, cfg_events: dict, headline_layer: str = "ln_final") -> dict:
    """precursor.json ``probes`` entry: probe acquisition step per layer (module doc)."""
    e = cfg_events
    pos = e["position"] if e["position"] in set(pdf["position"]) else "first"
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
