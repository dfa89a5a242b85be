"""The study's rules (geoanatomy.precursor): the precursor rule and the difficulty classes,
scalar and vectorised, at their boundaries; one home for the old names."""
import numpy as np
import pytest

from geoanatomy import detectors as ev
from geoanatomy.analysis.stats import nulls
from geoanatomy.precursor import (SCHEMA_VERSION, difficulty, easy_max_of_budget, is_precursor,
                                  precursor_verdict)

FRAC = 0.25


def test_precursor_rule_boundaries():
    assert is_precursor(75, 100, FRAC)                 # gap exactly min_gap_frac * t_acq passes
    assert not is_precursor(76, 100, FRAC)             # a step later it does not
    assert not is_precursor(100, 100, FRAC)            # t_tr == t_acq: not strictly before
    assert not is_precursor(100, 100, 0.0)             # not even with no minimum gap
    assert is_precursor(99, 100, 0.0)
    assert not is_precursor(120, 100, FRAC)            # after acquisition
    assert not is_precursor(None, 100, FRAC) and not is_precursor(10, None, FRAC)
    assert not is_precursor(float("nan"), 100, FRAC) and not is_precursor(10, float("nan"), FRAC)
    assert type(is_precursor(np.int64(10), np.int64(100), FRAC)) is bool


def test_precursor_rule_vectorised_equals_scalar():
    rng = np.random.default_rng(0)
    t_acq = rng.integers(0, 50, 2000) * 4.0              # multiples of 4: gaps hit 0.25 * t_acq exactly
    t_tr = t_acq - rng.integers(-20, 60, 2000)
    t_tr[rng.random(2000) < 0.1] = np.nan
    t_acq[rng.random(2000) < 0.1] = np.nan
    for f in (0.0, FRAC, 0.5):
        vec = is_precursor(t_tr, t_acq, f)
        assert vec.dtype == bool and vec.shape == (2000,)
        assert vec.tolist() == [is_precursor(a, b, f) for a, b in zip(t_tr, t_acq)]
    exact = np.isfinite(t_acq) & (t_acq - t_tr == FRAC * t_acq) & (t_acq > 0)
    assert exact.sum() > 10 and is_precursor(t_tr[exact], t_acq[exact], FRAC).all()
    # None in a list is a missing step; a scalar broadcasts against an array
    assert is_precursor([None, 75, 100], [100, 100, 100], FRAC).tolist() == [False, True, False]
    assert is_precursor(75, [100, 90, np.nan], FRAC).tolist() == [True, False, False]


def test_precursor_verdict_needs_a_transition():
    e = {"collapsed": True, "collapse_step": 20, "floor_step": 40, "recovery_step": 70}
    v = precursor_verdict(e, 100, "floor", FRAC)
    assert v == {"transition": "floor", "transition_step": 40, "precursor": True, "gap_steps": 60,
                 "gaps": {"collapse": 80, "floor": 60, "recovery": 30}}
    assert precursor_verdict(e, 90, "recovery", FRAC)["precursor"] is False         # gap 20 < 0.25 * 90
    assert precursor_verdict(e, 94, "recovery", FRAC)["precursor"] is True          # gap 24 >= 0.25 * 94
    assert precursor_verdict({**e, "collapsed": False}, 100, "floor", FRAC)["precursor"] is False
    assert precursor_verdict(e, None, "floor", FRAC)["gaps"] == {"collapse": None, "floor": None, "recovery": None}


def test_difficulty_boundaries():
    assert difficulty(100, 100) == "easy"                # acquired exactly at the threshold
    assert difficulty(101, 100) == "hard"
    assert difficulty(0, 100) == "easy"
    assert difficulty(None, 100) == "unlearned" and difficulty(float("nan"), 100) == "unlearned"
    assert difficulty(50, 100, diverged=True) == "diverged" and difficulty(None, 100, True) == "diverged"
    assert difficulty(50, None) == "hard"                # no threshold: not easy
    # the fraction-of-budget form (Pythia, scan): easy if acquired by easy_max_frac x the last step
    assert easy_max_of_budget(1000, 0.1) == pytest.approx(100)
    assert difficulty(100, easy_max_of_budget(1000, 0.1)) == "easy"
    assert difficulty(101, easy_max_of_budget(1000, 0.1)) == "hard"


def test_difficulty_vectorised_equals_scalar():
    rng = np.random.default_rng(1)
    t = rng.integers(0, 400, 1000).astype(float)
    t[rng.random(1000) < 0.2] = np.nan
    emax = rng.choice([100.0, 200.0, 250.0], 1000)
    div = rng.random(1000) < 0.05
    vec = difficulty(t, emax, div)
    assert vec.tolist() == [difficulty(a, b, d) for a, b, d in zip(t, emax, div)]
    assert set(vec.tolist()) == {"easy", "hard", "unlearned", "diverged"}
    assert difficulty(np.array([100.0, 101.0, np.nan]), 100).tolist() == ["easy", "hard", "unlearned"]
    # the hard class, as the verdict's permutation null selects it, is t_acq > easy_max
    acq = t[np.isfinite(t)]
    assert ((difficulty(acq, 200.0) == "hard") == (acq > 200.0)).all()


def test_one_home_for_the_old_names():
    assert nulls.is_precursor is is_precursor
    for gone in ("precursor", "difficulty", "difficulty_by_step"):  # no second definition left
        assert not hasattr(ev, gone)
    assert SCHEMA_VERSION == 3
