"""The result objects of the tests in ``geoanatomy.analysis.stats`` (the package doc gives the
vocabulary: ``statistic``, ``p``, ``ci``, ``null``, ``n``, ``reason``)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    """A test's result (module doc): ``statistic``, ``p``, ``null``, ``n``; ``ci`` (lo, hi), (None,
    None) when no interval is computed; ``reason`` when the statistic could not be."""
    statistic: float | None
    p: float | None
    null: str | None
    n: int
    ci: tuple = (None, None)
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class Correlation(Result):
    """A Spearman correlation (``statistic`` = rho) with its permutation p-values: ``p`` two-sided,
    ``p_greater`` one-sided for rho > 0; ``null`` the permutations drawn, ``n_permutations`` how
    many; ``test`` the test's name. Stratified: ``n_strata`` (pooled units) or ``strata`` (pairs
    per stratum) and ``pooled`` (plain Spearman over all pairs, for contrast)."""
    test: str
    p_greater: float | None = None
    n_permutations: int | None = None
    n_strata: int | None = None
    strata: dict | None = None
    pooled: float | None = None

    def record(self) -> dict:
        """The summary JSON's keys: {rho, p, p_greater, n, [n_strata], method, n_permutations, reason, test}."""
        out = {"rho": self.statistic, "p": self.p, "p_greater": self.p_greater, "n": self.n}
        if self.n_strata is not None:
            out["n_strata"] = self.n_strata
        out.update(method=self.null, n_permutations=self.n_permutations, reason=self.reason, test=self.test)
        return out


@dataclass(frozen=True, kw_only=True)
class Concordance(Result):
    """Pairwise order agreement (``statistic`` = C / (C + D)); ``p`` and ``tau_b`` from Kendall's tau_b."""
    pairs: int = 0
    concordant: int = 0
    discordant: int = 0
    tied: int = 0
    tau_b: float | None = None

    def record(self) -> dict:
        return {"n": self.n, "pairs": self.pairs, "concordant": self.concordant, "discordant": self.discordant,
                "tied": self.tied, "concordance": self.statistic, "tau_b": self.tau_b, "p": self.p}


@dataclass(frozen=True, kw_only=True)
class SignTest(Result):
    """The exact sign test of paired differences: ``statistic`` = ``wins`` (positive differences),
    ``n`` every finite difference, ties dropped from the test."""
    wins: int = 0
    losses: int = 0
    ties: int = 0


@dataclass(frozen=True, kw_only=True)
class PairedLead(Result):
    """A transition's lead over a reference event per run: ``statistic`` the median lead in steps,
    ``ci`` its bootstrap interval, ``p`` the sign test's (``sign``); the same in decades."""
    sign: SignTest
    decades: float = float("nan")
    ci_decades: tuple = (None, None)


@dataclass(frozen=True, kw_only=True)
class PrecursorPermutation(Result):
    """The permutation null of a class's precursor count: ``statistic`` the count k of ``n`` runs
    in the class, ``p`` its one-sided p (as many or more); ``median_lead`` and ``p_median_lead``
    the same for the median lead; ``null_mean_k`` the null's mean count."""
    median_lead: float = float("nan")
    p_median_lead: float | None = None
    null_mean_k: float | None = None
    n_permutations: int = 0


@dataclass(frozen=True)
class Clock:
    """What a fixed step, the same in every run, reaches under the precursor rule (a reference,
    not a test): the best step among the measure's own transition steps, and their median."""
    n: int
    best_step: float | None = None
    best_rate: float | None = None
    best_median_lead: float | None = None
    median_step: float | None = None
    median_rate: float | None = None
    median_median_lead: float | None = None

    def record(self) -> dict:
        """The rates table's keys (clock_best_*, clock_median_*)."""
        return {"n": self.n, "clock_best_step": self.best_step, "clock_best_rate": self.best_rate,
                "clock_best_median_lead": self.best_median_lead, "clock_median_step": self.median_step,
                "clock_median_rate": self.median_rate, "clock_median_median_lead": self.median_median_lead}


@dataclass(frozen=True, kw_only=True)
class Partial(Result):
    """A partial correlation after covariates (``statistic`` = r) with its one-sided permutation
    p (r > 0) and ``ci`` its one-sided 95% bounds (lower, upper; Fisher z); ``covariates``
    partialled out (the partial rank test), or ``n_runs`` (the within-unit test, n = units)."""
    n_permutations: int = 0
    covariates: int | None = None
    n_runs: int | None = None


@dataclass(frozen=True, kw_only=True)
class Gain(Result):
    """The leave-one-unit-out gain 1 - SSE(covariates, g) / SSE(covariates) (``statistic``), its
    percentile bootstrap 95% interval over units (``ci``) and both mean squared errors; no p."""
    mse_loss: float | None = None
    mse_loss_geometry: float | None = None


@dataclass(frozen=True)
class BeyondLoss:
    """The two tests of "timing beyond the loss curve" on the units with both steps (n): the partial
    rank correlation, the leave-one-out gain, and the partial correlation of the clock."""
    n: int
    partial: Partial
    loo: Gain
    clock_partial: Partial


@dataclass(frozen=True, kw_only=True)
class Lag(Result):
    """The mean lag over units (``statistic``, decades) with its 90% interval (``ci``, the two
    one-sided 95% bounds): three one-sided p-values, one per reading (``p`` is the lag test's,
    mean > 0; ``p_simultaneous`` TOST against +-delta; ``p_precedes`` mean < -delta), the
    ``reading`` of the interval, the ``delta`` used, the ``quantisation`` term and ``sd``."""
    p_simultaneous: float | None = None
    p_precedes: float | None = None
    reading: str = "undecided"
    delta: float = 0.0
    quantisation: float | None = None
    sd: float | None = None


@dataclass(frozen=True, kw_only=True)
class Difference(Result):
    """mean(x | label) - mean(x | not label) over units (``statistic``) with its one-sided
    permutation p; ``n_in``, ``n_out`` the units with and without the label."""
    n_in: int = 0
    n_out: int = 0
