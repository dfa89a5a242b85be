"""One vocabulary for every test of analysis.stats: each returns a result object whose
``statistic``, ``p``, ``ci``, ``null``, ``n`` and ``reason`` mean the same thing everywhere (a p
always says what null it was measured against; a missing statistic always says why), and whose
``record()`` keeps the keys of the file that shows it."""
import numpy as np
import pytest

from geoanatomy.analysis import stats
from geoanatomy.analysis.stats import timing

X = np.array([1.0, 2, 3, 4, 5, 6, 7, 8])
Y = np.array([2.0, 1, 4, 3, 6, 5, 8, 7])
G = np.array(["a"] * 4 + ["b"] * 4)
CALLS = {
    "spearman_exact": lambda: stats.spearman_exact(X, Y),
    "spearman_stratified": lambda: stats.spearman_stratified(X, Y, G, n_resamples=200),
    "spearman_within_strata": lambda: stats.spearman_within_strata(list(X), list(Y), list(G)),
    "concordance": lambda: stats.concordance(X, Y),
    "sign_test": lambda: stats.sign_test(Y - X + 0.5),
    "paired_lead": lambda: stats.paired_lead(X, Y + 1, n_resamples=200),
    "permutation_null": lambda: stats.permutation_null(X, 2 * X + 10, np.zeros(8), np.isfinite, 0.25, 200),
    "partial_rank": lambda: timing.partial_rank(np.log(Y), X, np.arange(8.0) % 3, None, 99),
    "within_units": lambda: timing.within_units(Y, X, None, np.repeat(np.arange(4), 2), 99),
    "loo_gain": lambda: timing.loo_gain(Y, X, np.arange(8.0) % 3, 99),
    "lag_test": lambda: timing.lag_test(X / 10 - 0.4, 0.1),
    "label_permutation": lambda: timing.label_permutation(X, X > 4, np.zeros(8), 99),
}
UNDEFINED = {
    "spearman_exact": lambda: stats.spearman_exact([1, 2], [2, 1]),
    "spearman_within_strata": lambda: stats.spearman_within_strata([1, 2], [2, 1], ["a", "b"]),
    "concordance": lambda: stats.concordance([1.0], [2.0]),
    "partial_rank": lambda: timing.partial_rank([1.0, 2], [1.0, 2], None),
    "within_units": lambda: timing.within_units(Y, X, None, np.arange(8)),
    "loo_gain": lambda: timing.loo_gain([1.0, 2], [1.0, 2], np.zeros(2)),
    "lag_test": lambda: timing.lag_test([]),
    "label_permutation": lambda: timing.label_permutation(X, np.ones(8, bool), np.zeros(8)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_test_speaks_the_one_vocabulary(name):
    r = CALLS[name]()
    assert isinstance(r, stats.Result)
    assert r.statistic is not None and np.isfinite(r.statistic) and r.reason is None
    assert isinstance(r.n, int) and r.n > 0
    assert isinstance(r.null, str) and r.null                     # p or ci: what it is measured against
    assert r.p is not None or r.ci != (None, None)
    if r.p is not None:
        assert 0 < r.p <= 1
    if r.ci is not None and None not in r.ci:
        assert r.ci[0] <= r.ci[1]
    with pytest.raises(AttributeError):                             # results are frozen
        r.statistic = 0.0


@pytest.mark.parametrize("name", sorted(UNDEFINED))
def test_a_statistic_that_cannot_be_computed_says_why(name):
    r = UNDEFINED[name]()
    assert r.statistic is None and r.p is None and isinstance(r.reason, str) and r.reason


def test_records_keep_the_files_keys():
    assert list(stats.spearman_exact(X, Y).record()) == ["rho", "p", "p_greater", "n", "method", "n_permutations",
                                                         "reason", "test"]
    assert list(stats.spearman_stratified(X, Y, G, 99).record()) == ["rho", "p", "p_greater", "n", "n_strata",
                                                                     "method", "n_permutations", "reason", "test"]
    assert list(stats.concordance(X, Y).record()) == ["n", "pairs", "concordant", "discordant", "tied",
                                                      "concordance", "tau_b", "p"]
    c = stats.clock_null([1.0, 1, 1], [10.0, 20, 30], 0.25).record()
    assert c["clock_best_rate"] == 1.0 and list(c)[0] == "n"
