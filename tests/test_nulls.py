"""Null models for precursor claims on synthetic populations with a known answer:
transitions unrelated to acquisition are not significant and the clock null matches them;
a planted lead is found."""
import numpy as np
import pytest

from geoanatomy.analysis.stats import clock_null, paired_lead, permutation_null, sign_test
from geoanatomy.precursor import is_precursor

FRAC = 0.25


def population(rng, n, planted: bool):
    """n runs: acquisition log-uniform in [50, 5000]; the transition either tracks it (planted:
    half the acquisition step, +-20%) or is drawn independently from the same early range as
    the planted ones (unrelated)."""
    t_acq = np.round(10 ** rng.uniform(np.log10(50), np.log10(5000), n))
    if planted:
        t_tr = np.round(t_acq * 0.5 * rng.uniform(0.8, 1.2, n))
    else:
        t_tr = np.round(rng.permutation(t_acq) * 0.5 * rng.uniform(0.8, 1.2, n))
    return t_tr, t_acq


def test_precursor_rule():
    assert is_precursor([10, 80, 100, np.nan], [100, 100, 100, 100], FRAC).tolist() == [True, False, False, False]
    assert is_precursor([75], [100], FRAC).tolist() == [True]                 # gap exactly 25%


def test_an_early_fixed_clock_passes_the_rule_everywhere():
    t_acq = np.array([40, 100, 300, 1000, 2000])
    c = clock_null([28, 28, 28, 28, 28], t_acq, FRAC)
    assert c.best_rate == 1.0 and c.best_step == 28


@pytest.mark.slow
def test_unrelated_transitions_not_significant_and_clock_matches():
    rng = np.random.default_rng(1)
    hits, clock_gap = 0, []
    for rep in range(40):
        t_tr, t_acq = population(rng, 24, planted=False)
        res = permutation_null(t_tr, t_acq, np.zeros(24), lambda a: np.isfinite(a), FRAC, n_resamples=2000, seed=rep)
        hits += res.p < 0.05
        clock = clock_null(t_tr, t_acq, FRAC)
        clock_gap.append(clock.best_rate - res.statistic / res.n)
    assert hits <= 6                                   # ~5% expected at alpha 0.05 (binomial 40, 0.05: P(>6) < 1%)
    assert np.median(clock_gap) >= 0                   # a fixed clock does at least as well as the measure


def test_planted_lead_is_found():
    rng = np.random.default_rng(2)
    t_tr, t_acq = population(rng, 24, planted=True)
    res = permutation_null(t_tr, t_acq, np.zeros(24), lambda a: np.isfinite(a), FRAC, n_resamples=10_000, seed=0)
    assert res.statistic == 24 and res.p < 0.01
    assert "Monte Carlo" in res.null and res.n_permutations == 10_000


def test_exact_permutation_small_groups():
    # two sizes of 3 runs: 3! x 3! = 36 arrangements, enumerated exactly
    t_acq = np.array([100, 200, 400, 100, 200, 400.0])
    t_tr = np.array([50, 100, 200, 50, 100, 200.0])
    res = permutation_null(t_tr, t_acq, ["nano"] * 3 + ["micro"] * 3, lambda a: np.isfinite(a), FRAC)
    assert "all 36 arrangements" in res.null and res.n_permutations == 36
    assert res.statistic == 6
    # k = 6 needs every transition before 0.75 x its acquisition: the largest t_tr (200) must
    # meet 400 in its own group, 100 must meet 200 or 400, ...: (1 x 2 x 2... ) counted by brute force
    ks = []
    import itertools
    for p1 in itertools.permutations(range(3)):
        for p2 in itertools.permutations(range(3, 6)):
            a = t_acq[list(p1) + list(p2)]
            ks.append(int(is_precursor(t_tr, a, FRAC).sum()))
    assert res.p == pytest.approx(np.mean(np.array(ks) >= 6))


def test_class_moves_with_the_acquisition_step():
    # hard = acquired after 150: permuting acquisition steps changes which runs are hard
    t_acq = np.array([100, 120, 1000, 2000.0])
    t_tr = np.array([10, 10, 300, 600.0])
    res = permutation_null(t_tr, t_acq, np.zeros(4), lambda a: a > 150, FRAC, n_resamples=100)
    assert res.n == 2 and res.statistic == 2


def test_sign_test_and_paired_lead():
    st = sign_test([5, 3, 1, -2, 0])
    assert (st.wins, st.losses, st.ties) == (3, 1, 1) and st.statistic == 3 and st.n == 5
    assert st.p == pytest.approx(0.625)                # binomial(4, 0.5): P(X>=3)*2
    pl = paired_lead([10, 20, 30, np.nan], [20, 40, 60, 10], n_resamples=2000)
    assert pl.n == 3 and pl.statistic == 20 and pl.sign.wins == 3 and pl.p == pl.sign.p
    assert pl.decades == pytest.approx(np.log10(41) - np.log10(21))
    lo, hi = pl.ci
    assert lo <= 20 <= hi
