"""``verdict.csv``: one row per claim of the study, each reproduced / not reproduced /
inconclusive by a written rule, with its statistic, interval, n, null and p.

The rule (``word``), the same for every claim. A claim states an effect in one direction
(a rate above what its null gives, a lead above 0, a correlation above 0); each row has a
p-value of a test against that null (one-sided, in the claimed direction, Holm-adjusted
across the rows of one family), an effect estimate and its 95% interval::

    inconclusive    fewer than ``n_min`` units, or no test could be run
    reproduced      adjusted p < alpha and the interval lies above the null value (for a
                    statistic with no interval, a rank correlation or an ANOVA, the estimate)
    not reproduced  adjusted p >= alpha and the estimate is at or below the null value
    inconclusive    otherwise (an effect in the claimed direction the data cannot confirm,
                    or a significant test whose interval still reaches the null)

Intervals are percentile bootstraps over units: task x level x size cells, with the seeds of
a cell resampled inside it (``cluster_bootstrap``), so replicate seeds of one cell do not
count as independent evidence. n is the number of cells (runs in brackets).
Shuffled-label control runs and diverged runs are left out of every claim here (the
controls are reported in controls.csv).

Claims (the study's, as far as they are public):

acquisition rate
    most task x level x size combinations are acquired within the budget: share of cells
    acquired (majority of seeds), against 1/2 (exact binomial test).
collapse -> recovery -> acquisition (per RankMe variant)
    in hard runs the measure collapses, recovers, and acquisition follows: share of hard runs
    whose recovery precedes acquisition, against acquisition steps shuffled across runs
    within a size (permutation null).
precursor on hard runs (per measure and variant)
    the transition precedes acquisition by the precursor rule in hard runs more often than
    when acquisition steps are shuffled (permutation null); the clock null is printed beside.
precursor specific to hard runs (per measure and variant)
    the hard-run rate exceeds the easy-run rate: effect = rate_hard - rate_easy; p is the
    hard-run permutation p; reproduced only if that difference's interval is above 0 too.
log-probability before accuracy
    log-prob emergence precedes acquisition: median lead (steps) over acquired runs, exact
    one-sided sign test.
probes before behaviour
    the final-layer probe reads the first answer token before the model emits it: median
    lead of probe acquisition over first-token acquisition, exact one-sided sign test.
floors task-specific (per RankMe variant)
    the two-way ANOVA of log10 floors (task x size cells, levels pooled as units) has a
    significant task effect and omega^2(task) > omega^2(size) (floor_summary.json).
floors / acquisition order scale-invariant
    Spearman rho over the tasks of one level between the smallest and the largest size
    (scale_invariance.json; acquisition order with unacquired cells ranked last), one row per
    level, one-sided p for rho > 0 from the exact two-sided permutation p.
top-down propagation (per RankMe variant)
    more determined runs reach their floors output side first than input side first: exact
    one-sided sign test against 1/2, Clopper-Pearson interval (top_down_summary.json).
smaller-size geometry predicts larger-size acquisition order (per RankMe variant)
    Spearman rho of the transition steps at the smaller size vs acquisition steps at the
    larger one, per level and size pair (prediction.json ``cross_scale``).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from .nulls import CELLS, cluster_bootstrap, is_precursor, permutation_null, sign_test
from .rates import effective_transition
from .stats import sign_test as binomial_p
from .stats import holm

VERDICT_COLUMNS = ["claim", "measure", "variant", "protocol", "statistic", "value", "ci95_lo", "ci95_hi",
                   "n_units", "n_runs", "null", "null_value", "p", "p_holm", "family", "verdict", "detail"]
RULE = ("reproduced: Holm-adjusted one-sided p < alpha and the 95% interval above the null value "
        "(the estimate, for statistics without an interval: rank correlations, ANOVA); "
        "not reproduced: adjusted p >= alpha and the estimate at or below the null value; "
        "inconclusive: fewer than n_min units, no test, or neither of the above")


def word(p, ci_lo, estimate, n_units: int, null_value: float, alpha: float = 0.05, n_min: int = 5) -> str:
    """The rule that turns a statistic into a word (module doc)."""
    if n_units < n_min or p is None or estimate is None or (isinstance(p, float) and math.isnan(p)):
        return "inconclusive"
    above = ci_lo > null_value if ci_lo is not None and not math.isnan(ci_lo) else estimate > null_value
    if p < alpha and above:
        return "reproduced"
    if p >= alpha and estimate <= null_value:
        return "not reproduced"
    return "inconclusive"


def _mean_of(x: np.ndarray):
    """stat(idx) = mean of the per-run numbers x at idx."""
    return lambda idx: float(np.mean(x[idx])) if len(idx) else None


def _median_of(x: np.ndarray):
    return lambda idx: float(np.median(x[idx])) if len(idx) else None


def _cells(df: pd.DataFrame, cols=CELLS) -> int:
    return int(df.groupby(list(cols)).ngroups) if len(df) else 0


def _row(claim, measure, variant, statistic, value, ci, n_units, n_runs, null, null_value, p, family, detail="",
         protocol="single-task"):
    return {"claim": claim, "measure": measure, "variant": variant, "protocol": protocol,
            "statistic": statistic, "value": value, "ci95_lo": ci[0], "ci95_hi": ci[1], "n_units": n_units,
            "n_runs": n_runs, "null": null, "null_value": null_value, "p": p, "p_holm": None,
            "family": family, "verdict": None, "detail": detail}


def precursor_claims(rows: pd.DataFrame, st: dict, protocol: str = "single-task", cluster_cols=CELLS,
                     perm_group: str = "size") -> list[dict]:
    """Rows for the sequence, precursor and specificity claims (module doc) from the
    per-run x per-measure long table (``rates.measure_rows``). ``cluster_cols``: the units
    intervals resample and n_units counts; ``perm_group``: acquisition steps are shuffled within
    its values (defaults: cells and sizes; the mixture protocol: models, analysis.protocols)."""
    out = []
    P = dict(protocol=protocol)
    boot = lambda df, stat: cluster_bootstrap(df, stat, nb, seed, cluster_cols)  # noqa: E731
    nb, seed = int(st.get("n_bootstrap", 2000)), int(st.get("seed", 0))
    n_perm = int(st.get("n_permutations", 10_000))
    real = rows[(rows["control"] == "") & ~rows["diverged"].astype(bool)].reset_index(drop=True)
    for measure in dict.fromkeys(real["measure"]):
        rm = real[real["measure"] == measure].reset_index(drop=True)
        acq = rm[rm["acquired"].astype(bool)].reset_index(drop=True)
        if not len(acq):
            continue
        variant = str(acq["variant"].iloc[0] or "")
        frac = float(acq["min_gap_frac"].iloc[0])
        emax = pd.to_numeric(acq["easy_max_step"], errors="coerce").to_numpy(float)
        t_acq = pd.to_numeric(acq["acquisition_step"], errors="coerce").to_numpy(float)
        hard = acq["difficulty"].to_numpy() == "hard"
        easy = acq["difficulty"].to_numpy() == "easy"
        t_tr = effective_transition(acq)
        res = permutation_null(t_tr, t_acq, acq[perm_group].to_numpy(), lambda a: (a > emax), frac, n_perm, seed)
        pre = is_precursor(t_tr, t_acq, frac).astype(float)              # per acquired run
        h = acq[hard].reset_index(drop=True)
        if len(h):
            null_rate = res["null_mean_k"] / res["n"] if res["n"] else None
            out.append(_row("precursor on hard runs", measure, variant, "precursor rate (hard runs)",
                            float(pre[hard].mean()), boot(h, _mean_of(pre[hard])),
                            _cells(h, cluster_cols), len(h), f"acquisition steps shuffled within {perm_group}s (permutation)",
                            null_rate, res["p_rate"], "precursor on hard runs",
                            f"{res['k']}/{res['n']} runs; {res['n_permutations']} permutations ({res['method']})", **P))
        if hard.any() and easy.any():
            sel = hard | easy
            both = acq[sel].reset_index(drop=True)
            pb, hb = pre[sel], hard[sel]

            def diff(idx, _p=pb, _h=hb):
                hh, ee = _p[idx][_h[idx]], _p[idx][~_h[idx]]
                return float(hh.mean() - ee.mean()) if len(hh) and len(ee) else None
            out.append(_row("precursor specific to hard runs", measure, variant, "rate(hard) - rate(easy)",
                            diff(np.arange(len(both))), boot(both, diff), _cells(both, cluster_cols),
                            len(both), "hard-run permutation p; difference against 0", 0.0, res["p_rate"],
                            "precursor specific to hard runs", f"hard {pre[hard].mean():.2f} ({int(hard.sum())} runs), "
                            f"easy {pre[easy].mean():.2f} ({int(easy.sum())} runs)", **P))
        if measure.startswith("rankme") and len(h):
            t_rec = pd.to_numeric(acq["recovery_step"], errors="coerce").to_numpy(float)
            t_rec = np.where(acq["transitioned"].fillna(False).astype(bool), t_rec, np.nan)
            seq = permutation_null(t_rec, t_acq, acq[perm_group].to_numpy(), lambda a: (a > emax), 0.0, n_perm, seed)
            ok = is_precursor(t_rec, t_acq, 0.0).astype(float)[hard]
            out.append(_row("collapse -> recovery -> acquisition", measure, variant,
                            "share of hard runs that collapsed and recovered before acquisition",
                            float(ok.mean()), boot(h, _mean_of(ok)), _cells(h, cluster_cols), len(h),
                            f"acquisition steps shuffled within {perm_group}s (permutation)",
                            seq["null_mean_k"] / seq["n"] if seq["n"] else None, seq["p_rate"],
                            "sequence", f"{seq['k']}/{seq['n']} hard runs", **P))
    return out


def behaviour_claims(pres: list[dict], st: dict) -> list[dict]:
    """Acquisition rate, log-prob before accuracy, probes before behaviour (module doc)."""
    nb, seed = int(st.get("n_bootstrap", 2000)), int(st.get("seed", 0))
    runs = pd.DataFrame([{"task": p["task"], "level": p["level"], "size": p["size"], "acquired": bool(p["acquired"]),
                          "t_acq": p.get("acquisition_step"), "t_lp": p.get("logprob_emergence_step"),
                          "t_first": p.get("first_token_acquisition_step"),
                          "t_probe": ((p.get("probes") or {}).get("acquisition_step"))}
                         for p in pres if not p.get("control") and not p.get("diverged")])
    out = []
    if not len(runs):
        return out
    cells = runs.groupby(["task", "level", "size"])["acquired"].mean()
    k, n = int((cells > 0.5).sum()), int(len(cells))
    p = binomial_p(k, n, "greater")
    out.append(_row("acquisition rate", "accuracy", "", "share of cells acquired (majority of seeds)", k / n if n else None,
                    cluster_bootstrap(runs, _mean_of(runs["acquired"].to_numpy(float)), nb, seed), n, len(runs),
                    "exact binomial test against 1/2", 0.5, p, "acquisition rate", f"{k}/{n} cells"))
    for claim, a, b, stat_name in (("log-prob before accuracy", "t_acq", "t_lp", "median lead of log-prob emergence (steps)"),
                                   ("probes before behaviour", "t_first", "t_probe",
                                    "median lead of final-layer probe over first-token acquisition (steps)")):
        d = runs.dropna(subset=[a, b]).reset_index(drop=True)
        lead = (pd.to_numeric(d[a]) - pd.to_numeric(d[b])).to_numpy(float)
        pval = sign_test(lead, "greater")["p"]
        out.append(_row(claim, "accuracy" if claim.startswith("log") else "probe_accuracy_norm", "", stat_name,
                        float(np.median(lead)) if len(d) else None,
                        cluster_bootstrap(d, _median_of(lead), nb, seed) if len(d) else (None, None), _cells(d), len(d),
                        "exact one-sided sign test (lead > 0)", 0.0, pval, claim,
                        f"{int((lead > 0).sum())} of {len(d)} runs lead" if len(d) else "no run has both events"))
    return out


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


def json_claims(jsons: dict, st: dict) -> list[dict]:
    """Rows for the floors, scale, top-down and prediction claims from the summary JSON files
    (floor_summary.json, scale_invariance.json, top_down_summary.json, prediction.json), for
    both RankMe variants. A statistic that could not be computed gives an inconclusive row
    saying why."""
    out = []
    fl = (jsons.get("floor_summary.json") or {}).get("measures", {})
    for m, variant in RANKME.items():
        a = (fl.get(m) or {}).get("all") or {}
        n_cells = int(a.get("n_cells") or 0)
        out.append(_row("floors task-specific", m, variant, "omega^2(task) - omega^2(size) of log10 floor",
                        (a["omega2_task"] - a["omega2_size"]) if a.get("omega2_task") is not None
                        and a.get("omega2_size") is not None else None, (None, None), n_cells,
                        a.get("n_runs") or 0, "two-way ANOVA: F test for task (F distribution)", 0.0,
                        a.get("p_task"), "floors task-specific", a.get("note") or f"F_task {a.get('F_task')}"))
    fam = ((jsons.get("scale_invariance.json") or {}).get("families") or {}).get("toy") or {}
    for what, claim, family in (("floors", "floors scale-invariant", "floors scale-invariant"),
                                ("acquisition_order", "acquisition order scale-invariant", "acquisition order")):
        for m, variant in (RANKME.items() if what == "floors" else [("acquisition", "")]):
            src = (fam.get("floors", {}).get(m) if what == "floors"
                   else (fam.get("acquisition_order") or {}).get("censored_last")) or {}
            for lv, e in (src.get("by_level") or {}).items():
                sl = e.get("smallest_vs_largest") or {}
                rho = sl.get("rho")
                vs = f"{sl.get('a')} vs {sl.get('b')}" if sl else "needs two sizes"
                out.append(_row(claim, m, variant, f"Spearman rho over tasks, level {lv}, {vs}",
                                rho, (None, None), int(sl.get("n") or 0), int(sl.get("n") or 0),
                                "exact permutation (pairing of tasks across sizes)", 0.0, _one_sided(rho, sl.get("p")),
                                family, sl.get("reason") or (f"not acquired ranked last: {sl.get('n_censored_ranked_last')}"
                                                             if what != "floors" else "")))
    td = (jsons.get("top_down_summary.json") or {}).get("measures", {})
    for m, variant in RANKME.items():
        a = (td.get(m) or {}).get("all") or {}
        k = int(str(a.get("top_down", "0/0")).split("/")[0] or 0)
        n = int(a.get("n_determined") or 0)
        p = binomial_p(k, n, "greater")
        out.append(_row("top-down propagation", m, variant, "share of determined runs whose floors run top-down",
                        k / n if n else None, _clopper_pearson(k, n), n, int(a.get("runs") or 0),
                        "exact one-sided sign test against 1/2 (tied and undetermined runs left out)", 0.5, p,
                        "top-down", f"{k}/{n} top-down; tied {a.get('tied_tau0')}, undetermined {a.get('undetermined')}"))
    cs = (jsons.get("prediction.json") or {}).get("cross_scale") or {}
    for pair, by_m in (cs.items() if isinstance(cs, dict) else []):
        for m, variant in RANKME.items():
            for lv, e in ((by_m or {}).get(m) or {}).items():
                rho = e.get("rho")
                out.append(_row("smaller-size geometry predicts larger-size acquisition order", m, variant,
                                f"Spearman rho, level {lv}, {pair}", rho, (None, None), int(e.get("n") or 0),
                                int(e.get("n") or 0), "exact permutation", 0.0, _one_sided(rho, e.get("p")),
                                "cross-scale prediction", e.get("reason") or ""))
    return out


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
