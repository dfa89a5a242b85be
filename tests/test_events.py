"""Event detection on hand-made curves with known answers."""
import math

import numpy as np

from geoanatomy import events as ev
from geoanatomy.files import json_safe

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
    p = ev.precursor(e, t_acq=90, transition="floor", min_gap_frac=0.25)
    assert p["precursor"] and p["gap_steps"] == 50
    assert p["gaps"] == {"collapse": 70, "floor": 50, "recovery": 20}
    assert not ev.precursor(e, t_acq=45, transition="floor", min_gap_frac=0.25)["precursor"]  # gap 5 < 0.25*45
    assert not ev.precursor(e, t_acq=30, transition="floor")["precursor"]      # floor after acquisition
    assert ev.precursor(e, t_acq=30, transition="floor")["gap_steps"] == -10
    assert not ev.precursor(e, t_acq=None)["precursor"]


def test_no_collapse_no_precursor():
    v = np.array([10, 9.5, 9, 8.5, 8, 8, 8, 8, 9, 9, 9])
    e = ev.curve_events(STEPS, v, collapse_drop=0.3)
    assert not e["collapsed"] and e["collapse_step"] is None and e["recovery_step"] is None
    assert e["floor"] == 8 and e["floor_step"] == 40
    assert not ev.precursor(e, t_acq=100)["precursor"]


def test_all_nan_curve():
    e = ev.curve_events(STEPS, np.full(11, np.nan))
    assert e["init"] is None and not e["collapsed"]


def test_emergence_and_plateau_exit():
    lp = np.array([-3.5, -2.4, -2.3, -2.3, -2.25, -2.1, -2.0, -1.5, -1.0, -.5, -.1])
    assert ev.emergence_step(STEPS, lp, baseline=-2.3, margin=0.1) == 50
    loss = -lp
    assert ev.plateau_exit_step(STEPS, loss, baseline_logprob=-2.3, margin=0.1) == 50


def test_difficulty_classes():
    assert ev.difficulty(50, 1000, 0.1) == "easy"
    assert ev.difficulty(100, 1000, 0.1) == "easy"
    assert ev.difficulty(101, 1000, 0.1) == "hard"
    assert ev.difficulty(None, 1000, 0.1) == "unlearned"
    assert ev.difficulty(None, 1000, 0.1, diverged=True) == "diverged"


def test_json_safe():
    out = json_safe({"a": float("nan"), "b": [np.float64(1.5), np.int64(2), math.inf], "c": np.bool_(True)})
    assert out == {"a": None, "b": [1.5, 2, None], "c": True}
