"""The behaviour claims: how many cells acquire, and whether the answer's log-probability and a
linear probe read it before the model emits it (leads over cells, from the runs).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..stats import binomial_p, boot, clopper_pearson, sign_test, upper_bound
from ..units import unit_medians
from .base import BINOMIAL, PRECURSOR, Claim, ClaimRow, Design, RunsView


def acquisition_rate(v: RunsView) -> list[ClaimRow]:
    cells = v.runs.groupby(list(v.unit_cols))["acquired"].mean()
    k, n = int((cells > 0.5).sum()), int(len(cells))
    return [ClaimRow("acquisition rate", "accuracy", "", "share of cells acquired (majority of seeds)",
                     k / n if n else None, clopper_pearson(k, n, v.level), n, len(v.runs),
                     "exact binomial test against 1/2 (Clopper-Pearson interval over cells)", 0.5,
                     binomial_p(k, n, "greater"), "acquisition rate", f"{k}/{n} cells", ci_level=v.level,
                     bound=upper_bound(k, n))]


def _lead(v: RunsView, claim: str, measure: str, later: str, earlier: str, statistic: str,
          rule: str = "greater", eoi: float | None = None) -> list[ClaimRow]:
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
    f = v.frac if len(d) else None
    st = sign_test(lead, "greater")
    rel_ci = boot(rel, np.median, v.nb, v.seed + 1, level=v.level)
    second = ("median over cells of the relative lead (later - earlier) / later",
              float(np.median(rel)) if len(rel) else None, *rel_ci)
    upper = rel_ci[1]                               # its upper end: the one-sided 1 - alpha bound
    return [ClaimRow(claim, measure, "", statistic, float(np.median(lead)) if len(lead) else None,
                     boot(lead, np.median, v.nb, v.seed, level=v.level), len(cells), len(d),
                     "exact one-sided sign test over cells (a cell's median lead over its seeds > 0)", 0.0, st.p,
                     claim, (f"{st.wins} of {st.n} cells lead ({int((d['lead'] > 0).sum())} of {len(d)} runs)"
                             + (f"; clear gap f = {f:g}" if f is not None else ""))
                     if len(d) else "no run has both events", rule=rule, second=second, ci_level=v.level,
                     effect_of_interest=f if eoi is None else eoi, bound=upper)]


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
                 "median over cells of the final-layer probe's lead over first-token acquisition (steps)", "lead",
                 PROBE_EOI)


PROBE_EOI = 0.1


CLAIMS = [
    Claim("acquisition rate", "one row",
          "most task x level x size combinations are acquired within the training budget",
          "share of cells acquired (a cell: most of its seeds acquired); exact one-sided binomial test over cells,"
          " Clopper-Pearson interval", "1/2", "precursor.json: acquired", "runs", acquisition_rate,
          design=BINOMIAL, figure="prediction", effect_of_interest=0.5, columns=("acquired",),
          effect_reason="one half: the claim is that most cells acquire; a share below a half is what it excludes"),
    Claim("log-prob before accuracy", "two rows (whole answer, first token)",
          "the answer's log-probability emerges much earlier than accuracy, when accuracy is still near zero",
          "per cell the median lead acquisition - log-prob half-rise over its seeds (both events at half of their"
          " change from the input-blind level); the median over cells, bootstrap over cells, exact one-sided sign"
          " test over cells; 'much earlier': the relative lead (lead / acquisition step; median over cells,"
          " bootstrap) not entirely below the precursor rule's clear gap f (rule lead)", "lead 0", "precursor.json: "
                                                                                                   "acquisition_step, "
                                                                                                   "first_token_acquisition_step,"
          " logprob_half_step", "runs", logprob_before_accuracy,
          design=Design("simulated", ("exchangeable", "behaviour-clustered", "simultaneous", "short-lead"),
                        PRECURSOR, row_measure="accuracy"), figure="lags", columns=("t_acq", "t_first", "t_lp"),
          effect_reason="per row, the precursor rule's clear gap f (the runs' events.precursor_min_gap_frac): 'much"
                        " earlier' is a lead of at least f of the acquisition step"),
    Claim("probes before behaviour", "one row",
          "the final-layer probe reads the first answer token before the model emits it",
          "as log-prob before accuracy, probe acquisition against first-token acquisition; 'not reproduced' when the"
          " relative lead's one-sided 95% bound is below 0.1 (rule lead)",
          "lead 0", "precursor.json: first_token_acquisition_step, probes", "runs", probes_before_behaviour,
          design=Design("simulated", ("exchangeable", "behaviour-clustered", "simultaneous"), PRECURSOR),
          figure="lags", effect_of_interest=PROBE_EOI, columns=("t_first", "t_probe"),
          effect_reason="a relative lead of 0.1: a shorter lead is within one checkpoint interval of the default"
                        " schedule where cells acquire (30 steps of 300), so 'before' could not be seen"),
]
