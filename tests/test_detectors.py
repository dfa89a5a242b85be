"""Event detection on hand-made curves with known answers."""
import math

import numpy as np
import pytest

from geoanatomy import detectors as ev
from geoanatomy.defaults import DEFAULTS
from geoanatomy.files import json_safe
from geoanatomy.precursor import precursor_verdict

STEPS = np.array([0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100])


def test_acquisition_needs_three_consecutive():
    acc = np.array([0, 0, .6, .4, .55, .7, .8, .9, .9, .95, 1.0])
    assert ev.acquisition_step(STEPS, acc) == 40          # 20 is followed by a dip
    assert ev.acquisition_step(STEPS, acc, persist=1) == 20
    assert ev.acquisition_step(STEPS, np.zeros(11)) is None
    # the last two checkpoints cannot start a run of three
    assert ev.acquisition_step(STEPS, np.r_[np.zeros(9), 1, 1]) is None
    assert ev.acquisition_step(STEPS, np.r_[np.zeros(8), 1, 1, 1]) == 80


def test_acquisition_ignores_nan():
    acc = np.array([0, np.nan, .6, .7, .8, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan])
    assert ev.acquisition_step(STEPS, acc) == 20


def test_collapse_floor_recovery():
    v = np.array([10, 9, 4, 2, 1, 1.1, 1.2, 3, 4, 5, 6])
    e = ev.curve_events(STEPS, v, collapse_drop=0.3, collapse_half=0.5, recovery_rise=0.25, persist=3)
    assert e["init"] == 10 and e["floor"] == 1 and e["floor_step"] == 40
    assert e["collapsed"] and e["collapse_step"] == 20     # first value <= 10 - 0.5 * 9 = 5.5
    assert e["recovery_step"] == 70                         # >= 1.25 from 70 on (60 has 1.2)
    p = precursor_verdict(e, t_acq=90, transition="floor", min_gap_frac=0.25)
    assert p["precursor"] and p["gap_steps"] == 50
    assert p["gaps"] == {"collapse": 70, "floor": 50, "recovery": 20}
    assert not precursor_verdict(e, t_acq=45, transition="floor", min_gap_frac=0.25)["precursor"]  # gap 5 < 0.25*45
    assert not precursor_verdict(e, t_acq=30, transition="floor", min_gap_frac=0.25)["precursor"]  # floor after acq.
    assert precursor_verdict(e, t_acq=30, transition="floor", min_gap_frac=0.25)["gap_steps"] == -10
    assert not precursor_verdict(e, t_acq=None, transition="floor", min_gap_frac=0.25)["precursor"]


def test_no_collapse_no_precursor():
    v = np.array([10, 9.5, 9, 8.5, 8, 8, 8, 8, 9, 9, 9])
    e = ev.curve_events(STEPS, v, collapse_drop=0.3)
    assert not e["collapsed"] and e["collapse_step"] is None and e["recovery_step"] is None
    assert e["floor"] == 8 and e["floor_step"] == 40
    assert not precursor_verdict(e, t_acq=100, transition="floor", min_gap_frac=0.25)["precursor"]


def test_all_nan_curve():
    e = ev.curve_events(STEPS, np.full(11, np.nan))
    assert e["init"] is None and not e["collapsed"]


def test_emergence_and_plateau_exit():
    lp = np.array([-3.5, -2.4, -2.3, -2.3, -2.25, -2.1, -2.0, -1.5, -1.0, -.5, -.1])
    assert ev.emergence_step(STEPS, lp, baseline=-2.3, margin=0.1) == 50
    loss = -lp
    assert ev.plateau_exit_step(STEPS, loss, baseline_logprob=-2.3, margin=0.1) == 50


def test_json_safe():
    out = json_safe({"a": float("nan"), "b": [np.float64(1.5), np.int64(2), math.inf], "c": np.bool_(True)})
    assert out == {"a": None, "b": [1.5, 2, None], "c": True}


# ------------------------------------------------- matched events: known answers
# progress p = (v - start) / (extreme - start); defaults: onset p >= 0.1, half p >= 0.5 (both
# held 3 checkpoints), extreme = first p >= 0.95, return = first p <= 0.75 after it (held 3)
DOWN = np.array([10, 10, 9, 6, 2, 1.3, 1.0, 3, 5, 6, 7])    # p: 0 0 .11 .44 .89 .97 1 .78 .56 .44 .33
UP = np.array([0, 0, 1.5, 4, 8, 9.7, 10, 7, 5, 4, 3])       # p: 0 0 .15 .4 .8 .97 1 .7 .5 .4 .3


def test_matched_events_down_known_steps():
    m = ev.matched_events(STEPS, DOWN, "down")
    assert m["changed"] and m["direction"] == "down"
    assert (m["start"], m["extreme"], m["final"]) == (10.0, 1.0, 7.0)
    assert m["change"] == pytest.approx(0.9)
    assert m["onset_step"] == 20 and m["half_step"] == 40
    assert m["extreme_step"] == 50 and m["extreme_argstep"] == 60     # within 5% of the floor before the argmin
    assert m["return_step"] == 80                                      # 70 has p = .78 > .75


def test_matched_events_up_known_steps():
    m = ev.matched_events(STEPS, UP, "up")
    assert m["changed"] and (m["start"], m["extreme"], m["change"]) == (0.0, 10.0, 1.0)
    assert (m["onset_step"], m["half_step"], m["extreme_step"], m["return_step"]) == (20, 40, 50, 70)
    assert m["extreme_argstep"] == 60
    # measured from a given start level (behaviour: chance): p = (v - 5) / 5
    m = ev.matched_events(STEPS, UP, "up", start=5.0)
    assert m["changed"] and m["change"] == pytest.approx(0.5)
    assert (m["onset_step"], m["half_step"], m["extreme_step"], m["return_step"]) == (40, 40, 60, 70)


def test_matched_events_flat_or_wrong_way_is_unchanged():
    flat = np.array([5, 5.1, 4.9, 5, 5, 5.05, 4.95, 5, 5, 5, 5])
    m = ev.matched_events(STEPS, flat, "down")
    assert not m["changed"] and m["change"] == pytest.approx(0.02)
    assert m["onset_step"] is m["half_step"] is m["extreme_step"] is m["return_step"] is None
    assert m["extreme"] == 4.9 and m["extreme_argstep"] == 20
    assert not ev.matched_events(STEPS, UP, "down")["changed"]         # never below its start
    assert not ev.matched_events(STEPS, DOWN, "up")["changed"]
    with pytest.raises(ValueError, match="direction"):
        ev.matched_events(STEPS, DOWN, "sideways")


def test_matched_events_ignore_nan_points():
    steps = np.array([0, 5, 10, 20, 30, 40, 50, 60, 65, 70, 80, 90, 100])
    v = np.array([10, np.nan, 10, 9, 6, 2, 1.3, 1.0, np.nan, 3, 5, 6, 7])  # DOWN with two NaN checkpoints
    m = ev.matched_events(steps, v, "down")
    assert m["changed"] and m["final"] == 7.0
    assert (m["onset_step"], m["half_step"], m["extreme_step"], m["return_step"]) == (20, 40, 50, 80)
    empty = ev.matched_events(STEPS, np.full(11, np.nan), "down")
    assert not empty["changed"] and empty["start"] is None and empty["extreme_step"] is None


def test_floor_is_the_dip_before_the_behavioural_change_not_the_later_compression():
    # a collapse to 3 by step 30, back up to 6, then a deeper compression to 1 after the
    # loss's onset at step 60 (what an easy run does after it has learned)
    v = np.array([10, 7, 4, 3, 4, 5, 6, 4, 2, 1, 1], dtype=float)
    early = ev.matched_events(STEPS, v, "down", persist=2, before=60)
    assert early["extreme"] == 3 and early["extreme_step"] == 30 and early["window_end"] == 60
    assert early["onset_step"] == 10                          # 10% of the 10 -> 3 drop
    assert early["return_step"] == 50                         # back by 25% of 7 (>= 4.75) at 50, 60
    assert early["global_extreme"] == 1 and early["global_extreme_step"] == 90 and not early["at_window_end"]
    # a window that closes while the curve still falls: its floor is its last point, flagged
    cut = ev.matched_events(STEPS, v, "down", persist=2, before=20)
    assert cut["extreme_step"] == 20 and cut["at_window_end"]
    whole = ev.matched_events(STEPS, v, "down", persist=2)
    assert whole["extreme_step"] == 90 and whole["return_step"] is None
    # through the configured detector, named as the rest of the project reads it
    e = dict(DEFAULTS["events"], persist=2)
    ce = ev.curve_entry(STEPS, v, "down", e, before=60)
    assert (ce["floor"], ce["floor_step"], ce["global_floor"], ce["global_floor_step"]) == (3, 30, 1, 90)
    # the loss's onset at step 0 leaves only the first point: nothing collapsed before it
    assert not ev.matched_events(STEPS, v, "down", before=0)["changed"]


def test_events_record_reads_the_floor_before_the_loss_onset():
    """Through the events record: metrics rows whose RankMe dips early (step 20), recovers,
    and compresses deeper after the loss's onset; the floor is the early dip."""
    import pandas as pd
    from geoanatomy.precursor import events_record
    steps = list(range(0, 110, 10))
    loss = [3.4, 3.4, 3.4, 3.4, 3.4, 3.3, 2.5, 1.5, 0.8, 0.5, 0.5]      # onset (10% of 2.9) at 60
    rank = [10, 6, 3, 5, 7, 8, 8, 5, 2, 1, 1]
    acc = [0, 0, 0, 0, 0, 0, 0.2, 0.6, 0.9, 1, 1]
    rows = []
    for s, l, r, a in zip(steps, loss, rank, acc):
        rows += [{"step": s, "measure": "loss", "layer": "output", "position": "answer", "variant": "train", "value":
                  l},
                 {"step": s, "measure": "train_loss", "layer": "output", "position": "answer", "variant": "", "value":
                  l},
                 {"step": s, "measure": "accuracy_norm", "layer": "output", "position": "answer", "variant": "",
                  "value": a},
                 {"step": s, "measure": "accuracy_norm", "layer": "output", "position": "first", "variant": "",
                  "value": a},
                 {"step": s, "measure": "accuracy", "layer": "output", "position": "answer", "variant": "", "value": a},
                 {"step": s, "measure": "logprob_per_token", "layer": "output", "position": "answer", "variant": "",
                  "value": -l}]
        for variant in ("uncentred", "centred"):
            rows.append({"step": s, "measure": "rankme", "layer": "ln_final", "layer_index": 3, "position": "first",
                         "variant": variant, "value": r})
        rows.append({"step": s, "measure": "mean_share", "layer": "ln_final", "layer_index": 3, "position": "first",
                     "variant": "", "value": 0.5})
    df = pd.DataFrame(rows)
    df["layer_index"] = df["layer_index"].fillna(-1).astype(int)
    df["run"], df["n_samples"], df["settings"] = "x", 10, ""
    base = {"chance_accuracy": 0.0, "first_token_chance": 0.0, "logprob_per_token": -3.4,
            "train_logprob_per_token": -3.4}
    facts = {"run": "x", "task": "copy", "level": "L1", "size": "nano", "seed": 0, "control": "",
             "level_params": {}, "n_params": 1, "steps": 100}
    e = dict(DEFAULTS["events"], persist=2)
    pre = events_record(facts, df, e, base, 10, 1e-7, n_eval_distinct=7)
    assert pre["eval"]["n_samples"] == 10 and pre["eval"]["distinct_inputs"] == 7
    rm = pre["measures"]["rankme"]
    assert pre["loss_events"]["onset_step"] == 60 and pre["floor_window"]["end_step"] == 60
    assert rm["floor_step"] == 20 and rm["global_floor_step"] == 90 and rm["recovery_step"] == 30
    assert pre["difficulty_source"]["fixed_before_outcome"] is False
    run_wide = events_record(facts, df, dict(e, floor_window="run"), base, 10, 1e-7)
    assert run_wide["measures"]["rankme"]["floor_step"] == 90
