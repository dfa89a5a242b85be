"""``verdict.csv``: one row per claim of the study, each reproduced / not reproduced /
inconclusive by one rule (``word``, ``WORDS``), with its statistic, interval, n, null and p.

The claims are ``CLAIMS``, in the order of the table's rows: each entry names the claim, the
study's statement, our test, the null, what it reads and the function that makes its rows
(``ClaimRow``; docs/analysis.md shows the list, rendered by ``claims_markdown``). A claim
states an effect in one direction (a rate above what its null gives, a lead above 0, a
correlation above 0); each row has a p-value of a test against that null (one-sided, in the
claimed direction, Holm-adjusted across the rows of one family; ``finish``), an effect
estimate and its 95% interval.

Intervals are percentile bootstraps over units: task x level x size cells, with the seeds of
a cell resampled inside it (``cluster_bootstrap``), so replicate seeds of one cell do not
count as independent evidence. n is the number of cells (runs in brackets).
Shuffled-label control runs and diverged runs are left out of every claim here (the
controls are reported in controls.csv). The mixture protocol's rows (analysis.protocols)
are the same claims with models as units.

Regenerate the table in docs/analysis.md: ``python -m geoanatomy.analysis.verdict docs/analysis.md``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats

from ..precursor import difficulty, is_precursor
from .nulls import CELLS, cluster_bootstrap, permutation_null, sign_test
from .rates import effective_transition
from .stats import sign_test as binomial_p
from .stats import holm

VERDICT_COLUMNS = ["claim", "measure", "variant", "protocol", "statistic", "value", "ci95_lo", "ci95_hi",
                   "n_units", "n_runs", "null", "null_value", "p", "p_holm", "family", "verdict", "detail"]

# ------------------------------------------------------------------------------- the rule
# The three words and when each applies; ``word`` implements it, RULE is its text in
# verdict.csv's header and docs/analysis.md shows it (claims_markdown).
WORDS = (("reproduced", "Holm-adjusted one-sided p < alpha and the 95% interval above the null value "
                        "(the estimate, for statistics without an interval: rank correlations, ANOVA)"),
         ("not reproduced", "adjusted p >= alpha and the estimate at or below the null value"),
         ("inconclusive", "fewer than n_min units, no test, or neither of the above"))
RULE = "; ".join(f"{w}: {when}" for w, when in WORDS)


def word(p, ci_lo, estimate, n_units: int, null_value: float, alpha: float = 0.05, n_min: int = 5) -> str:
    """The verdict rule (``WORDS``): p is the Holm-adjusted p, ci_lo the interval's lower end
    (None or NaN: no interval, the estimate decides)."""
    if n_units < n_min or p is None or estimate is None or (isinstance(p, float) and math.isnan(p)):
        return "inconclusive"
    above = ci_lo > null_value if ci_lo is not None and not math.isnan(ci_lo) else estimate > null_value
    if p < alpha and above:
        return "reproduced"
    if p >= alpha and estimate <= null_value:
        return "not reproduced"
    return "inconclusive"


# ------------------------------------------------------------------------------ the rows
@dataclass(frozen=True)
class ClaimRow:
    """One row of verdict.csv before Holm and the rule (``as_dict``: its columns)."""
    claim: str
    measure: str
    variant: str
    statistic: str
    value: float | None
    ci: tuple                   # (ci95_lo, ci95_hi); (None, None): no interval
    n_units: int
    n_runs: int
    null: str
    null_value: float | None
    p: float | None             # one-sided, before Holm
    family: str                 # Holm family
    detail: str = ""
    protocol: str = "single-task"

    def as_dict(self) -> dict:
        """The row in VERDICT_COLUMNS order (p_holm and verdict are filled by ``finish``)."""
        return {"claim": self.claim, "measure": self.measure, "variant": self.variant, "protocol": self.protocol,
                "statistic": self.statistic, "value": self.value, "ci95_lo": self.ci[0], "ci95_hi": self.ci[1],
                "n_units": self.n_units, "n_runs": self.n_runs, "null": self.null, "null_value": self.null_value,
                "p": self.p, "p_holm": None, "family": self.family, "verdict": None, "detail": self.detail}


def _row(*args, **kw) -> dict:
    """A row dict from ClaimRow's fields given positionally (analysis.protocols' mixture rows)."""
    return ClaimRow(*args, **kw).as_dict()


def _mean_of(x: np.ndarray):
    """stat(idx) = mean of the per-run numbers x at idx."""
    return lambda idx: float(np.mean(x[idx])) if len(idx) else None


def _median_of(x: np.ndarray):
    return lambda idx: float(np.median(x[idx])) if len(idx) else None


def _cells(df: pd.DataFrame, cols=CELLS) -> int:
    return int(df.groupby(list(cols)).ngroups) if len(df) else 0


def _hard_rule(easy_max_step):
    """The easy/hard rule the permutation nulls re-apply to shuffled acquisition steps: a run
    is hard when acquired after its easy_max_step (``precursor.difficulty``, the rule's one home)."""
    return lambda t_acq: difficulty(t_acq, easy_max_step) == "hard"


# ------------------------------------------------- what the claims read (one view each)
@dataclass(frozen=True)
class RunsView:
    """The study runs' behavioural events (one row per run), for the behaviour claims."""
    runs: pd.DataFrame
    nb: int
    seed: int


def runs_views(pres: list[dict], st: dict) -> list[RunsView]:
    """One view of the non-control, non-diverged runs; none when there is no such run."""
    runs = pd.DataFrame([{"task": p["task"], "level": p["level"], "size": p["size"], "acquired": bool(p["acquired"]),
                          "t_acq": p.get("acquisition_step"), "t_lp": p.get("logprob_half_step"),
                          "t_first": p.get("first_token_acquisition_step"),
                          "t_probe": ((p.get("probes") or {}).get("acquisition_step"))}
                         for p in pres if not p.get("control") and not p.get("diverged")])
    return [RunsView(runs, int(st.get("n_bootstrap", 2000)), int(st.get("seed", 0)))] if len(runs) else []


@dataclass(frozen=True)
class MeasureView:
    """One measure's acquired runs (from the per-run x per-measure table ``rates.measure_rows``)
    with the precursor flags and the hard-run permutation null shared by its claims."""
    measure: str
    variant: str
    acq: pd.DataFrame           # acquired runs
    t_acq: np.ndarray
    hard: np.ndarray            # bool per acquired run
    easy: np.ndarray
    pre: np.ndarray             # 1.0 where the transition is a precursor
    in_class: Callable          # the easy/hard rule on (shuffled) acquisition steps
    null: dict                  # permutation_null of the transition against acquisition, hard class
    protocol: str
    cluster_cols: tuple
    perm_group: str
    n_perm: int
    nb: int
    seed: int

    @property
    def hard_runs(self) -> pd.DataFrame:
        return self.acq[self.hard].reset_index(drop=True)

    def boot(self, df: pd.DataFrame, stat) -> tuple:
        return cluster_bootstrap(df, stat, self.nb, self.seed, self.cluster_cols)

    @property
    def null_name(self) -> str:
        return f"acquisition steps shuffled within {self.perm_group}s (permutation)"


def measure_views(rows: pd.DataFrame, st: dict, protocol: str = "single-task", cluster_cols=CELLS,
                  perm_group: str = "size") -> list[MeasureView]:
    """One view per measure with an acquired run (non-control, non-diverged), in table order."""
    nb, seed = int(st.get("n_bootstrap", 2000)), int(st.get("seed", 0))
    n_perm = int(st.get("n_permutations", 10_000))
    real = rows[(rows["control"] == "") & ~rows["diverged"].astype(bool)].reset_index(drop=True)
    out = []
    for measure in dict.fromkeys(real["measure"]):
        rm = real[real["measure"] == measure].reset_index(drop=True)
        acq = rm[rm["acquired"].astype(bool)].reset_index(drop=True)
        if not len(acq):
            continue
        frac = float(acq["min_gap_frac"].iloc[0])
        emax = pd.to_numeric(acq["easy_max_step"], errors="coerce").to_numpy(float)
        t_acq = pd.to_numeric(acq["acquisition_step"], errors="coerce").to_numpy(float)
        in_class = _hard_rule(emax)
        t_tr = effective_transition(acq)
        res = permutation_null(t_tr, t_acq, acq[perm_group].to_numpy(), in_class, frac, n_perm, seed)
        out.append(MeasureView(measure=measure, variant=str(acq["variant"].iloc[0] or ""), acq=acq, t_acq=t_acq,
                               hard=acq["difficulty"].to_numpy() == "hard", easy=acq["difficulty"].to_numpy() == "easy",
                               pre=is_precursor(t_tr, t_acq, frac).astype(float), in_class=in_class, null=res,
                               protocol=protocol, cluster_cols=cluster_cols, perm_group=perm_group, n_perm=n_perm,
                               nb=nb, seed=seed))
    return out


# ------------------------------------------------------------------- the claims' rows
def acquisition_rate(v: RunsView) -> list[ClaimRow]:
    runs = v.runs
    cells = runs.groupby(["task", "level", "size"])["acquired"].mean()
    k, n = int((cells > 0.5).sum()), int(len(cells))
    return [ClaimRow("acquisition rate", "accuracy", "", "share of cells acquired (majority of seeds)",
                     k / n if n else None,
                     cluster_bootstrap(runs, _mean_of(runs["acquired"].to_numpy(float)), v.nb, v.seed), n, len(runs),
                     "exact binomial test against 1/2", 0.5, binomial_p(k, n, "greater"), "acquisition rate",
                     f"{k}/{n} cells")]


def _lead(v: RunsView, claim: str, measure: str, later: str, earlier: str, statistic: str) -> list[ClaimRow]:
    """Median lead later - earlier over the runs with both events, one-sided sign test."""
    d = v.runs.dropna(subset=[later, earlier]).reset_index(drop=True)
    lead = (pd.to_numeric(d[later]) - pd.to_numeric(d[earlier])).to_numpy(float)
    return [ClaimRow(claim, measure, "", statistic, float(np.median(lead)) if len(d) else None,
                     cluster_bootstrap(d, _median_of(lead), v.nb, v.seed) if len(d) else (None, None),
                     _cells(d), len(d),
                     "exact one-sided sign test (lead > 0)", 0.0, sign_test(lead, "greater")["p"], claim,
                     f"{int((lead > 0).sum())} of {len(d)} runs lead" if len(d) else "no run has both events")]


def logprob_before_accuracy(v: RunsView) -> list[ClaimRow]:
    """Both events at the same depth: half of their change from the input-blind level (the
    log-prob's half-rise; acquisition = 50% of chance-normalised accuracy), for the whole
    answer and, beside it, the first answer token."""
    return (_lead(v, "log-prob before accuracy", "accuracy", "t_acq", "t_lp",
                  "median lead of the log-prob half-rise over whole-answer acquisition (steps)")
            + _lead(v, "log-prob before accuracy", "accuracy_first_token", "t_first", "t_lp",
                    "median lead of the log-prob half-rise over first-token acquisition (steps)"))


def probes_before_behaviour(v: RunsView) -> list[ClaimRow]:
    return _lead(v, "probes before behaviour", "probe_accuracy_norm", "t_first", "t_probe",
                 "median lead of final-layer probe over first-token acquisition (steps)")


def precursor_on_hard_runs(m: MeasureView) -> list[ClaimRow]:
    h, res = m.hard_runs, m.null
    if not len(h):
        return []
    return [ClaimRow("precursor on hard runs", m.measure, m.variant, "precursor rate (hard runs)",
                     float(m.pre[m.hard].mean()), m.boot(h, _mean_of(m.pre[m.hard])), _cells(h, m.cluster_cols), len(h),
                     m.null_name, res["null_mean_k"] / res["n"] if res["n"] else None, res["p_rate"],
                     "precursor on hard runs",
                     f"{res['k']}/{res['n']} runs; {res['n_permutations']} permutations ({res['method']})",
                     protocol=m.protocol)]


def precursor_specific_to_hard_runs(m: MeasureView) -> list[ClaimRow]:
    if not (m.hard.any() and m.easy.any()):
        return []
    sel = m.hard | m.easy
    both = m.acq[sel].reset_index(drop=True)
    pb, hb = m.pre[sel], m.hard[sel]

    def diff(idx):
        hh, ee = pb[idx][hb[idx]], pb[idx][~hb[idx]]
        return float(hh.mean() - ee.mean()) if len(hh) and len(ee) else None
    return [ClaimRow("precursor specific to hard runs", m.measure, m.variant, "rate(hard) - rate(easy)",
                     diff(np.arange(len(both))), m.boot(both, diff), _cells(both, m.cluster_cols), len(both),
                     "hard-run permutation p; difference against 0", 0.0, m.null["p_rate"],
                     "precursor specific to hard runs",
                     f"hard {m.pre[m.hard].mean():.2f} ({int(m.hard.sum())} runs), "
                     f"easy {m.pre[m.easy].mean():.2f} ({int(m.easy.sum())} runs)", protocol=m.protocol)]


def collapse_recovery_acquisition(m: MeasureView) -> list[ClaimRow]:
    h = m.hard_runs
    if not (m.measure.startswith("rankme") and len(h)):
        return []
    acq = m.acq
    t_rec = pd.to_numeric(acq["recovery_step"], errors="coerce").to_numpy(float)
    t_rec = np.where(acq["transitioned"].fillna(False).astype(bool), t_rec, np.nan)
    seq = permutation_null(t_rec, m.t_acq, acq[m.perm_group].to_numpy(), m.in_class, 0.0, m.n_perm, m.seed)
    ok = is_precursor(t_rec, m.t_acq, 0.0).astype(float)[m.hard]
    return [ClaimRow("collapse -> recovery -> acquisition", m.measure, m.variant,
                     "share of hard runs that collapsed and recovered before acquisition",
                     float(ok.mean()), m.boot(h, _mean_of(ok)), _cells(h, m.cluster_cols), len(h), m.null_name,
                     seq["null_mean_k"] / seq["n"] if seq["n"] else None, seq["p_rate"], "sequence",
                     f"{seq['k']}/{seq['n']} hard runs", protocol=m.protocol)]


def _one_sided(rho, p_two):
    """One-sided p for rho > 0 from a two-sided permutation p (symmetric null)."""
    if rho is None or p_two is None:
        return None
    return p_two / 2 if rho > 0 else 1 - p_two / 2


def _clopper_pearson(k: int, n: int) -> tuple:
    if n == 0:
        return (None, None)
    lo = 0.0 if k == 0 else float(stats.beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(0.975, k + 1, n - k))
    return (lo, hi)


RANKME = {"rankme": "uncentred", "rankme_centred": "centred"}


def floors_task_specific(jsons: dict) -> list[ClaimRow]:
    fl = (jsons.get("floor_summary.json") or {}).get("measures", {})
    out = []
    for m, variant in RANKME.items():
        a = (fl.get(m) or {}).get("all") or {}
        out.append(ClaimRow("floors task-specific", m, variant, "omega^2(task) - omega^2(size) of log10 floor",
                            (a["omega2_task"] - a["omega2_size"]) if a.get("omega2_task") is not None
                            and a.get("omega2_size") is not None else None, (None, None), int(a.get("n_cells") or 0),
                            a.get("n_runs") or 0, "two-way ANOVA: F test for task (F distribution)", 0.0,
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
                            "exact permutation (pairing of tasks across sizes)", 0.0, _one_sided(rho, sl.get("p")),
                            family, sl.get("reason") or detail(sl)))
    return out


def floors_scale_invariant(jsons: dict) -> list[ClaimRow]:
    fam = _toy_scale(jsons)
    return [r for m, variant in RANKME.items()
            for r in _smallest_vs_largest("floors scale-invariant", "floors scale-invariant", m, variant,
                                          fam.get("floors", {}).get(m) or {}, lambda sl: "")]


def acquisition_order_scale_invariant(jsons: dict) -> list[ClaimRow]:
    src = (_toy_scale(jsons).get("acquisition_order") or {}).get("censored_last") or {}
    return _smallest_vs_largest("acquisition order scale-invariant", "acquisition order", "acquisition", "", src,
                                lambda sl: f"not acquired ranked last: {sl.get('n_censored_ranked_last')}")


def top_down_propagation(jsons: dict) -> list[ClaimRow]:
    td = (jsons.get("top_down_summary.json") or {}).get("measures", {})
    out = []
    for m, variant in RANKME.items():
        a = (td.get(m) or {}).get("all") or {}
        k = int(str(a.get("top_down", "0/0")).split("/")[0] or 0)
        n = int(a.get("n_determined") or 0)
        out.append(ClaimRow("top-down propagation", m, variant, "share of determined runs whose floors run top-down",
                            k / n if n else None, _clopper_pearson(k, n), n, int(a.get("runs") or 0),
                            "exact one-sided sign test against 1/2 (tied and undetermined runs left out)", 0.5,
                            binomial_p(k, n, "greater"), "top-down",
                            f"{k}/{n} top-down; tied {a.get('tied_tau0')}, undetermined {a.get('undetermined')}"))
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
                                    int(e.get("n") or 0), "exact permutation", 0.0, _one_sided(rho, e.get("p")),
                                    "cross-scale prediction", e.get("reason") or ""))
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


_TRANSITIONS = "precursor.json: transition, acquisition and easy_max_step of each measure (rates.measure_rows)"
CLAIMS: list[Claim] = [
    Claim("acquisition rate", "one row",
          "most task x level x size combinations are acquired within the training budget",
          "share of cells acquired (a cell: most of its seeds acquired); exact one-sided binomial test",
          "1/2", "precursor.json: acquired", "runs", acquisition_rate),
    Claim("log-prob before accuracy", "two rows (whole answer, first token)",
          "the answer's log-probability emerges before accuracy does",
          "median lead acquisition - log-prob half-rise (steps; both events at half of their change from the "
          "input-blind level) over runs with both events, whole answer and first token; exact one-sided sign test",
          "lead 0", "precursor.json: acquisition_step, first_token_acquisition_step, logprob_half_step", "runs",
          logprob_before_accuracy),
    Claim("probes before behaviour", "one row",
          "the final-layer probe reads the first answer token before the model emits it",
          "median lead of probe acquisition over first-token acquisition (steps); exact one-sided sign test",
          "lead 0", "precursor.json: first_token_acquisition_step, probes", "runs", probes_before_behaviour),
    Claim("precursor on hard runs", "per measure and variant",
          "in hard runs the transition precedes acquisition by the precursor rule",
          "precursor rate over hard runs; permutation p (the clock null is printed in precursor_rates.csv)",
          "acquisition steps shuffled across runs within a size, hard class re-drawn on the shuffled steps",
          _TRANSITIONS, "measure", precursor_on_hard_runs),
    Claim("precursor specific to hard runs", "per measure and variant",
          "the precursor rate of hard runs exceeds that of easy runs",
          "rate(hard) - rate(easy) with its interval; p is the hard-run permutation p",
          "difference 0 (the interval must lie above it)", _TRANSITIONS, "measure", precursor_specific_to_hard_runs),
    Claim("collapse -> recovery -> acquisition", "per RankMe variant",
          "in hard runs the measure collapses, recovers, and acquisition follows",
          "share of hard runs whose recovery precedes acquisition; permutation p",
          "acquisition steps shuffled across runs within a size",
          "precursor.json: recovery step and acquisition of each RankMe variant", "measure",
          collapse_recovery_acquisition),
    Claim("floors task-specific", "per RankMe variant",
          "collapse floors are task-specific",
          "two-way ANOVA of log10 floors (task x size cells, levels pooled as units): significant task F test"
          " and omega^2(task) > omega^2(size); estimate omega^2(task) - omega^2(size)",
          "no task effect (F distribution)", "floor_summary.json", "summary", floors_task_specific),
    Claim("floors scale-invariant", "per RankMe variant and level",
          "tasks keep the order of their floors across model sizes",
          "Spearman rho over the tasks of one level, smallest vs largest size; one-sided p for rho > 0 from the"
          " exact two-sided permutation p",
          "rho 0 (tasks paired at random across sizes)", "scale_invariance.json: floors", "summary",
          floors_scale_invariant),
    Claim("acquisition order scale-invariant", "per level",
          "tasks keep their acquisition order across model sizes",
          "as floors scale-invariant, on acquisition steps (unacquired cells ranked last)",
          "rho 0 (tasks paired at random across sizes)", "scale_invariance.json: acquisition_order", "summary",
          acquisition_order_scale_invariant),
    Claim("top-down propagation", "per RankMe variant",
          "layers reach their floors output side first (top-down) more often than input side first",
          "share of determined runs that run top-down; exact one-sided sign test, Clopper-Pearson interval",
          "1/2 (tied and undetermined runs left out)", "top_down_summary.json", "summary", top_down_propagation),
    Claim("smaller-size geometry predicts larger-size acquisition order", "per RankMe variant, level and size pair",
          "the transition order at a smaller size predicts the acquisition order at a larger one",
          "Spearman rho of the smaller size's transition steps vs the larger size's acquisition steps over the"
          " tasks of one level; one-sided p from the exact permutation p",
          "rho 0", "prediction.json: cross_scale", "summary", cross_scale_prediction),
]


def _rows(reads: str, views) -> list[dict]:
    """The rows of the claims that read ``reads``: view by view (one per measure for the
    per-measure claims), and within a view in CLAIMS order."""
    claims = [c for c in CLAIMS if c.reads == reads]
    return [r.as_dict() for v in views for c in claims for r in c.rows(v)]


def behaviour_claims(pres: list[dict], st: dict) -> list[dict]:
    """Rows of the claims on the runs' behavioural events (acquisition rate, log-prob before
    accuracy, probes before behaviour)."""
    return _rows("runs", runs_views(pres, st))


def precursor_claims(rows: pd.DataFrame, st: dict, protocol: str = "single-task", cluster_cols=CELLS,
                     perm_group: str = "size") -> list[dict]:
    """Rows of the precursor, specificity and sequence claims from the per-run x per-measure
    long table (``rates.measure_rows``). ``cluster_cols``: the units intervals resample and
    n_units counts; ``perm_group``: acquisition steps are shuffled within its values (defaults:
    cells and sizes; the mixture protocol: models, analysis.protocols)."""
    return _rows("measure", measure_views(rows, st, protocol, cluster_cols, perm_group))


def json_claims(jsons: dict, st: dict) -> list[dict]:
    """Rows for the floors, scale, top-down and prediction claims from the summary JSON files
    (floor_summary.json, scale_invariance.json, top_down_summary.json, prediction.json), for
    both RankMe variants. A statistic that could not be computed gives an inconclusive row
    saying why."""
    return _rows("summary", [jsons])


def finish(rows: list[dict], st: dict) -> pd.DataFrame:
    """Holm-adjust p within each family and apply the rule (``word``)."""
    df = pd.DataFrame(rows, columns=VERDICT_COLUMNS)
    alpha, n_min = float(st.get("alpha", 0.05)), int(st.get("verdict_min_units", 5))
    for fam, g in df.groupby("family", sort=False):
        ps = g["p"].astype(float).to_numpy()
        ok = np.isfinite(ps)
        adj = np.full(len(ps), np.nan)
        if ok.any():
            adj[ok] = np.asarray(holm(ps[ok]), dtype=float)
        df.loc[g.index, "p_holm"] = adj
    df["verdict"] = [word(None if not np.isfinite(r.p_holm) else r.p_holm, r.ci95_lo, r.value, int(r.n_units or 0),
                          float(r.null_value) if r.null_value is not None else 0.0, alpha, n_min)
                     for r in df.astype({"p_holm": float}).itertuples()]
    return df


def verdict_table(pres: list[dict], rows: pd.DataFrame, st: dict, extra: list[dict] | None = None) -> pd.DataFrame:
    """verdict.csv: behaviour claims, precursor claims, and ``extra`` rows (floors, scale,
    top-down, prediction) with their p and interval already computed."""
    return finish(behaviour_claims(pres, st) + precursor_claims(rows, st) + list(extra or []), st)


# --------------------------------------------------------------- docs/analysis.md
DOCS_BEGIN = "<!-- claims: generated from geoanatomy.analysis.verdict (CLAIMS, WORDS); do not edit by hand -->"
DOCS_END = "<!-- end of claims -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def claims_markdown() -> str:
    """The rule and the claim table as docs/analysis.md shows them (between DOCS_BEGIN and DOCS_END)."""
    lines = ["The rule, the same for every row (alpha = `summary.alpha`, n_min = `summary.verdict_min_units`):", ""]
    lines += [f"* **{w}**: {when}" for w, when in WORDS]
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
