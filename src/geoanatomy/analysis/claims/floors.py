"""The floor claims (collapse floors task-specific, equal across sizes, the MOD floor near 2.0) and
the rank agreements across sizes of the scale_invariance.json file (floors, acquisition order).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..stats import timing
from ..floors import collapse_floors
from .base import RANKME, Claim, ClaimRow, RunsView, bound_pct, p_greater, summary_level


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
    delta = float(v.st["slope_equivalence"])
    for measure, variant in RANKME.items():
        fl = _floor_units(v, measure)
        if not len(fl):
            continue
        fl["log_params"] = np.log10(pd.to_numeric(fl["n_params"]).astype(float))
        groups = [g for _, g in fl.groupby(["task", "level"]) if g["size"].nunique() >= 2]
        if not groups:
            out.append(ClaimRow("floors equal across sizes", measure, variant, "slope of log10 floor on log10 params",
                                None, (None, None), 0, 0, "", delta, None, "floors equal across sizes",
                                "needs a task x level at two sizes or more", rule="equivalence", ci_level=v.level))
            continue

        # per group: [(log10 params, log10 floors of the cell's seeds)] for each of its sizes
        cells = [[(float(c["log_params"].iloc[0]), c["log_floor"].to_numpy(float)) for _, c in g.groupby("size")]
                 for g in groups]
        b = _within_group_slope(cells)
        boots = _within_group_slope_bootstrap(cells, v.nb, np.random.default_rng(v.seed))
        tail = (1 - v.level) / 2                    # each end a one-sided 1 - alpha bound (the TOST's)
        lo, hi = (float(x) for x in np.nanquantile(boots, [tail, 1 - tail]))
        p = max(float(np.mean(boots <= -delta)), float(np.mean(boots >= delta)))
        n_cells = sum(g["size"].nunique() for g in groups)
        out.append(ClaimRow("floors equal across sizes", measure, variant,
                            "within task x level slope of log10 floor on log10 parameter count", b, (lo, hi),
                            n_cells, sum(len(g) for g in
                                         groups), "two one-sided bootstrap tests against +-delta", delta,
                            p, "floors equal across sizes",
                            f"{len(groups)} task x level groups at 2+ sizes; bootstrap over groups, seeds resampled in"
                            f" their cells; delta {delta} decade of floor per decade of parameters",
                            rule="equivalence", ci_level=v.level, headline=variant == v.st["headline_variant"]))
    return out


def mod_floor_near_two(v: RunsView) -> list[ClaimRow]:
    """Per RankMe variant and size: the median MOD floor over its cells (levels), beside the
    study's 2.0, as an equivalence of log10(floor / 2) within +-equivalence_decades."""
    out = []
    delta = float(v.st["equivalence_decades"])
    ref = float(v.st["mod_floor_reference"])
    for measure, variant in RANKME.items():
        fl = _floor_units(v, measure)
        fl = fl[fl["task"] == "mod"]
        for size, g in fl.groupby("size", sort=False):
            cells = g.groupby(["task", "level", "size"])["log_floor"].median().to_numpy(float) - math.log10(ref)
            r = timing.lag_test(cells, delta, level=v.level)
            out.append(ClaimRow("MOD floor near 2.0", measure, variant,
                                f"mean over MOD cells at {size} of log10(floor / {ref})", r.statistic, r.ci,
                                len(cells), len(g), "two one-sided t tests against +-delta", delta,
                                r.p_simultaneous, "MOD floor",
                                f"median floor {10 ** (np.median(cells) + math.log10(ref)):.2f} at {size} (study: "
                                f"{ref});"
                                f" delta {delta} decade", rule="equivalence", ci_level=v.level,
                                headline=variant == v.st["headline_variant"]))
    return out




def floors_task_specific(jsons: dict) -> list[ClaimRow]:
    fl = (jsons.get("floor_summary.json") or {}).get("measures") or {}
    out = []
    for m, variant in RANKME.items():
        a = (fl.get(m) or {}).get("all") or {}
        out.append(ClaimRow("floors task-specific", m, variant, "omega^2(task) - omega^2(size) of log10 floor",
                            (a["omega2_task"] - a["omega2_size"]) if a.get("omega2_task") is not None
                            and a.get("omega2_size") is not None else None, (None, None), int(a.get("n_cells") or 0),
                            a.get("n_runs") or 0, "two-way ANOVA: F test for task (F distribution); units task x level "
                                                  "x"
                            " size cells (median over seeds), levels pooled", 0.0,
                            a.get("p_task"), "floors task-specific", a.get("note") or f"F_task {a.get('F_task')}"))
    return out


def _toy_scale(jsons: dict) -> dict:
    return ((jsons.get("scale_invariance.json") or {}).get("families") or {}).get("toy") or {}


def spearman_bounds(rho, n: int, level: float = 0.95) -> tuple:
    """One-sided ``level`` bounds of a Spearman rho over n pairs: Fisher's z with the
    Fieller-Hartley-Pearson variance 1.06 / (n - 3) (``timing.fisher_bounds``)."""
    return timing.fisher_bounds(rho, n, 1.06, level)


def _smallest_vs_largest(claim: str, family: str, m: str, variant: str, src: dict, detail,
                         magnitude: float | None = None, level: float = 0.90) -> list[ClaimRow]:
    """One row per level of ``src`` (a scale_invariance.json entry with ``by_level``):
    Spearman rho between the smallest and the largest size; ``detail(e)`` for the detail;
    ``magnitude``: the rho the paper states, the row's bound (Fisher z) held against it, each
    bound one-sided at (1 + ``level``) / 2 (the summary's interval level, ``summary_level``)."""
    out = []
    for lv, e in (src.get("by_level") or {}).items():
        sl = e.get("smallest_vs_largest") or {}
        rho = sl.get("rho")
        n = int(sl.get("n") or 0)
        vs = f"{sl.get('a')} vs {sl.get('b')}" if sl else "needs two sizes"
        lo, hi = spearman_bounds(rho, n, (1 + level) / 2) if magnitude is not None else (None, None)
        text = sl.get("reason") or detail(sl)
        if lo is not None:
            text += (f"{'; ' if text else ''}the paper's rho > {magnitude:g}: one-sided {bound_pct(level)} bounds"
                     f" (Fisher z) {lo:.2f}, {hi:.2f}: " + ("shown" if lo > magnitude else "excluded" if hi < magnitude
                                                  else "neither shown nor excluded"))
        out.append(ClaimRow(claim, m, variant, f"Spearman rho over tasks, level {lv}, {vs}", rho, (None, None),
                            n, n, "exact permutation (pairing of tasks across sizes)", 0.0, p_greater(sl),
                            family, text, bound=hi))
    return out


def floors_scale_invariant(jsons: dict) -> list[ClaimRow]:
    fam = _toy_scale(jsons)
    return [r for m, variant in RANKME.items()
            for r in _smallest_vs_largest("floor rank agreement across sizes", "floor rank agreement", m, variant,
                                          (fam.get("floors") or {}).get(m) or {}, lambda sl: "", PAPER_RHO,
                                          summary_level(jsons))]


PAPER_RHO = 0.9


def acquisition_order_scale_invariant(jsons: dict) -> list[ClaimRow]:
    src = (_toy_scale(jsons).get("acquisition_order") or {}).get("censored_last") or {}
    return _smallest_vs_largest("acquisition order scale-invariant", "acquisition order", "acquisition", "", src,
                                lambda sl: f"not acquired ranked last: {sl.get('n_censored_ranked_last')}")


CLAIMS = [
    Claim("floors task-specific", "per RankMe variant",
          "collapse floors are task-specific",
          "two-way ANOVA of log10 floors (task x size cells, levels pooled as units): significant task F test"
          " and omega^2(task) > omega^2(size); estimate omega^2(task) - omega^2(size)",
          "no task effect (F distribution)", "floor_summary.json", "summary", floors_task_specific,
          figure="floors"),
    Claim("floors equal across sizes", "per RankMe variant",
          "a task's floor is the same at every size",
          "within task x level slope of log10 floor on log10 parameter count (cells = medians over seeds), 90%"
          " bootstrap interval inside (-delta, delta), delta = summary.slope_equivalence",
          "a slope of at least delta either way", "precursor.json: floors per run (collapse_floors)", "runs",
          floors_equal_across_sizes,
          figure="floors"),
    Claim("MOD floor near 2.0", "per RankMe variant and size",
          "the MOD floor is near 2.0 at every size",
          "mean over the MOD cells of one size of log10(floor / 2.0), 90% Student t interval inside"
          " (-delta, delta), delta = summary.equivalence_decades", "a ratio of at least 10^delta either way",
          "precursor.json: floors per run", "runs", mod_floor_near_two,
          figure="floors"),
    Claim("floor rank agreement across sizes", "per RankMe variant and level",
          "tasks keep the order of their floors across model sizes",
          "Spearman rho over the tasks of one level, smallest vs largest size; exact one-sided permutation p; the"
          " paper's rho > 0.9 held against the one-sided 95% Fisher-z bounds",
          "rho 0 (tasks paired at random across sizes)", "scale_invariance.json: floors", "summary",
          floors_scale_invariant,
          figure="floors", effect_of_interest=PAPER_RHO,
          effect_reason="rho 0.9, the paper's magnitude: 'not reproduced' when the Fisher-z bound excludes it"),
    Claim("acquisition order scale-invariant", "per level",
          "tasks keep their acquisition order across model sizes",
          "as floor rank agreement, on acquisition steps (unacquired cells ranked last)",
          "rho 0 (tasks paired at random across sizes)", "scale_invariance.json: acquisition_order", "summary",
          acquisition_order_scale_invariant,
          figure="prediction"),
]
