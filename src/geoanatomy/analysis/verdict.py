"""``verdict.csv``: one row per claim of the study, each reproduced / not reproduced /
inconclusive by the rule its row names (``RULES``, ``word``), with its statistic, interval, n,
null and p, and the power of the test on this grid's own design (``analysis.power``).

The claims are ``CLAIMS``, in the order of the table's rows: each entry names the claim, the
study's statement, our test, the null, what it reads and the function that makes its rows
(``ClaimRow``; docs/analysis.md shows the list, rendered by ``claims_markdown``).

Units. Every row is about units: task x level x size cells, the seeds of a cell nested in it
(one number per cell, the median over its seeds; ``analysis.units``). Intervals resample
cells, permutations permute cells within a size, sign tests and counts are over cells;
n_units counts cells and n_runs the runs in them. Shuffled-label control runs and diverged
runs are left out (controls.csv reports the controls). The mixture protocol's rows
(analysis.protocols) are the same claims with models as units.

The headline precursor test is ``timing beyond the loss curve``: does the measure's event
say anything about when a cell acquires that the loss curve's event of the same kind does
not (``analysis.timing``). The old precursor rate (t_tr <= (1 - f) t_acq) stays as a
descriptive row: in a hard cell, acquired late by definition, any early event passes it.

RankMe rows say their variant; the headline variant is ``summary.headline_variant``
(default centred, column ``headline``). An uncentred row whose curve follows the mean share
(median rank correlation of RankMe with 1 - mean share over checkpoints at least
``summary.mean_direction_rho``) carries "mean-direction" in its detail: it measures how much
of the matrix is one shared mean row, not how many directions the examples spread over.

Regenerate the table in docs/analysis.md: ``python -m geoanatomy.analysis.verdict docs/analysis.md``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats

from ..precursor import difficulty, is_precursor
from . import timing
from .floors import collapse_floors
from .load import min_gap_frac
from .nulls import CELLS, sign_test
from .stats import holm, strata_permutations
from .stats import sign_test as binomial_p
from .units import EVENTS, unit_events, unit_medians

VERDICT_COLUMNS = ["claim", "measure", "variant", "event", "protocol", "statistic", "value", "ci_lo", "ci_hi",
                   "ci_level", "second_statistic", "second_value", "second_ci_lo", "second_ci_hi", "effect_of_interest",
                   "n_units", "n_runs",
                   "null", "null_value", "p", "p_holm", "family", "rule", "verdict", "power", "false_rate", "underpowered",
                   "stable", "stability", "headline", "detail"]

# ------------------------------------------------------------------------------- the rules
# Each row names its rule; ``word`` implements them, RULE is their text in verdict.csv's header
# and docs/analysis.md shows it (claims_markdown). Every rule needs n_units >= n_min and a p.
RULES = {
    "greater": ("reproduced: Holm-adjusted one-sided p < alpha and the interval's lower end above the null value "
                "(the estimate, for statistics without an interval); not reproduced: adjusted p >= alpha and the "
                "estimate at or below the null value"),
    "less": "the mirror image of greater (the claimed effect is below the null value)",
    "greater+gain": ("reproduced: greater, and the second statistic's (the leave-one-out gain) 95% interval above 0;"
                     " not reproduced: adjusted p >= alpha and the estimate at or below 0, or the gain's interval"
                     " at or below 0"),
    "equivalence": ("reproduced: adjusted two-one-sided-tests p < alpha and the 90% interval inside (-delta, delta);"
                    " not reproduced: the interval entirely outside it (lower end >= delta or upper end <= -delta)"),
    "lag": ("reproduced: adjusted p < alpha and the 90% interval's lower end (the one-sided 95% bound) above 0;"
            " not reproduced: its upper end at or below 0"),
    "lead": ("not reproduced: the second statistic's (the lead as a share of the later event's step) 95% interval"
             " entirely below effect_of_interest, the precursor rule's clear gap f (a lead, if there is one,"
             " shorter than the 'much earlier' the claim states); otherwise as greater"),
}
WORDS = ("reproduced", "not reproduced", "inconclusive")
POWERED_NEGATIVE = ("a row these rules leave inconclusive whose adjusted p >= alpha on a design where its test"
                    " has power >= min_power against the simulated alternative (verdict_power.csv, at the largest"
                    " simulated design with no more cells than the row) reads not reproduced: an effect as large as"
                    " that alternative would have been found")
RULE = ("; ".join(f"{k}: {v}" for k, v in RULES.items())
        + "; inconclusive otherwise, or with fewer than n_min units, or no test; powered negative: " + POWERED_NEGATIVE)


def word(p, ci_lo, estimate, n_units: int, null_value: float, alpha: float = 0.05, n_min: int = 5,
         rule: str = "greater", ci_hi=None, second_lo=None, second_hi=None, effect_of_interest=None) -> str:
    """The verdict rules (``RULES``): p is the Holm-adjusted p; ci_lo, ci_hi the interval
    (None or NaN: no interval, the estimate decides); null_value is delta for equivalence;
    effect_of_interest the smallest effect the claim states, in the second statistic's units
    (rule lead)."""
    def ok(x):
        return x is not None and not (isinstance(x, float) and math.isnan(x))
    if n_units < n_min or not ok(p) or not ok(estimate):
        return "inconclusive"
    if rule == "equivalence":
        if not (ok(ci_lo) and ok(ci_hi)):
            return "inconclusive"
        if p < alpha and -null_value < ci_lo and ci_hi < null_value:
            return "reproduced"
        return "not reproduced" if ci_lo >= null_value or ci_hi <= -null_value else "inconclusive"
    if rule == "lag":
        if not (ok(ci_lo) and ok(ci_hi)):
            return "inconclusive"
        if p < alpha and ci_lo > 0:
            return "reproduced"
        return "not reproduced" if ci_hi <= 0 else "inconclusive"
    if rule == "lead":
        if ok(second_hi) and ok(effect_of_interest) and second_hi < effect_of_interest:
            return "not reproduced"
        rule = "greater"
    sign = -1.0 if rule == "less" else 1.0
    bound = (ci_hi if rule == "less" else ci_lo)
    beyond = sign * (bound - null_value) > 0 if ok(bound) else sign * (estimate - null_value) > 0
    if rule == "greater+gain" and not (ok(second_lo) and second_lo > 0):
        beyond = False
    if p < alpha and beyond:
        return "reproduced"
    if rule == "greater+gain" and ok(second_hi) and second_hi <= 0:
        return "not reproduced"
    if p >= alpha and sign * (estimate - null_value) <= 0:
        return "not reproduced"
    return "inconclusive"


# ------------------------------------------------------------------------------ the rows
@dataclass(frozen=True)
class ClaimRow:
    """One row of verdict.csv before Holm, the rule and the power (``as_dict``: its columns)."""
    claim: str
    measure: str
    variant: str
    statistic: str
    value: float | None
    ci: tuple                   # (lo, hi); (None, None): no interval
    n_units: int
    n_runs: int
    null: str
    null_value: float | None
    p: float | None             # one-sided (or TOST), before Holm
    family: str                 # Holm family
    detail: str = ""
    protocol: str = "single-task"
    rule: str = "greater"
    event: str = ""
    ci_level: float = 0.95
    second: tuple = ("", None, None, None)     # (statistic, value, lo, hi)
    headline: bool = False
    effect_of_interest: float | None = None     # rule lead: the claim's smallest effect (second statistic)

    def as_dict(self) -> dict:
        """The row in VERDICT_COLUMNS order (p_holm, verdict, power are filled by ``finish``)."""
        return {"claim": self.claim, "measure": self.measure, "variant": self.variant, "event": self.event,
                "protocol": self.protocol, "statistic": self.statistic, "value": self.value,
                "ci_lo": self.ci[0], "ci_hi": self.ci[1], "ci_level": self.ci_level if self.ci[0] is not None else None,
                "second_statistic": self.second[0], "second_value": self.second[1], "second_ci_lo": self.second[2],
                "second_ci_hi": self.second[3], "effect_of_interest": self.effect_of_interest, "n_units": self.n_units, "n_runs": self.n_runs, "null": self.null,
                "null_value": self.null_value, "p": self.p, "p_holm": None, "family": self.family, "rule": self.rule,
                "verdict": None, "power": None, "false_rate": None, "underpowered": None, "stable": None,
                "stability": "", "headline": self.headline, "detail": self.detail}


def _row(*args, **kw) -> dict:
    """A row dict from ClaimRow's fields given positionally (analysis.protocols' mixture rows)."""
    return ClaimRow(*args, **kw).as_dict()


def _clopper_pearson(k: int, n: int) -> tuple:
    if n == 0:
        return (None, None)
    lo = 0.0 if k == 0 else float(stats.beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(0.975, k + 1, n - k))
    return (lo, hi)


def _boot(x: np.ndarray, stat, nb: int, seed: int, level: float = 0.95) -> tuple:
    """Percentile interval of ``stat`` (np.median, np.mean: anything taking axis=1) over units:
    x (one number per unit) resampled with replacement, nb times."""
    x = np.asarray(x, dtype=float)
    if not len(x):
        return (None, None)
    rng = np.random.default_rng(seed)
    vals = stat(x[rng.integers(0, len(x), (nb, len(x)))], axis=1)
    vals = vals[np.isfinite(vals)]
    if not len(vals):
        return (None, None)
    lo, hi = np.quantile(vals, [(1 - level) / 2, 1 - (1 - level) / 2])
    return (float(lo), float(hi))


def _fmt(x, nd=2) -> str:
    return "NA" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{nd}f}"


# ------------------------------------------------- what the claims read (one view each)
def _settings(st: dict) -> tuple[int, int, int]:
    """(bootstrap resamples, permutations, seed) of the ``summary:`` settings, one home for
    their defaults in the views."""
    return int(st.get("n_bootstrap", 2000)), int(st.get("n_permutations", 10_000)), int(st.get("seed", 0))


@dataclass(frozen=True)
class RunsView:
    """The study runs' behavioural events (one row per run) and their units, for the behaviour
    and floor claims."""
    runs: pd.DataFrame
    pres: list
    st: dict
    unit_cols: tuple = CELLS

    nb = property(lambda self: _settings(self.st)[0])
    seed = property(lambda self: _settings(self.st)[2])


def runs_views(pres: list[dict], st: dict, unit_cols=CELLS) -> list[RunsView]:
    """One view of the non-control, non-diverged runs; none when there is no such run."""
    study = [p for p in pres if not p.get("control") and not p.get("diverged")]
    runs = pd.DataFrame([{"task": p["task"], "level": p["level"], "size": p["size"], "acquired": bool(p["acquired"]),
                          "t_acq": p.get("acquisition_step"), "t_lp": p.get("logprob_half_step"),
                          "t_first": p.get("first_token_acquisition_step"),
                          "t_probe": ((p.get("probes") or {}).get("acquisition_step")),
                          "min_gap_frac": min_gap_frac(p),
                          **{c: p.get(c) for c in unit_cols if c not in ("task", "level", "size")}}
                         for p in study])
    return [RunsView(runs, study, st, tuple(unit_cols))] if len(runs) else []


@dataclass(frozen=True)
class MeasureView:
    """One measure's units (``analysis.units``) and the settings its claims use."""
    measure: str
    variant: str
    units: pd.DataFrame         # one row per unit of this measure (all classes)
    st: dict
    protocol: str = "single-task"
    strata: str = "size"        # permutations permute units within its values

    @cached_property
    def acq(self) -> pd.DataFrame:
        return self.units[self.units["acquired"]].reset_index(drop=True)

    nb = property(lambda self: _settings(self.st)[0])
    n_perm = property(lambda self: _settings(self.st)[1])
    seed = property(lambda self: _settings(self.st)[2])

    @property
    def unit_word(self) -> str:
        """What a unit is in this protocol's rows: cells (single-task) or models (mixture)."""
        return "cells" if self.protocol == "single-task" else "models"

    @property
    def delta(self) -> float:
        return float(self.st.get("equivalence_decades", 0.1))

    @property
    def headline(self) -> bool:
        return self.variant == str(self.st.get("headline_variant", "centred")) and self.measure.startswith("rankme")

    def mean_direction(self, units: pd.DataFrame) -> str:
        """'mean-direction (...)' for an uncentred RankMe row whose curve follows the mean share."""
        if self.variant != "uncentred" or "mean_share_rho" not in units:
            return ""
        rho = pd.to_numeric(units["mean_share_rho"], errors="coerce").dropna()
        bound = float(self.st.get("mean_direction_rho", 0.9))
        if len(rho) and float(rho.median()) >= bound:
            return (f"mean-direction: median rank correlation with 1 - mean share {rho.median():.2f} >= {bound}"
                    f" over {len(rho)} units; ")
        return ""


def measure_views(rows: pd.DataFrame, st: dict, protocol: str = "single-task", unit_cols=CELLS,
                  strata: str = "size") -> list[MeasureView]:
    """One view per geometric measure with an acquired unit, in table order."""
    return views_of_units(unit_events(rows, unit_cols), st, protocol, strata)


def views_of_units(units: pd.DataFrame, st: dict, protocol: str = "single-task",
                   strata: str = "size") -> list[MeasureView]:
    """``measure_views`` from a unit table (``analysis.units.unit_events``)."""
    if not len(units):
        return []
    out = []
    for measure, u in units[units["kind"] == "geometric"].groupby("measure", sort=False):
        u = u.reset_index(drop=True)
        if u["acquired"].any():
            out.append(MeasureView(measure, str(u["variant"].iloc[0] or ""), u, st, protocol, strata))
    return out


def _n_runs(u: pd.DataFrame) -> int:
    return int(u["runs"].sum()) if len(u) else 0


# ------------------------------------------------------------------- the claims' rows
def acquisition_rate(v: RunsView) -> list[ClaimRow]:
    cells = v.runs.groupby(list(v.unit_cols))["acquired"].mean()
    k, n = int((cells > 0.5).sum()), int(len(cells))
    return [ClaimRow("acquisition rate", "accuracy", "", "share of cells acquired (majority of seeds)",
                     k / n if n else None, _clopper_pearson(k, n), n, len(v.runs),
                     "exact binomial test against 1/2 (Clopper-Pearson interval over cells)", 0.5,
                     binomial_p(k, n, "greater"), "acquisition rate", f"{k}/{n} cells")]


def _lead(v: RunsView, claim: str, measure: str, later: str, earlier: str, statistic: str,
          rule: str = "greater") -> list[ClaimRow]:
    """Per cell the median lead later - earlier over its seeds with both events; the median
    over cells, its bootstrap interval over cells and the exact one-sided sign test over cells.
    Second statistic: the same of the relative lead (later - earlier) / later, the share of the
    later event's step the earlier one comes before it (>= f: the precursor rule's clear gap,
    ``events.precursor_min_gap_frac``, the runs' own; ``effect_of_interest``, read by rule lead)."""
    d = v.runs.dropna(subset=[later, earlier]).copy()
    d["lead"] = pd.to_numeric(d[later]) - pd.to_numeric(d[earlier])
    d["relative_lead"] = d["lead"] / pd.to_numeric(d[later]).where(lambda x: x > 0)
    cells = (unit_medians(d, ["lead", "relative_lead"], v.unit_cols) if len(d)
             else pd.DataFrame(columns=["lead", "relative_lead", "runs"]))
    lead = cells["lead"].to_numpy(float)
    rel = cells["relative_lead"].to_numpy(float)
    rel = rel[np.isfinite(rel)]
    # one f for all runs: a summary pools only runs with the same event definitions (load)
    f = float(d["min_gap_frac"].iloc[0]) if len(d) and "min_gap_frac" in d else None
    st = sign_test(lead, "greater")
    second = ("median over cells of the relative lead (later - earlier) / later",
              float(np.median(rel)) if len(rel) else None, *_boot(rel, np.median, v.nb, v.seed + 1))
    return [ClaimRow(claim, measure, "", statistic, float(np.median(lead)) if len(lead) else None,
                     _boot(lead, np.median, v.nb, v.seed), len(cells), len(d),
                     "exact one-sided sign test over cells (a cell's median lead over its seeds > 0)", 0.0, st["p"],
                     claim, (f"{st['wins']} of {st['n']} cells lead ({int((d['lead'] > 0).sum())} of {len(d)} runs)"
                             + (f"; clear gap f = {f:g}" if f is not None else ""))
                     if len(d) else "no run has both events", rule=rule, second=second,
                     effect_of_interest=f if rule == "lead" else None)]


def logprob_before_accuracy(v: RunsView) -> list[ClaimRow]:
    """Both events at the same depth: half of their change from the input-blind level (the
    log-prob's half-rise; acquisition = 50% of chance-normalised accuracy), for the whole
    answer and, beside it, the first answer token."""
    return (_lead(v, "log-prob before accuracy", "accuracy", "t_acq", "t_lp",
                  "median over cells of the log-prob half-rise's lead over whole-answer acquisition (steps)", "lead")
            + _lead(v, "log-prob before accuracy", "accuracy_first_token", "t_first", "t_lp",
                    "median over cells of the log-prob half-rise's lead over first-token acquisition (steps)", "lead"))


def probes_before_behaviour(v: RunsView) -> list[ClaimRow]:
    return _lead(v, "probes before behaviour", "probe_accuracy_norm", "t_first", "t_probe",
                 "median over cells of the final-layer probe's lead over first-token acquisition (steps)")


def timing_beyond_loss(m: MeasureView) -> list[ClaimRow]:
    """Per event kind: partial rank correlation of log t_acq with the measure's event given the
    loss curve's event of the same kind, and the leave-one-cell-out gain (analysis.timing)."""
    out = []
    a = m.acq
    for ev in EVENTS:
        u = a[np.isfinite(a[f"t_{ev}"].astype(float)) & np.isfinite(a[f"t_ref_{ev}"].astype(float))]
        if not len(u):
            continue
        r = timing.beyond_loss(u["t_acq"], u[f"t_{ev}"], u[f"t_ref_{ev}"], u[m.strata].to_numpy(),
                               min(m.n_perm, 10_000), m.nb, m.seed)
        pr, lo = r["partial"], r["loo"]
        cp, cl = r["clock_partial"], r["clock_loo"]
        detail = (m.mean_direction(u) + f"partial r {_fmt(pr['r'])} (p {_fmt(pr['p'], 3)}), leave-one-out gain "
                  f"{_fmt(lo['gain'])} [{_fmt(lo['gain_ci95'][0])}, {_fmt(lo['gain_ci95'][1])}] (MSE of log t_acq: "
                  f"loss alone {_fmt(lo['mse_loss'], 3)}, loss + geometry {_fmt(lo['mse_loss_geometry'], 3)});"
                  f" the clock (median {ev} step of the other cells of the size): partial r {_fmt(cp['r'])}"
                  f" (p {_fmt(cp['p'], 3)}), gain {_fmt(cl['gain'])} [{_fmt(cl['gain_ci95'][0])},"
                  f" {_fmt(cl['gain_ci95'][1])}]" + (f"; {pr['reason']}" if pr.get("reason") else ""))
        out.append(ClaimRow("timing beyond the loss curve", m.measure, m.variant,
                            f"partial Spearman of log t_acq with the measure's {ev} given the loss curve's {ev}",
                            pr["r"], (None, None), r["n"], _n_runs(u),
                            f"Freedman-Lane: residuals of the {ev} on the loss's {ev} permuted within {m.strata}s"
                            f" ({pr['n_permutations']} permutations)", 0.0, pr["p"], "timing beyond the loss curve",
                            detail, m.protocol, "greater+gain", ev,
                            second=("leave-one-cell-out gain 1 - SSE(loss, geometry) / SSE(loss)", lo["gain"],
                                    *lo["gain_ci95"]), headline=m.headline))
    return out


def _cell_precursor(u: pd.DataFrame, col: str = "t_transition", frac=None) -> np.ndarray:
    f = u["min_gap_frac"].to_numpy(float) if frac is None else frac
    return np.asarray(is_precursor(u[col].to_numpy(float), u["t_acq"].to_numpy(float), f), dtype=float)


def _step_permutation(m: MeasureView, u: pd.DataFrame, t_event: np.ndarray, hard: np.ndarray, frac) -> dict:
    """The rate over hard units of is_precursor(t_event, t_acq) and its permutation null:
    acquisition steps permuted across the acquired units within strata, the classes staying
    with their units when they come from a class file, else re-drawn on the permuted steps."""
    t_acq = u["t_acq"].to_numpy(float)
    emax = u["easy_max_step"].to_numpy(float)
    fixed = bool(u["difficulty_fixed"].all())
    rng = np.random.default_rng(m.seed)
    idx = strata_permutations(u[m.strata].to_numpy(), m.n_perm, rng)
    a = t_acq[idx]                                             # (R, n)
    in_class = np.broadcast_to(hard, a.shape) if fixed else difficulty(a, emax) == "hard"
    pre = is_precursor(np.broadcast_to(t_event, a.shape), a, frac) & in_class
    k_null = pre.sum(axis=1)
    k = int((is_precursor(t_event, t_acq, frac) & hard).sum())
    n = int(hard.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        rate_null = np.where(in_class.sum(axis=1) > 0, k_null / in_class.sum(axis=1), np.nan)
    return {"k": k, "n": n, "p": float((1 + np.sum(k_null >= k)) / (1 + m.n_perm)),
            "null_rate": float(np.nanmean(rate_null)) if np.isfinite(rate_null).any() else None}


def precursor_rate_descriptive(m: MeasureView) -> list[ClaimRow]:
    """The old precursor rate over hard cells with its permutation null and the best clock."""
    a = m.acq
    hard = (a["difficulty"] == "hard").to_numpy()
    if not hard.any():
        return []
    frac = float(a["min_gap_frac"].iloc[0])
    t = a["t_transition"].to_numpy(float)
    res = _step_permutation(m, a, t, hard, frac)
    cands = np.unique(t[np.isfinite(t)])
    t_h = a.loc[hard, "t_acq"].to_numpy(float)
    clock = max((float(is_precursor(np.full(len(t_h), c), t_h, frac).mean()), c) for c in cands) if len(cands) else None
    return [ClaimRow("precursor rate on hard cells (descriptive)", m.measure, m.variant,
                     "share of hard cells whose transition passes t_tr <= (1 - f) t_acq",
                     res["k"] / res["n"], _clopper_pearson(res["k"], res["n"]), res["n"], _n_runs(a[hard]),
                     f"acquisition steps permuted across {m.unit_word} within {m.strata}s", res["null_rate"], res["p"],
                     "precursor rate (descriptive)",
                     m.mean_direction(a[hard]) + f"{res['k']}/{res['n']} hard cells; best fixed clock: rate "
                     + (f"{clock[0]:.2f} at step {clock[1]:.0f}" if clock else "NA")
                     + "; descriptive: a late-acquired cell passes the rule with any early event",
                     m.protocol, event="transition", headline=m.headline)]


def precursor_specific_to_hard_cells(m: MeasureView) -> list[ClaimRow]:
    """rate(hard cells) - rate(easy cells) beyond what a clock gives.

    Any event that does not follow acquisition passes the precursor rule more often in hard
    cells, because they are acquired later: a fixed clock at step 40 gives a large difference,
    and so does the class-label permutation test of that difference (its p is in the detail;
    verdict_power.csv measures its false rate). The row's statistic is the measure's difference
    minus the clock's (each cell's clock: the median transition step of the other cells of its
    size, by the same rule), and its null permutes the measure's transition steps across cells
    within a size (the clock is recomputed from the permuted steps): an event timed by the
    schedule, or unrelated to its own cell, gives no excess."""
    a = m.acq[m.acq["difficulty"].isin(["easy", "hard"])].reset_index(drop=True)
    hard = (a["difficulty"] == "hard").to_numpy()
    if not (hard.any() and (~hard).any()):
        return []
    frac = a["min_gap_frac"].to_numpy(float)
    t_acq = a["t_acq"].to_numpy(float)
    strata = a[m.strata].to_numpy()
    t = a["t_transition"].to_numpy(float)

    def excess(tt):                    # tt (R, n) or (n,): transition steps
        tt = np.atleast_2d(tt)
        clock = timing.clock_of(tt, strata)
        d = []
        for x in (tt, clock):
            pre = is_precursor(x, t_acq[None, :], frac[None, :]).astype(float)
            d.append(pre[:, hard].mean(axis=1) - pre[:, ~hard].mean(axis=1))
        return d[0] - d[1], d[0], d[1]
    obs, d_obs, d_clock = (float(x[0]) for x in excess(t))
    rng = np.random.default_rng(m.seed)
    n_perm = min(m.n_perm, 2000)
    perm = t[strata_permutations(strata, n_perm, rng)]
    null = excess(perm)[0]
    p = float((1 + np.sum(null >= obs - 1e-12)) / (1 + n_perm))
    pre = _cell_precursor(a)
    lab = timing.label_permutation(pre, hard, strata, m.n_perm, m.seed)
    # interval: cells resampled within each class, each with its own pass/fail and its clock's
    pc = is_precursor(timing.clock_of(t, strata), t_acq, frac).astype(float)
    diff = pre - pc
    dh, de = diff[hard], diff[~hard]
    boots = (dh[rng.integers(0, len(dh), (m.nb, len(dh)))].mean(axis=1)
             - de[rng.integers(0, len(de), (m.nb, len(de)))].mean(axis=1))
    ci = tuple(float(x) for x in np.nanquantile(boots, [0.025, 0.975]))
    return [ClaimRow("precursor specific to hard cells", m.measure, m.variant,
                     "[rate(hard) - rate(easy)] of the measure minus that of the clock (cells)", obs, ci, len(a),
                     _n_runs(a), f"transition steps permuted across {m.unit_word} within {m.strata}s "
                     f"({n_perm} permutations)", 0.0, p, "precursor specific to hard cells",
                     m.mean_direction(a) + f"measure: hard {pre[hard].mean():.2f} ({int(hard.sum())} {m.unit_word}),"
                     f" easy {pre[~hard].mean():.2f} ({int((~hard).sum())}), difference {d_obs:.2f}; clock difference"
                     f" {d_clock:.2f}; class-label permutation p of the measure's difference {_fmt(lab['p'], 3)}"
                     " (not the test: a clock passes it too)", m.protocol, event="transition", headline=m.headline)]


def collapse_recovery_acquisition(m: MeasureView) -> list[ClaimRow]:
    a = m.acq
    hard = (a["difficulty"] == "hard").to_numpy()
    if not (m.measure.startswith("rankme") and hard.any() and "t_recovery" in a):
        return []
    res = _step_permutation(m, a, a["t_recovery"].to_numpy(float), hard, 0.0)
    return [ClaimRow("collapse -> recovery -> acquisition", m.measure, m.variant,
                     "share of hard cells that collapsed and recovered before acquisition",
                     res["k"] / res["n"], _clopper_pearson(res["k"], res["n"]), res["n"], _n_runs(a[hard]),
                     f"acquisition steps permuted across {m.unit_word} within {m.strata}s", res["null_rate"], res["p"],
                     "sequence", m.mean_direction(a[hard]) + f"{res['k']}/{res['n']} hard cells", m.protocol,
                     event="recovery", headline=m.headline)]


def _lag_row(m: MeasureView, claim: str, u: pd.DataFrame, rule: str, family: str, statement: str) -> ClaimRow:
    u = u[np.isfinite(u["lag_transition"].to_numpy(float))]           # the cells with the event
    r = timing.lag_test(u["lag_transition"].to_numpy(float), m.delta, m.nb, m.seed)
    p = r["p_simultaneous"] if rule == "equivalence" else r["p_lags"]
    return ClaimRow(claim, m.measure, m.variant,
                    "mean over cells of the lag log10(t_tr + 1) - log10(t_acq + 1) (decades)", r["mean"], r["ci90"],
                    r["n"], _n_runs(u), ("two one-sided bootstrap tests against +-delta" if rule == "equivalence"
                                         else "one-sided bootstrap test against 0"),
                    m.delta if rule == "equivalence" else 0.0, p, family,
                    m.mean_direction(u) + f"{statement}; the interval reads '{r['reading']}' (delta {m.delta} decade)",
                    m.protocol, rule, "transition", 0.90, headline=m.headline)


def easy_simultaneous(m: MeasureView) -> list[ClaimRow]:
    u = m.acq[m.acq["difficulty"] == "easy"]
    if not len(u):
        return []
    return [_lag_row(m, "easy cells: transition simultaneous with acquisition", u, "equivalence", "simultaneous (easy)",
                     "easy cells")]


def _acquired_lag(measures: tuple, claim: str, rule: str, family: str):
    """The rows function of a lag claim over the acquired cells of the named measures."""
    def rows(m: MeasureView) -> list[ClaimRow]:
        if m.measure not in measures or not len(m.acq):
            return []
        return [_lag_row(m, claim, m.acq, rule, family, "acquired cells")]
    rows.__name__ = rows.__qualname__ = f"lag_rows_{family}"
    return rows


llc_synchronous = _acquired_lag(("llc",), "LLC synchronous with acquisition", "equivalence", "synchronous")
gradient_ranks_in_step = _acquired_lag(("grad_erank", "grad_cov_erank"), "gradient ranks in step with acquisition",
                                       "equivalence", "synchronous")
hessian_lags = _acquired_lag(("hessian_top",), "Hessian lags acquisition", "lag", "lags")


def in_step_or_lag(m: MeasureView) -> list[ClaimRow]:
    """The rows of the three lag claims (LLC, gradient ranks, Hessian) for one measure."""
    return llc_synchronous(m) + gradient_ranks_in_step(m) + hessian_lags(m)


def _pair_signs(groups: np.ndarray, x: np.ndarray, y: np.ndarray):
    """Pairs (i < j) of units in the same group and sign(x_i - x_j) * sign(y_i - y_j)."""
    i, j = np.triu_indices(len(x), 1)
    same = groups[i] == groups[j]
    i, j = i[same], j[same]
    return i, j, np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])


def _share(s: np.ndarray, w=None) -> float:
    """C / (C + D) of pair signs s (weights w per pair, e.g. bootstrap multiplicities)."""
    w = np.ones_like(s) if w is None else w
    c, d = float(w @ (s > 0)), float(w @ (s < 0))
    return c / (c + d) if c + d else float("nan")


def within_class_concordance(m: MeasureView) -> list[ClaimRow]:
    """Pairs of cells of one size and class: share in the same order by transition and by
    acquisition, beside the loss-plateau exit's share on the same pairs. Interval: cells
    resampled (a pair counts as often as both its cells are drawn); null: acquisition steps
    permuted within size x class."""
    a = m.acq[m.acq["difficulty"].isin(["easy", "hard"])].reset_index(drop=True)
    a = a[np.isfinite(a["t_transition"].astype(float))].reset_index(drop=True)
    if len(a) < 2:
        return []
    groups = (a[m.strata].astype(str) + "|" + a["difficulty"]).to_numpy()
    t, y = a["t_transition"].to_numpy(float), a["t_acq"].to_numpy(float)
    i, j, s = _pair_signs(groups, t, y)
    value = _share(s)
    if not np.isfinite(value):
        return []
    rng = np.random.default_rng(m.seed)
    nb = m.nb
    w = np.zeros((nb, len(a)))
    np.add.at(w, (np.repeat(np.arange(nb), len(a)), rng.integers(0, len(a), nb * len(a))), 1.0)
    ww = w[:, i] * w[:, j]                                        # (nb, pairs)
    c, d = ww @ (s > 0), ww @ (s < 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        boots = c / (c + d)
    boots = boots[np.isfinite(boots)]
    ci = tuple(float(x) for x in np.quantile(boots, [0.025, 0.975])) if len(boots) else (None, None)
    perm = strata_permutations(groups, m.n_perm, rng)
    yp = y[perm]                                                  # (R, n)
    sp = np.sign(t[i] - t[j])[None, :] * np.sign(yp[:, i] - yp[:, j])
    cn, dn = (sp > 0).sum(axis=1), (sp < 0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        null = np.where(cn + dn > 0, cn / np.maximum(cn + dn, 1), -np.inf)
    p = float((1 + np.sum(null >= value - 1e-12)) / (1 + m.n_perm))
    lx = a["t_loss_exit"].to_numpy(float) if "t_loss_exit" in a else np.full(len(a), np.nan)
    ok = np.isfinite(lx[i]) & np.isfinite(lx[j])
    loss_c = _share((np.sign(lx[i] - lx[j]) * np.sign(y[i] - y[j]))[ok]) if ok.any() else float("nan")
    return [ClaimRow("within-class concordance", m.measure, m.variant,
                     "share of concordant pairs of cells (same size and class): transition order vs acquisition order",
                     float(value), ci, len(a), _n_runs(a), "acquisition steps permuted within size x class", 0.5, p,
                     "prediction limits", m.mean_direction(a) + f"{len(s)} pairs; loss-plateau exit on the same pairs:"
                     f" {_fmt(loss_c)}; the study reports 52-69%", m.protocol, event="transition", headline=m.headline)]


# ----------------------------------------------------------- floors (from the runs)
def _floor_units(v: RunsView, measure: str) -> pd.DataFrame:
    fl = collapse_floors(v.pres)
    fl = fl[(fl["measure"] == measure) & fl["extreme_value"].notna()].copy()
    fl = fl[pd.to_numeric(fl["extreme_value"], errors="coerce") > 0]
    fl["log_floor"] = np.log10(pd.to_numeric(fl["extreme_value"]).astype(float))
    return fl


def _within_group_slope(cells) -> float:
    """The pooled within-group slope of y on x: sum over groups of (x - mean x)(y - mean y)
    over sum of (x - mean x)^2, where ``cells`` is, per group, [(x, the seeds' y)] for each of
    its cells and a cell's y is the median over its seeds."""
    xs, ys = [], []
    for g in cells:
        x = np.array([lp for lp, _ in g])
        y = np.array([float(np.median(f)) for _, f in g])
        xs.append(x - x.mean())
        ys.append(y - y.mean())
    x, y = np.concatenate(xs), np.concatenate(ys)
    return float(x @ y / (x @ x)) if x @ x > 0 else np.nan


def _within_group_slope_bootstrap(cells, n_boot: int, rng) -> np.ndarray:
    """(n_boot,) bootstrap slopes of ``_within_group_slope``: groups resampled with
    replacement, and inside every drawn group each cell's seeds resampled with replacement
    (one draw per seed slot; a cell of k seeds takes floor(u k) of a uniform u). All draws in
    two calls, then the same arithmetic as the point estimate on arrays
    (n_boot, groups, cells of a group, seeds of a cell)."""
    G = len(cells)
    S = max(len(g) for g in cells)
    K = max(len(f) for g in cells for _, f in g)
    F = np.zeros((G, S, K))                          # seeds' values, padded
    k = np.zeros((G, S), dtype=np.int64)             # seeds per cell (0: the group has no such cell)
    X = np.zeros((G, S))                             # centred x; 0 on padding, so padding adds nothing
    for i, g in enumerate(cells):
        x = np.array([lp for lp, _ in g])
        X[i, :len(g)] = x - x.mean()
        for j, (_, f) in enumerate(g):
            F[i, j, :len(f)], k[i, j] = f, len(f)
    gi = rng.integers(0, G, (n_boot, G))
    u = rng.random((n_boot, G, S, K))
    kk = k[gi]                                                       # (B, G, S)
    pick = np.minimum((u * kk[..., None]).astype(np.int64), np.maximum(kk[..., None] - 1, 0))
    vals = np.take_along_axis(F[gi], pick, axis=3)                   # (B, G, S, K)
    slot = np.arange(K)
    vals = np.where(slot < kk[..., None], vals, np.inf)              # unused seed slots sort last
    vals.sort(axis=3)
    lo_i = np.maximum((kk - 1) // 2, 0)[..., None]
    hi_i = np.maximum(kk // 2, 0)[..., None]
    med = 0.5 * (np.take_along_axis(vals, lo_i, 3) + np.take_along_axis(vals, hi_i, 3))[..., 0]
    present = kk > 0
    med = np.where(present, med, 0.0)
    y = med - (med.sum(axis=2) / np.maximum(present.sum(axis=2), 1))[..., None]
    y = np.where(present, y, 0.0)
    x = X[gi]
    sxx = (x * x).sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sxx > 0, (x * y).sum(axis=(1, 2)) / sxx, np.nan)


def floors_equal_across_sizes(v: RunsView) -> list[ClaimRow]:
    """Per RankMe variant: the within-task x level slope of log10 floor on log10 parameter
    count (cells = medians over seeds; task x level fixed effects), its 90% interval from a
    bootstrap over task x level groups with the seeds of each cell resampled, and two one-sided
    tests against +-``slope_equivalence``."""
    out = []
    delta = float(v.st.get("slope_equivalence", 0.1))
    for measure, variant in RANKME.items():
        fl = _floor_units(v, measure)
        if not len(fl):
            continue
        fl["log_params"] = np.log10(pd.to_numeric(fl["n_params"]).astype(float))
        groups = [g for _, g in fl.groupby(["task", "level"]) if g["size"].nunique() >= 2]
        if not groups:
            out.append(ClaimRow("floors equal across sizes", measure, variant, "slope of log10 floor on log10 params",
                                None, (None, None), 0, 0, "", delta, None, "floors equal across sizes",
                                "needs a task x level at two sizes or more", rule="equivalence", ci_level=0.90))
            continue

        # per group: [(log10 params, log10 floors of the cell's seeds)] for each of its sizes
        cells = [[(float(c["log_params"].iloc[0]), c["log_floor"].to_numpy(float)) for _, c in g.groupby("size")]
                 for g in groups]
        b = _within_group_slope(cells)
        boots = _within_group_slope_bootstrap(cells, v.nb, np.random.default_rng(v.seed))
        lo, hi = (float(x) for x in np.nanquantile(boots, [0.05, 0.95]))
        p = max(float(np.mean(boots <= -delta)), float(np.mean(boots >= delta)))
        n_cells = sum(g["size"].nunique() for g in groups)
        out.append(ClaimRow("floors equal across sizes", measure, variant,
                            "within task x level slope of log10 floor on log10 parameter count", b, (lo, hi),
                            n_cells, sum(len(g) for g in groups), "two one-sided bootstrap tests against +-delta", delta,
                            p, "floors equal across sizes",
                            f"{len(groups)} task x level groups at 2+ sizes; bootstrap over groups, seeds resampled in"
                            f" their cells; delta {delta} decade of floor per decade of parameters",
                            rule="equivalence", ci_level=0.90, headline=variant == v.st.get("headline_variant", "centred")))
    return out


def mod_floor_near_two(v: RunsView) -> list[ClaimRow]:
    """Per RankMe variant and size: the median MOD floor over its cells (levels), beside the
    study's 2.0, as an equivalence of log10(floor / 2) within +-equivalence_decades."""
    out = []
    delta = float(v.st.get("equivalence_decades", 0.1))
    ref = float(v.st.get("mod_floor_reference", 2.0))
    for measure, variant in RANKME.items():
        fl = _floor_units(v, measure)
        fl = fl[fl["task"] == "mod"]
        for size, g in fl.groupby("size", sort=False):
            cells = g.groupby(["task", "level", "size"])["log_floor"].median().to_numpy(float) - math.log10(ref)
            r = timing.lag_test(cells, delta, v.nb, v.seed)
            out.append(ClaimRow("MOD floor near 2.0", measure, variant,
                                f"mean over MOD cells at {size} of log10(floor / {ref})", r["mean"], r["ci90"],
                                len(cells), len(g), "two one-sided bootstrap tests against +-delta", delta,
                                r["p_simultaneous"], "MOD floor",
                                f"median floor {10 ** (np.median(cells) + math.log10(ref)):.2f} at {size} (study: {ref});"
                                f" delta {delta} decade", rule="equivalence", ci_level=0.90,
                                headline=variant == v.st.get("headline_variant", "centred")))
    return out


RANKME = {"rankme": "uncentred", "rankme_centred": "centred"}


# ---------------------------------------------------- from the summary JSON files
def _one_sided(rho, p_two):
    """One-sided p for rho > 0 from a two-sided permutation p; prefers an exact one-sided p
    when the statistic carries one (``p_greater``): halving is exact only without ties."""
    if rho is None or p_two is None:
        return None
    return p_two / 2 if rho > 0 else 1 - p_two / 2


def _p_greater(e: dict):
    return e.get("p_greater") if e.get("p_greater") is not None else _one_sided(e.get("rho"), e.get("p"))


def floors_task_specific(jsons: dict) -> list[ClaimRow]:
    fl = (jsons.get("floor_summary.json") or {}).get("measures", {})
    out = []
    for m, variant in RANKME.items():
        a = (fl.get(m) or {}).get("all") or {}
        out.append(ClaimRow("floors task-specific", m, variant, "omega^2(task) - omega^2(size) of log10 floor",
                            (a["omega2_task"] - a["omega2_size"]) if a.get("omega2_task") is not None
                            and a.get("omega2_size") is not None else None, (None, None), int(a.get("n_cells") or 0),
                            a.get("n_runs") or 0, "two-way ANOVA: F test for task (F distribution); units task x level x"
                            " size cells (median over seeds), levels pooled", 0.0,
                            a.get("p_task"), "floors task-specific", a.get("note") or f"F_task {a.get('F_task')}"))
    return out


def _toy_scale(jsons: dict) -> dict:
    return ((jsons.get("scale_invariance.json") or {}).get("families") or {}).get("toy") or {}


def _smallest_vs_largest(claim: str, family: str, m: str, variant: str, src: dict, detail) -> list[ClaimRow]:
    """One row per level of ``src`` (a scale_invariance.json entry with ``by_level``):
    Spearman rho between the smallest and the largest size; ``detail(e)`` for the detail."""
    out = []
    for lv, e in (src.get("by_level") or {}).items():
        sl = e.get("smallest_vs_largest") or {}
        rho = sl.get("rho")
        vs = f"{sl.get('a')} vs {sl.get('b')}" if sl else "needs two sizes"
        out.append(ClaimRow(claim, m, variant, f"Spearman rho over tasks, level {lv}, {vs}", rho, (None, None),
                            int(sl.get("n") or 0), int(sl.get("n") or 0),
                            "exact permutation (pairing of tasks across sizes)", 0.0, _p_greater(sl),
                            family, sl.get("reason") or detail(sl)))
    return out


def floors_scale_invariant(jsons: dict) -> list[ClaimRow]:
    fam = _toy_scale(jsons)
    return [r for m, variant in RANKME.items()
            for r in _smallest_vs_largest("floor rank agreement across sizes", "floor rank agreement", m, variant,
                                          fam.get("floors", {}).get(m) or {}, lambda sl: "")]


def acquisition_order_scale_invariant(jsons: dict) -> list[ClaimRow]:
    src = (_toy_scale(jsons).get("acquisition_order") or {}).get("censored_last") or {}
    return _smallest_vs_largest("acquisition order scale-invariant", "acquisition order", "acquisition", "", src,
                                lambda sl: f"not acquired ranked last: {sl.get('n_censored_ranked_last')}")


def top_down_propagation(jsons: dict) -> list[ClaimRow]:
    """One vote per cell (the sign of the median Kendall tau over its determined seeds)."""
    td = (jsons.get("top_down_summary.json") or {}).get("measures", {})
    out = []
    for m, variant in RANKME.items():
        e = td.get(m) or {}
        c = e.get("cells_all") or {}
        k, n = (int(x) for x in str(c.get("top_down", "0/0")).split("/"))
        a = e.get("all") or {}
        out.append(ClaimRow("top-down propagation", m, variant, "share of determined cells whose floors run top-down",
                            k / n if n else None, _clopper_pearson(k, n), n, int(a.get("runs") or 0),
                            "exact one-sided sign test over cells against 1/2 (tied and undetermined cells left out)",
                            0.5, binomial_p(k, n, "greater"), "top-down",
                            f"{k}/{n} cells top-down (runs: {a.get('top_down')} top-down, tied {a.get('tied_tau0')},"
                            f" undetermined {a.get('undetermined')}); seeds per cell {c.get('seeds_per_cell')}"))
    return out


def _cross_scale_pairs(cs) -> list[tuple[str, dict]]:
    """(pair label, {measure: {level: entry}}) of prediction.json's ``cross_scale``: a list of
    {"a", "b", "by_measure"} (what analysis.prediction writes) or a {pair: by_measure} dict."""
    if isinstance(cs, dict):
        return list(cs.items())
    return [(f"{e.get('a')} -> {e.get('b')}", e.get("by_measure") or {}) for e in (cs or []) if isinstance(e, dict)]


def cross_scale_prediction(jsons: dict) -> list[ClaimRow]:
    cs = (jsons.get("prediction.json") or {}).get("cross_scale") or []
    out = []
    for pair, by_m in _cross_scale_pairs(cs):
        for m, variant in RANKME.items():
            for lv, e in ((by_m or {}).get(m) or {}).items():
                rho = e.get("rho")
                out.append(ClaimRow("smaller-size geometry predicts larger-size acquisition order", m, variant,
                                    f"Spearman rho, level {lv}, {pair}", rho, (None, None), int(e.get("n") or 0),
                                    int(e.get("n") or 0), "exact permutation", 0.0, _p_greater(e),
                                    "cross-scale prediction", e.get("reason") or ""))
    return out


def ordering_swaps(jsons: dict) -> list[ClaimRow]:
    """Pairs of tasks whose acquisition order swaps between two sizes: the share the smaller
    size's transition order gets right at the larger size, beside the loss-plateau exit's."""
    pairs = ((jsons.get("prediction.json") or {}).get("reversals") or {}).get("pairs") or []

    def kn(m):
        k = n = 0
        for e in pairs:
            s = ((e.get("by_measure") or {}).get(m) or {}).get("cross_scale_from_a_k_of_n", "0/0")
            a, b = (int(x) for x in s.split("/"))
            k, n = k + a, n + b
        return k, n
    lk, ln = kn("loss_plateau_exit")
    n_rev = sum(int(e.get("reversed_pairs") or 0) for e in pairs)
    out = []
    for m, variant in RANKME.items():
        k, n = kn(m)
        out.append(ClaimRow("ordering swaps predicted", m, variant,
                            "share of swapped task pairs whose order at the larger size the smaller size's transition"
                            " order gets right", k / n if n else None, _clopper_pearson(k, n), n, n,
                            "exact one-sided binomial test against 1/2 (the study: 26%, below chance)", 0.5,
                            binomial_p(k, n, "less") if n else None, "prediction limits",
                            f"{k}/{n} swapped pairs ({n_rev} swapped in all); loss-plateau exit {lk}/{ln}",
                            rule="less"))
    return out


# ------------------------------------------------------------------------- the claims
@dataclass(frozen=True)
class Claim:
    """One claim of the study: its ``claim`` column, the study's statement, our test and its
    null, what it reads, and ``rows(view)``, its rows from one view of the data (``reads``
    says which: "runs" RunsView, "measure" MeasureView, "summary" the summary JSON files)."""
    name: str
    per: str                    # what one row is about
    statement: str
    test: str
    null: str
    inputs: str
    reads: str                  # "runs" | "measure" | "summary"
    rows: Callable[..., list[ClaimRow]]


_UNITS = "precursor.json of every run: events of each measure and of the loss curve, per cell (analysis.units)"
CLAIMS: list[Claim] = [
    Claim("acquisition rate", "one row",
          "most task x level x size combinations are acquired within the training budget",
          "share of cells acquired (a cell: most of its seeds acquired); exact one-sided binomial test over cells,"
          " Clopper-Pearson interval", "1/2", "precursor.json: acquired", "runs", acquisition_rate),
    Claim("log-prob before accuracy", "two rows (whole answer, first token)",
          "the answer's log-probability emerges much earlier than accuracy, when accuracy is still near zero",
          "per cell the median lead acquisition - log-prob half-rise over its seeds (both events at half of their"
          " change from the input-blind level); the median over cells, bootstrap over cells, exact one-sided sign"
          " test over cells; 'much earlier': the relative lead (lead / acquisition step; median over cells,"
          " bootstrap) not entirely below the precursor rule's clear gap f (rule lead)", "lead 0", "precursor.json: acquisition_step, first_token_acquisition_step,"
          " logprob_half_step", "runs", logprob_before_accuracy),
    Claim("probes before behaviour", "one row",
          "the final-layer probe reads the first answer token before the model emits it",
          "as log-prob before accuracy, probe acquisition against first-token acquisition",
          "lead 0", "precursor.json: first_token_acquisition_step, probes", "runs", probes_before_behaviour),
    Claim("timing beyond the loss curve", "per measure and event kind (onset, extreme); the headline test",
          "geometry changes before behaviour in a way the loss curve does not already show (on hard runs geometry"
          " changes first and behaviour follows after a clear gap)",
          "per cell y = log t_acq, g = log(t_event + 1), l = log(t_loss event + 1) of the same kind; partial Spearman"
          " of y with g given l (one-sided Freedman-Lane permutation p) and the leave-one-cell-out gain of"
          " predicting y from (l, g) over l alone (bootstrap interval over cells); both must say yes. The same test"
          " against a clock (the median step of the other cells of the size) is in the detail",
          "g depends on l only (its residuals on l exchangeable within a size)", _UNITS, "measure",
          timing_beyond_loss),
    Claim("precursor rate on hard cells (descriptive)", "per measure and variant",
          "in hard runs the transition precedes acquisition by the precursor rule",
          "share of hard cells passing t_tr <= (1 - f) t_acq (Clopper-Pearson); permutation p and the best fixed"
          " clock beside it. Descriptive: a hard cell is acquired late, so any early event passes",
          "acquisition steps permuted across cells within a size (class-file classes stay with their cells)",
          _UNITS, "measure", precursor_rate_descriptive),
    Claim("precursor specific to hard cells", "per measure and variant",
          "the precursor rate of hard runs exceeds that of easy runs",
          "rate(hard cells) - rate(easy cells) minus the same difference of a clock (each cell: the median"
          " transition step of the other cells of its size), bootstrap within classes; the class-label permutation"
          " p in the detail (a clock passes that one too)", "transition steps permuted across cells within a size",
          _UNITS, "measure", precursor_specific_to_hard_cells),
    Claim("collapse -> recovery -> acquisition", "per RankMe variant",
          "in hard runs the measure collapses, recovers, and acquisition follows",
          "share of hard cells whose recovery precedes acquisition; permutation p",
          "acquisition steps permuted across cells within a size", _UNITS, "measure", collapse_recovery_acquisition),
    Claim("easy cells: transition simultaneous with acquisition", "per measure and variant",
          "on easy runs the model learns during the initial collapse: no precursor, geometry and behaviour together",
          "mean over easy cells of the lag log10(t_tr + 1) - log10(t_acq + 1); 90% bootstrap interval inside"
          " (-delta, delta) (two one-sided tests; delta = summary.equivalence_decades)",
          "a lag of at least delta either way", _UNITS, "measure", easy_simultaneous),
    Claim("LLC synchronous with acquisition", "one row (llc)",
          "the LLC moves with acquisition",
          "the same lag over acquired cells; 90% bootstrap interval inside (-delta, delta)",
          "a lag of at least delta either way", _UNITS, "measure", llc_synchronous),
    Claim("gradient ranks in step with acquisition", "per gradient rank (grad_erank, grad_cov_erank)",
          "the gradient ranks move with acquisition",
          "as LLC synchronous", "a lag of at least delta either way", _UNITS, "measure", gradient_ranks_in_step),
    Claim("Hessian lags acquisition", "one row (hessian_top)",
          "the top Hessian eigenvalue's transition comes after acquisition",
          "the same lag over acquired cells; the 90% interval's lower end (one-sided 95% bound) above 0",
          "no lag (0)", _UNITS, "measure", hessian_lags),
    Claim("within-class concordance", "per measure and variant",
          "within a difficulty class geometry predicts the order of acquisition only modestly (52-69% of pairs)",
          "share of concordant pairs of cells of one size and class (transition vs acquisition), bootstrap over"
          " cells, beside the loss-plateau exit's share", "acquisition steps permuted within size x class (0.5)",
          _UNITS, "measure", within_class_concordance),
    Claim("floors task-specific", "per RankMe variant",
          "collapse floors are task-specific",
          "two-way ANOVA of log10 floors (task x size cells, levels pooled as units): significant task F test"
          " and omega^2(task) > omega^2(size); estimate omega^2(task) - omega^2(size)",
          "no task effect (F distribution)", "floor_summary.json", "summary", floors_task_specific),
    Claim("floors equal across sizes", "per RankMe variant",
          "a task's floor is the same at every size",
          "within task x level slope of log10 floor on log10 parameter count (cells = medians over seeds), 90%"
          " bootstrap interval inside (-delta, delta), delta = summary.slope_equivalence",
          "a slope of at least delta either way", "precursor.json: floors per run (collapse_floors)", "runs",
          floors_equal_across_sizes),
    Claim("MOD floor near 2.0", "per RankMe variant and size",
          "the MOD floor is near 2.0 at every size",
          "mean over the MOD cells of one size of log10(floor / 2.0), 90% bootstrap interval inside"
          " (-delta, delta), delta = summary.equivalence_decades", "a ratio of at least 10^delta either way",
          "precursor.json: floors per run", "runs", mod_floor_near_two),
    Claim("floor rank agreement across sizes", "per RankMe variant and level",
          "tasks keep the order of their floors across model sizes",
          "Spearman rho over the tasks of one level, smallest vs largest size; exact one-sided permutation p",
          "rho 0 (tasks paired at random across sizes)", "scale_invariance.json: floors", "summary",
          floors_scale_invariant),
    Claim("acquisition order scale-invariant", "per level",
          "tasks keep their acquisition order across model sizes",
          "as floor rank agreement, on acquisition steps (unacquired cells ranked last)",
          "rho 0 (tasks paired at random across sizes)", "scale_invariance.json: acquisition_order", "summary",
          acquisition_order_scale_invariant),
    Claim("top-down propagation", "per RankMe variant",
          "layers reach their floors output side first (top-down) more often than input side first",
          "share of determined cells (the sign of the median tau over its seeds) that run top-down; exact"
          " one-sided sign test over cells, Clopper-Pearson interval",
          "1/2 (tied and undetermined cells left out)", "top_down_summary.json", "summary", top_down_propagation),
    Claim("smaller-size geometry predicts larger-size acquisition order", "per RankMe variant, level and size pair",
          "the transition order at a smaller size predicts the acquisition order at a larger one",
          "Spearman rho of the smaller size's transition steps vs the larger size's acquisition steps over the"
          " tasks of one level; exact one-sided permutation p",
          "rho 0", "prediction.json: cross_scale", "summary", cross_scale_prediction),
    Claim("ordering swaps predicted", "per RankMe variant",
          "when two tasks swap their acquisition order between sizes, the smaller size's geometry rarely gets the"
          " larger size's order right (26%)",
          "share of swapped pairs the smaller size's transition order gets right, beside the loss-plateau exit's;"
          " exact one-sided binomial test (below 1/2)", "1/2", "prediction.json: reversals", "summary",
          ordering_swaps),
]


def _rows(reads: str, views) -> list[dict]:
    """The rows of the claims that read ``reads``: view by view (one per measure for the
    per-measure claims), and within a view in CLAIMS order."""
    claims = [c for c in CLAIMS if c.reads == reads]
    return [r.as_dict() for v in views for c in claims for r in c.rows(v)]


def behaviour_claims(pres: list[dict], st: dict) -> list[dict]:
    """Rows of the claims that read the runs (acquisition rate, log-prob before accuracy,
    probes before behaviour, the floors across sizes)."""
    return _rows("runs", runs_views(pres, st))


def precursor_claims(rows: pd.DataFrame, st: dict, protocol: str = "single-task", cluster_cols=CELLS,
                     perm_group: str = "size") -> list[dict]:
    """Rows of the per-measure claims from the per-run x per-measure long table
    (``rates.measure_rows``). ``cluster_cols``: the units (cells; a mixture's models);
    ``perm_group``: permutations permute units within its values."""
    return _rows("measure", measure_views(rows, st, protocol, cluster_cols, perm_group))


def json_claims(jsons: dict, st: dict) -> list[dict]:
    """Rows for the floors, scale, top-down and prediction claims from the summary JSON files
    (floor_summary.json, scale_invariance.json, top_down_summary.json, prediction.json), for
    both RankMe variants. A statistic that could not be computed gives an inconclusive row
    saying why, except a cross-size row of a level the grid has at one size only when the
    claim has rows at other levels (nothing to pair: the grid never asked it there)."""
    rows = _rows("summary", [jsons])

    def empty(r):
        return r["n_units"] == 0 and " level " in f" {r['statistic']}" and "<" in str(r.get("detail") or "")
    asked = {(r["claim"], r["measure"]) for r in rows if not empty(r)}
    return [r for r in rows if not (empty(r) and (r["claim"], r["measure"]) in asked)]


def finish(rows: list[dict], st: dict, power: pd.DataFrame | None = None) -> pd.DataFrame:
    """Holm-adjust p within each family, apply each row's rule (``word``) and, given the power
    table (verdict_power.csv, ``analysis.power``), write each row's power (at the largest
    simulated design with no more cells than the row) and its claim's false rate, mark the rows
    whose power is below ``summary.min_power`` underpowered, and turn a non-significant row with
    enough power into "not reproduced" (``POWERED_NEGATIVE``)."""
    df = pd.DataFrame(rows, columns=VERDICT_COLUMNS)
    alpha, n_min = float(st.get("alpha", 0.05)), int(st.get("verdict_min_units", 5))
    for fam, g in df.groupby("family", sort=False):
        ps = pd.to_numeric(g["p"], errors="coerce").astype(float).to_numpy()
        ok = np.isfinite(ps)
        adj = np.full(len(ps), np.nan)
        if ok.any():
            adj[ok] = np.asarray(holm(ps[ok]), dtype=float)
        df.loc[g.index, "p_holm"] = adj

    def num(x):
        x = pd.to_numeric(x, errors="coerce")
        return None if x is None or not np.isfinite(x) else float(x)
    df["verdict"] = [word(num(r.p_holm), num(r.ci_lo), num(r.value), int(r.n_units or 0),
                          num(r.null_value) or 0.0, alpha, n_min, r.rule or "greater", num(r.ci_hi),
                          num(r.second_ci_lo), num(r.second_ci_hi), num(r.effect_of_interest))
                     for r in df.itertuples()]
    if power is not None and len(power):
        bound = float(st.get("min_power", 0.8))
        curves, fr = power_curves(power), false_rate_by_claim(power)
        pw = [power_at(curves.get(r.claim), int(r.n_units or 0)) for r in df.itertuples()]
        df["power"] = [p for p, _ in pw]
        df["false_rate"] = [fr.get(c) for c in df["claim"]]
        df["underpowered"] = [None if p is None else bool(p < bound) for p, _ in pw]
        # a test that is not significant on a design with the power to find the simulated
        # alternative says the claimed effect is not there at that size: "not reproduced"
        for i, r in enumerate(df.itertuples()):
            p_adj, (pw_i, n_design) = num(r.p_holm), pw[i]
            if (r.verdict == "inconclusive" and p_adj is not None and p_adj >= alpha and pw_i is not None
                    and pw_i >= bound and int(r.n_units or 0) >= n_min):
                df.loc[df.index[i], "verdict"] = "not reproduced"
                df.loc[df.index[i], "detail"] = (f"{r.detail}; " if isinstance(r.detail, str) and r.detail else "") + (
                    f"powered negative: not significant where the test has power {pw_i:.2f}"
                    f" ({n_design} simulated cells) against its alternative")
    return df


# ------------------------------------------- reading verdict_power.csv (analysis.power)
ROLE_NULL, ROLE_ALT = "H0 (false rate)", "H1 (power)"      # the table's ``role`` column


def power_by_claim(table: pd.DataFrame) -> dict:
    """claim -> power at the grid's design (the rate of "reproduced" under its alternatives;
    for a claim with several events or alternatives, the smallest)."""
    a = table[(table["role"] == ROLE_ALT) & (table["design"] == "grid")]
    return {c: float(g["reproduced"].min()) for c, g in a.groupby("claim")}


def power_curves(table: pd.DataFrame) -> dict:
    """claim -> [(units, power)] over the table's designs, ascending in units (the cells the
    claim's rows count in that design: column n_units, n_cells in older tables; power: the
    smallest rate of "reproduced" over the claim's events and alternatives at that design)."""
    a = table[table["role"] == ROLE_ALT]
    col = "n_units" if "n_units" in a.columns else "n_cells"
    out = {}
    for c, g in a.groupby("claim"):
        g = g.assign(_n=pd.to_numeric(g[col], errors="coerce")).dropna(subset=["_n"])
        out[c] = [(int(k), float(h["reproduced"].min())) for k, h in g.groupby("_n")]
    return out


def power_at(curve, n_units: int):
    """(power, cells) of the largest simulated design with at most ``n_units`` cells (power
    grows with cells, so this is the conservative reading); (None, None) when every simulated
    design is larger than the row or the claim was not simulated."""
    fits = [(pw, k) for k, pw in (curve or []) if k <= n_units]
    return fits[-1] if fits else (None, None)


def false_rate_by_claim(table: pd.DataFrame) -> dict:
    n = table[(table["role"] == ROLE_NULL) & (table["design"] == "grid")]
    return {c: float(g["reproduced"].max()) for c, g in n.groupby("claim")}



def verdict_table(pres: list[dict], rows: pd.DataFrame, st: dict, extra: list[dict] | None = None,
                  power: pd.DataFrame | None = None, rows_of_runs=None, json_of_runs=None) -> pd.DataFrame:
    """verdict.csv: the claims that read the runs, the per-measure claims, and ``extra`` rows
    (floors, scale, top-down, prediction; the mixture protocol) with their p already computed;
    with ``rows_of_runs(runs) -> per-run table``, each run-decided row's stability over seed
    subsets (``stability``); with ``json_of_runs(runs, per-run table) -> {summary JSON file: content}`` too,
    the summary-JSON rows' stability (those files recomputed on each subset)."""
    full = finish(behaviour_claims(pres, st) + precursor_claims(rows, st) + list(extra or []), st, power)
    if rows_of_runs is None:
        return full

    def rows_of(sub):
        per_run = rows_of_runs(sub)
        return (behaviour_claims(sub, st) + precursor_claims(per_run, st)
                + (json_claims(json_of_runs(sub, per_run), st) if json_of_runs is not None else []))
    return stability(pres, st, full, rows_of, power)


# ------------------------------------------------------------------ stability
ROW_KEY = ["claim", "measure", "variant", "event", "protocol", "statistic"]


def seed_subsets(pres: list[dict], unit_cols=CELLS) -> list[tuple[str, list[dict]]]:
    """(name, runs) of the reruns the stability check makes: two disjoint halves of the seeds
    (within each cell, seeds in ascending order: even positions in half A, odd in half B; a
    cell with one seed is only in half A) and, where a cell has three seeds or more, leave one
    seed position out (cells with fewer keep all theirs)."""
    by_cell: dict = {}
    for p in pres:
        by_cell.setdefault(tuple(p.get(c) for c in unit_cols), []).append(p)
    for runs in by_cell.values():
        runs.sort(key=lambda p: (p.get("seed") is None, p.get("seed")))
    pos = {id(p): i for runs in by_cell.values() for i, p in enumerate(runs)}
    big = {id(p) for runs in by_cell.values() if len(runs) >= 3 for p in runs}
    out = [("seed half A", [p for p in pres if pos[id(p)] % 2 == 0]),
           ("seed half B", [p for p in pres if pos[id(p)] % 2 == 1])]
    n_max = max((len(r) for r in by_cell.values()), default=0)
    if n_max >= 3:
        out += [(f"without seed position {k}", [p for p in pres if not (id(p) in big and pos[id(p)] == k)])
                for k in range(n_max)]
    return out


def seed_half(pres: list[dict], half: str) -> list[dict]:
    """The runs of one seed half (``half`` "A" or "B"), exactly as ``seed_subsets`` splits them
    for the stability check, so a summary of these runs alone reproduces that check's rerun.
    Control runs are split on their own (within a cell, by seed): a one-seed control is in
    half A."""
    if half not in ("A", "B"):
        raise ValueError(f"seed half must be 'A' or 'B', got {half!r}")
    from .load import is_control
    name = f"seed half {half}"
    out = []
    for group in ([p for p in pres if not is_control(p)], [p for p in pres if is_control(p)]):
        if group:
            out += dict(seed_subsets(group)).get(name, [])
    keep = {id(p) for p in out}
    return [p for p in pres if id(p) in keep]


def stability(pres: list[dict], st: dict, full: pd.DataFrame, rows_of, power: pd.DataFrame | None = None
              ) -> pd.DataFrame:
    """``full`` (verdict.csv's rows) with ``stable`` and ``stability`` for the rows the runs
    decide (the behaviour and per-measure claims, and the summary-JSON claims when
    ``rows_of`` recomputes them): each recomputed on every subset of ``seed_subsets``; stable
    when its word is the same in all of them. ``rows_of(runs)``: the rows of those claims on a
    subset (a row ``rows_of`` never gives, a mixture row: None); each
    subset decided like the full grid (with ``power``, at the subset's own cells). Control runs
    are split on their own, so a shuffled control never takes a seed position of its cell."""
    from .load import is_control
    real, ctrl = [p for p in pres if not is_control(p)], [p for p in pres if is_control(p)]
    ctrl_subsets = dict(seed_subsets(ctrl)) if ctrl else {}
    subsets = {name: sub + ctrl_subsets.get(name, ctrl) for name, sub in seed_subsets(real)}
    words = {}
    for name, sub in subsets.items():
        if not sub:
            continue
        d = finish(rows_of(sub), st, power)
        words[name] = {tuple(r[k] if r[k] == r[k] else "" for k in ROW_KEY): r["verdict"] for r in d.to_dict("records")}
    full = full.copy()
    stable, text = [], []
    for r in full.to_dict("records"):
        key = tuple(r[k] if r[k] == r[k] else "" for k in ROW_KEY)
        if not any(key in w for w in words.values()):          # not recomputed on subsets (a mixture row)
            stable.append(None)
            text.append("")
            continue
        got = {n: w.get(key, "no row") for n, w in words.items()}
        stable.append(all(v == r["verdict"] for v in got.values()))
        text.append("; ".join(f"{n}: {v}" for n, v in got.items()))
    full["stable"], full["stability"] = stable, text
    return full


# --------------------------------------------------------------- docs/analysis.md
DOCS_BEGIN = "<!-- claims: generated from geoanatomy.analysis.verdict (CLAIMS, WORDS); do not edit by hand -->"
DOCS_END = "<!-- end of claims -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def claims_markdown() -> str:
    """The rule and the claim table as docs/analysis.md shows them (between DOCS_BEGIN and DOCS_END)."""
    lines = ["The rules; each row names its own (column `rule`; alpha = `summary.alpha`, n_min ="
             " `summary.verdict_min_units`, delta = `summary.equivalence_decades` or `summary.slope_equivalence`):", ""]
    lines += [f"* **{r}**: {when}" for r, when in RULES.items()]
    lines += ["* otherwise, with fewer than n_min units, or without a test: **inconclusive**"]
    lines += ["", "| claim | rows | the study's statement | our test | null | reads |", "|---|---|---|---|---|---|"]
    lines += [f"| {' | '.join(_cell(x) for x in (c.name, c.per, c.statement, c.test, c.null, c.inputs))} |"
              for c in CLAIMS]
    return "\n".join(lines)


def docs_block(text: str) -> str:
    """The generated part of a docs page (between the markers, without them)."""
    try:
        start = text.index(DOCS_BEGIN) + len(DOCS_BEGIN)
        return text[start:text.index(DOCS_END, start)].strip("\n")
    except ValueError:
        raise ValueError(f"no claims block ({DOCS_BEGIN!r} ... {DOCS_END!r})") from None


def write_docs(path) -> bool:
    """Replace the claims block of a docs page by ``claims_markdown()``; True when it changed."""
    p = Path(path)
    text = p.read_text()
    old = docs_block(text)
    new = claims_markdown()
    if old == new:
        return False
    start = text.index(DOCS_BEGIN) + len(DOCS_BEGIN)
    end = text.index(DOCS_END, start)
    p.write_text(text[:start] + "\n" + new + "\n" + text[end:])
    return True


if __name__ == "__main__":
    import sys
    for f in sys.argv[1:] or ["docs/analysis.md"]:
        print(f"{f}: {'rewritten' if write_docs(f) else 'up to date'}")
