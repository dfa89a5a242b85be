"""The prediction claims: within-class concordance of transition and acquisition orders, and
what a smaller size's geometry says of a larger size's acquisition order (prediction.json).
"""
from __future__ import annotations

import numpy as np

from ..stats import binomial_p, clopper_pearson, strata_permutations
from .base import (RANKME, UNITS_TEXT, Claim, ClaimRow, Design, MeasureView, fmt, k_of_n, n_runs,
                   p_greater, summary_level)


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
    tail = (1 - m.level) / 2
    ci = tuple(float(x) for x in np.quantile(boots, [tail, 1 - tail])) if len(boots) else (None, None)
    upper = float(np.quantile(boots, 1 - tail)) if len(boots) else None     # one-sided 1 - alpha
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
                     float(value), ci, len(a), n_runs(a), "acquisition steps permuted within size x class", 0.5, p,
                     "prediction limits", m.mean_direction(a) + f"{len(s)} pairs; loss-plateau exit on the same pairs:"
                     f" {fmt(loss_c)}; the study reports 52-69%", m.protocol, event="transition", headline=m.headline,
                     ci_level=m.level, bound=upper)]



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
                                    int(e.get("n") or 0), "exact permutation", 0.0, p_greater(e),
                                    "cross-scale prediction", e.get("reason") or ""))
    return out


def ordering_swaps(jsons: dict) -> list[ClaimRow]:
    """Pairs of tasks whose acquisition order swaps between two sizes: the share the smaller
    size's transition order gets right at the larger size, beside the loss-plateau exit's."""
    pairs = ((jsons.get("prediction.json") or {}).get("reversals") or {}).get("pairs") or []

    def kn(m):
        k = n = 0
        for e in pairs:
            a, b = k_of_n(((e.get("by_measure") or {}).get(m) or {}).get("cross_scale_from_a_k_of_n"))
            k, n = k + a, n + b
        return k, n
    lk, ln = kn("loss_plateau_exit")
    n_rev = sum(int(e.get("reversed_pairs") or 0) for e in pairs)
    out, level = [], summary_level(jsons)
    for m, variant in RANKME.items():
        k, n = kn(m)
        out.append(ClaimRow("ordering swaps predicted", m, variant,
                            "share of swapped task pairs whose order at the larger size the smaller size's transition"
                            " order gets right", k / n if n else None, clopper_pearson(k, n, level), n, n,
                            "exact one-sided binomial test against 1/2 (the study: 26%, below chance)", 0.5,
                            binomial_p(k, n, "less") if n else None, "prediction limits",
                            f"{k}/{n} swapped pairs ({n_rev} swapped in all); loss-plateau exit {lk}/{ln}",
                            rule="less", ci_level=level))
    return out


CLAIMS = [
    Claim("within-class concordance", "per measure and variant",
          "within a difficulty class geometry predicts the order of acquisition only modestly (52-69% of pairs)",
          "share of concordant pairs of cells of one size and class (transition vs acquisition), bootstrap over"
          " cells, beside the loss-plateau exit's share", "acquisition steps permuted within size x class (0.5)",
          UNITS_TEXT, "measure", within_class_concordance,
          design=Design("simulated", ("exchangeable", "clock", "class-clock", "loss-copy", "seed-clustered"),
                        ("partial",), "rankme_centred",
                        ("transition",)), figure="timing", effect_of_interest=0.6,
          effect_reason="0.6: the bottom of the modest order the study reports (52-69% of pairs) rounded up; a"
                        " concordance below 0.6 is no prediction a researcher could use"),
    Claim("smaller-size geometry predicts larger-size acquisition order", "per RankMe variant, level and size pair",
          "the transition order at a smaller size predicts the acquisition order at a larger one",
          "Spearman rho of the smaller size's transition steps vs the larger size's acquisition steps over the"
          " tasks of one level; exact one-sided permutation p",
          "rho 0", "prediction.json: cross_scale", "summary", cross_scale_prediction,
          figure="prediction"),
    Claim("ordering swaps predicted", "per RankMe variant",
          "when two tasks swap their acquisition order between sizes, the smaller size's geometry rarely gets the"
          " larger size's order right (26%)",
          "share of swapped pairs the smaller size's transition order gets right, beside the loss-plateau exit's;"
          " exact one-sided binomial test (below 1/2)", "1/2", "prediction.json: reversals", "summary",
          ordering_swaps,
          figure="prediction"),
]
