"""Statistics, the one home of resampling and of every test's p-value (after scipy.stats: one
package, typed result objects).

================  ==================================================================
``correlation``   Spearman by exact or Monte Carlo permutation (plain, stratified, within
                  strata) and pairwise concordance
``exact``         Holm, the exact binomial and sign tests, quantiles
``nulls``         the precursor rule's references: the fixed clock, the permutation null
                  of the precursor count, the paired lead over a reference event
``timing``        the timing tests over units: partial rank correlation beyond the loss
                  curve, its leave-one-out gain, the within-unit test across seeds, the
                  lag test, the class-label permutation
``resample``      permutations within strata, the median's bootstrap, the cluster
                  bootstrap over cells (seeds nested)
``results``       the result objects
================  ==================================================================

Every test returns a typed result (``Result`` and its kinds) in one vocabulary:

statistic   the number tested (rho, r, a count, a median or mean lead, a gain)
p           its p-value (one- or two-sided as the function says; None when not computed)
ci          its interval (lo, hi), when one is computed (the level is the function's)
null        what p (or ci) is measured against, in words: the permutations drawn, the exact
            distribution, the bootstrap
n           the pairs or units it counts
reason      why the statistic is None, when it is

A result's ``record()`` writes it under the keys of the file that shows it; those keys are file
formats and stay as they were (``rho``/``p``/``method`` in the summary's JSON files,
``sign_test_p`` and ``perm_p_rate`` in its tables, ``p_value`` in pythia_scale.json).
"""
from .correlation import EXACT_MAX_N, concordance, spearman_exact, spearman_stratified, spearman_within_strata
from .exact import binomial_p, clopper_pearson, holm, log_steps_close, quantiles, sign_test, upper_bound
from .nulls import clock_null, paired_lead, permutation_null
from .resample import CELLS, boot, bootstrap_median_ci, cluster_bootstrap, strata_permutations
from .results import (BeyondLoss, Clock, Concordance, Correlation, Difference, Gain, Lag, PairedLead, Partial,
                      PrecursorPermutation, Result, SignTest)

__all__ = ["EXACT_MAX_N", "CELLS", "concordance", "spearman_exact", "spearman_stratified", "spearman_within_strata",
           "binomial_p", "clopper_pearson", "upper_bound", "holm", "log_steps_close", "quantiles", "sign_test",
           "clock_null", "paired_lead", "permutation_null", "boot", "bootstrap_median_ci", "cluster_bootstrap",
           "strata_permutations", "BeyondLoss", "Clock", "Concordance", "Correlation", "Difference", "Gain", "Lag",
           "PairedLead", "Partial", "PrecursorPermutation", "Result", "SignTest"]
