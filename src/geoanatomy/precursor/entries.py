"""The entries of precursor.json (torch-free): what ``precursor.record``'s three builders
assemble.

``measures.<name>`` per geometric measure with the headline layer's curve events and
precursor verdict, plus ``per_layer`` events for every layer (``layer_events``,
``headline_entry``, ``rankme_entry``, ``measure_entry``); a top-level ``probes`` entry
(``probe_entry``); the difficulty class and the floor window of a run. The
detectors are ``geoanatomy.detectors``, the rules ``precursor.rules``; thresholds are the
``events:`` block's, so every measure is judged by the same numbers as RankMe.

Geometric measures, each with the direction of its transition
(``measures.registry``):

collapse (rankme, rankme_centred, grad_erank, grad_cov_erank)
    the curve's falling events (``events.curve_entry``): collapse, floor, recovery.
rise (hessian_top, llc)
    these grow during learning (sharpening; a more complex solution), so the mirror image
    is detected: rise, peak, settle. The configured transition maps collapse -> rise,
    floor -> peak, recovery -> settle.

Precursor (both directions, ``precursor_verdict``): the measure transitioned (collapsed /
risen), and the transition step passes ``is_precursor`` against acquisition. Points whose
row is flagged (LLC negative / chains disagree / non-finite; power iteration not
converged) are left out of the curve; ``n_flagged`` and ``flagged_steps`` say which.

Probes: per layer the probe acquisition step, defined like behavioural acquisition: the
first checkpoint whose chance-normalised probe accuracy (acc - chance) / (1 - chance) is
>= ``acquisition_threshold`` (0.5) there and at the next persist - 1 probed checkpoints.
"""
from __future__ import annotations

import json

import numpy as np
from scipy.stats import rankdata

from .. import detectors as ev
from ..measures.registry import DIRECTIONS, HEADLINE_VARIANT
from ..table import curve, select
from .rules import difficulty, is_precursor, precursor_verdict

RANKME_ENTRIES = {"rankme": "uncentred", "rankme_centred": "centred"}
RISE_NAMES = {"collapse": "rise", "floor": "peak", "recovery": "settle"}
# per-checkpoint diagnostics that are not settings of the measure
PER_POINT = {"schedule", "selected_because", "iterations", "converged", "batch_loss", "std", "per_chain", "init_loss",
             "mean_sampled_loss", "flags", "clean", "drift", "top_singular_value"}


# ------------------------------------------------------------------------- RankMe
def mean_shares(df, layer: str, position: str, steps_wanted: dict) -> dict:
    """Mean share of the RankMe matrix at the named steps (init, extreme, final...)."""
    s, v = curve(df, "mean_share", layer=layer, position=position)
    at = dict(zip(s.tolist(), v.tolist()))
    return {k: (at.get(t) if t is not None else None) for k, t in steps_wanted.items()}


def rank_corr_with_mean_share(df, layer: str, position: str, variant: str) -> float | None:
    """Rank correlation over checkpoints of RankMe (``variant``) with 1 - mean share of the
    same matrix (Pearson correlation of average-tie ranks; None with fewer than 3 common
    checkpoints or a constant curve). Close to 1: the curve says how much of the matrix is
    its mean row (one direction shared by every example), not how many directions the
    examples spread over; the summary flags such rows "mean-direction"."""
    s_r, v_r = curve(df, "rankme", layer=layer, position=position, variant=variant)
    s_m, v_m = curve(df, "mean_share", layer=layer, position=position)
    share = dict(zip(s_m.tolist(), v_m.tolist()))
    pairs = [(r, 1.0 - share[t]) for t, r in zip(s_r.tolist(), v_r.tolist()) if t in share]
    if len(pairs) < 3:
        return None
    a, b = (rankdata(np.asarray(x, dtype=float)) for x in zip(*pairs))
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def layer_events(df, e: dict, position: str, variant: str, facts=None, before: int | None = None,
                 constant=None) -> dict:
    """{layer: falling-curve events of RankMe at ``position`` / ``variant``} for every layer
    of ``df``'s rankme rows, in depth order; ``facts(layer, events)`` -> dict of keys the
    writer adds to each layer's entry; ``before``: the floor window's end (``floor_window``);
    ``constant(layer) -> bool``: the layer's curve is constant by construction (no events,
    ``events.constant_entry``)."""
    layers = list(dict.fromkeys(select(df, "rankme").sort_values("layer_index", kind="stable")["layer"]))
    per_layer = {}
    for name in layers:
        s, v = curve(df, "rankme", layer=name, position=position, variant=variant)
        cev = ev.curve_entry(s, v, "down", e, before=before, constant=bool(constant and constant(name)))
        if facts is not None:
            cev.update(facts(name, cev))
        per_layer[name] = cev
    return per_layer


def headline_entry(per_layer: dict, layer: str, t_acq, e: dict) -> dict:
    """The headline layer's events (empty events if the table lacks it) with its precursor
    verdict against acquisition at t_acq."""
    head = dict(per_layer.get(layer) or ev.curve_entry([], [], "down", e))
    head.update(precursor_verdict(head, t_acq, e["transition"], e["precursor_min_gap_frac"]))
    return head


def rankme_entry(df, variant: str, t_acq, e: dict, n_eval: int, eps: float, before: int | None = None) -> dict:
    """precursor.json entry of RankMe in one variant: the headline layer's events, precursor
    verdict and the mean share at its init, floor and final steps; events of every layer.
    ``before``: the floor is the extreme at or before this step (``floor_window``)."""
    layer, pos = ev.headline_layer(e), e["position"]
    const = lambda name: name == "embed" and pos == "first"           # the same token in every row
    per_layer = layer_events(df, e, pos, variant, lambda name, _: {"constant_by_construction": const(name)},
                             before=before, constant=const)
    head = headline_entry(per_layer, layer, t_acq, e)
    s, _ = curve(df, "rankme", layer=layer, position=pos, variant=variant)
    head["mean_share"] = mean_shares(df, layer, pos, {
        "init": int(s[0]) if len(s) else None, "floor": head.get("floor_step"),
        "final": int(s[-1]) if len(s) else None})
    head["mean_share"]["rank_corr_with_rankme"] = rank_corr_with_mean_share(df, layer, pos, variant)
    return {"layer": layer, "position": pos, "variant": variant, "direction": "collapse",
            "n_samples": n_eval, "eps": eps, **head, "per_layer": per_layer}


# ------------------------------------------------------------- expensive measures
def _flagged(settings: str) -> bool:
    st = json.loads(settings) if isinstance(settings, str) and settings else {}
    return bool(st.get("flags")) or st.get("converged") is False


def measure_entry(mdf, measure: str, t_acq, cfg_events: dict, before: int | None = None) -> dict:
    """The precursor.json entry of one expensive measure from measures.csv rows (DataFrame).
    ``before``: a collapse's floor window end (``floor_window``; rises keep the run's peak)."""
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
        settings = {k: v for k, v in st.items() if k not in PER_POINT}
    direction = DIRECTIONS[measure]
    entry = {"layer": "all_params", "position": "answer", "variant": variant, "direction": direction,
             "n_samples": int(sub["n_samples"].iloc[0]) if len(sub) else None,
             "n_points": int(len(sub)), "measured_steps": [int(x) for x in steps],
             "n_flagged": int(flags.sum()), "flagged_steps": [int(x) for x in steps[flags]]}
    entry.update(ev.curve_entry(steps, vals, "down" if direction == "collapse" else "up", e,
                                before=before if direction == "collapse" else None))
    if direction == "collapse":
        entry.update(precursor_verdict(entry, t_acq, e["transition"], e["precursor_min_gap_frac"]))
    else:
        like = {"collapsed": entry["risen"], "collapse_step": entry["rise_step"], "floor_step": entry["peak_step"],
                "recovery_step": entry["settle_step"]}
        pre = precursor_verdict(like, t_acq, e["transition"], e["precursor_min_gap_frac"])
        pre["transition"] = RISE_NAMES[pre["transition"]]
        pre["gaps"] = {RISE_NAMES[k]: v for k, v in pre["gaps"].items()}
        entry.update(pre)
    entry["settings"] = settings
    return entry


def measure_entries(mdf, t_acq, cfg_events: dict, before: int | None = None) -> dict:
    """{measure: entry} for every expensive measure present in measures.csv (registry order)."""
    present = set(mdf["measure"])
    return {m: measure_entry(mdf, m, t_acq, cfg_events, before) for m in DIRECTIONS if m in present}


def run_difficulty(facts: dict, t_acq, e: dict, diverged: bool) -> tuple[str, dict]:
    """(difficulty, its source) of one run. With ``events.classes_file`` the class of the
    run's task x level x size cell in the class file (calibration seeds disjoint from the
    analysed ones; ``geoanatomy.classes``), "unlearned" or "diverged" as the run itself says;
    without, the post-hoc rule on the run's own acquisition step (``difficulty``)."""
    path = e.get("classes_file")
    if not path:
        return difficulty(t_acq, e["easy_max_step"], diverged), {
            "rule": f"post-hoc: this run's acquisition step <= easy_max_step {e['easy_max_step']}",
            "fixed_before_outcome": False}
    from ..classes import RULE, read_class_file
    row = read_class_file(path, e.get("classes_sha256")).get((facts["task"], facts["level"], facts["size"]))
    source = {"rule": f"class file: {RULE}", "fixed_before_outcome": True, "classes_file": str(path),
              "classes_sha256": e.get("classes_sha256")}
    if row is None:
        if facts.get("control"):
            return difficulty(t_acq, e["easy_max_step"], diverged), dict(
                source, rule=f"control run: post-hoc rule (acquisition step <= {e['easy_max_step']})",
                fixed_before_outcome=False)
        raise ValueError(f"class file {path} has no class for cell {facts['task']} {facts['level']} {facts['size']}")
    source.update(calibration_seeds=row["calibration_seeds"],
                  calibration_acquisition_steps=row["calibration_acquisition_steps"])
    if diverged:
        return "diverged", source
    if t_acq is None:
        return "unlearned", source
    return row["class"], source


def floor_window_end(e: dict, loss_onset: int | None) -> int | None:
    """The step a collapse's floor is searched up to: the loss's matched onset under
    ``floor_window: loss_onset`` (None, the whole run, when the loss never changed), None
    under ``floor_window: run``."""
    rule = e["floor_window"]
    if rule not in ("loss_onset", "run"):
        raise ValueError(f"events.floor_window must be loss_onset or run, got {rule!r}")
    return loss_onset if rule == "loss_onset" else None


# -------------------------------------------------------------------------- probes
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
            "precursor": is_precursor(t, t_acq, e["precursor_min_gap_frac"]),
            "final_accuracy": float(acc.sort_values("step")["value"].iloc[-1]) if len(acc) else None,
            "chance": float(ch["value"].iloc[0]) if len(ch) else None,
            "constant_by_construction": bool(st.get("constant_by_construction")),
        }
    real = {k: v for k, v in per_layer.items() if not v["constant_by_construction"] and v["acquisition_step"] is not
            None}
    earliest = min(real, key=lambda k: (real[k]["acquisition_step"], -per_layer[k]["layer_index"])) if real else None
    head = per_layer.get(headline_layer, {})
    any_row = json.loads(sub["settings"].iloc[0]) if len(sub) else {}
    return {
        "measure": "probe_accuracy_norm", "position": pos, "layer": headline_layer,
        "compared_with": compared_with, "behaviour_acquisition_step": t_acq,
        "definition": f"first probed checkpoint with chance-normalised probe accuracy >= "
                      f"{e['acquisition_threshold']} for {e['persist']} consecutive probed checkpoints",
        "acquisition_step": head.get("acquisition_step"), "gap_steps": head.get("gap_steps"),
        "precursor": bool(head.get("precursor")),
        "earliest_layer": earliest, "earliest_acquisition_step": real[earliest]["acquisition_step"] if earliest else
        None,
        "n_test": int(sub["n_samples"].iloc[0]) if len(sub) else None,
        "n_checkpoints": int(sub["step"].nunique()),
        "settings": {k: v for k, v in any_row.items()
                     if k not in ("answer_token", "n_classes", "converged", "n_iter", "train_accuracy",
                                  "constant_by_construction")},
        "per_layer": per_layer,
    }
