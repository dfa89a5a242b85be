"""How well geometry predicts the order of acquisition.

Runs used: study runs only (shuffled-label control runs and diverged runs are
left out everywhere here, as in scale invariance). A geometric measure predicts
only where it transitioned (collapsed, or risen for ``direction: rise``): its
transition step is used only then; a measure that did not transition gives no
prediction (never the argmin of a flat curve). Reference measures
(loss_plateau_exit, logprob_emergence) always count when their event exists, and
are scored the same way, as the baseline a geometric measure has to beat.

within_class[measure][class]: over runs of one size and one behavioural class
(easy, hard; "acquired" = both) that acquired and have a transition, every pair
of runs is concordant when the transition steps and the acquisition steps are in
the same strict order, discordant when in opposite order, tied otherwise
(stats.concordance). Units are runs (replicate seeds are separate runs). by_size
gives C, D, ties, concordance = C / (C + D), Kendall tau_b and its p; pooled sums
C and D over sizes (pairs are only formed within one size: step budgets may
differ between sizes).

Cells: a cell is task x level x size; the statistics below use one value per
cell, the median over its seeds, with a seed that never acquired (or whose
measure never transitioned) counted as +inf, so a cell is acquired (has a
transition) when at least half its seeds are; n counts cells.

same_size[size][measure][level]: SAME-SIZE CHECK. Spearman rho of the cells'
transition steps vs their acquisition steps at one size, over the tasks of one
level acquired there and with a transition (n = tasks), exact two-sided
permutation p (stats.py); Holm over the levels of one measure and size.

cross_scale[pair][measure][level]: CROSS-SCALE PREDICTION. For sizes a smaller
than b (same family): Spearman rho of the transition steps at size a vs the
acquisition steps at size b, over the tasks of one level with a transition at a
and acquired at b (n = tasks), exact two-sided permutation p; Holm over the
levels of one measure and size pair. This asks whether the smaller model's
geometry predicts the larger model's acquisition order, which the same-size
check cannot.

reversals: for each pair of sizes (a smaller than b, same family), cells
(task_level units) acquired at both; a unit pair is comparable when its
acquisition order is strict at both sizes and reversed when the order differs.
share = reversed / comparable. For each measure, among reversed pairs (each
count over the reversed pairs where the steps it needs exist): tracked = its
transition order is strict and matches the acquisition order at *both* sizes
(geometry reversed too); same_size_at_b = its order at b matches the acquisition
order at b (same-size check); cross_scale_from_a = its order at a matches the
acquisition order at b (the smaller size predicts the reversal).
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from .load import family, level_order, per_cell, seeds_span, size_order, task_order
from .rates import ordered_measures
from .stats import concordance, holm, spearman_exact

CLASSES = {"easy": ["easy"], "hard": ["hard"], "acquired": ["easy", "hard"]}
SPEARMAN_TEST = ("Spearman rho over the tasks of one level (one value per cell = median over seeds), exact two-sided "
                 "permutation p; Holm over levels")


def study_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows of study runs (no control, not diverged) with ``t_tr``: the transition step where
    it counts (a geometric measure must have transitioned; references always count)."""
    r = rows[(rows["control"].fillna("") == "") & ~rows["diverged"].astype(bool)].copy()
    t = pd.to_numeric(r["transition_step"], errors="coerce").astype(float)
    ok = (r["kind"] == "reference") | r["transitioned"].fillna(False).astype(bool)
    r["t_tr"] = t.where(ok)
    r["t_acq"] = pd.to_numeric(r["acquisition_step"], errors="coerce").astype(float).where(r["acquired"].astype(bool))
    if "seed" not in r.columns:
        r["seed"] = 0
    return r


def within_class(rows: pd.DataFrame) -> dict:
    out = {}
    sizes = size_order(rows["size"], dict(zip(rows["size"], rows["n_params"])))
    ok = rows[rows["acquired"].astype(bool) & rows["t_tr"].notna() & rows["t_acq"].notna()]
    for measure in ordered_measures(rows):
        res = {}
        for cls, members in CLASSES.items():
            by_size, C, D, T = {}, 0, 0, 0
            for size in sizes:
                g = ok[(ok["measure"] == measure) & (ok["size"] == size) & ok["difficulty"].isin(members)]
                if len(g) < 2:
                    continue
                c = concordance(g["t_tr"], g["t_acq"])
                by_size[size] = c.record()
                C, D, T = C + c.concordant, D + c.discordant, T + c.tied
            res[cls] = {"pooled": {"concordant": C, "discordant": D, "tied": T,
                                   "concordance": C / (C + D) if C + D else None,
                                   "n_runs": int(sum(v["n"] for v in by_size.values()))},
                        "by_size": by_size}
        out[measure] = res
    return out


def cell_steps(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per measure x size x level x task cell: t_acq and t_tr = medians over seeds
    (+inf for a seed without the event), NaN when the median is +inf; n_seeds. t_acq is
    taken over every study run of the cell (one row per run), t_tr over the runs with
    that measure."""
    r = rows.assign(unit=rows["task"] + "_" + rows["level"],
                    a=rows["t_acq"].fillna(np.inf), t=rows["t_tr"].fillna(np.inf))
    cell = ["family", "size", "level", "task", "unit"]
    a = per_cell(r.drop_duplicates("run"), cell, "a")
    t = per_cell(r, ["measure"] + cell, "t")
    c = t.merge(a.drop(columns="n_seeds"), on=cell, how="left")
    c["t_acq"] = c["a"].where(np.isfinite(c["a"]))
    c["t_tr"] = c["t"].where(np.isfinite(c["t"]))
    return c.drop(columns=["a", "t"])


def _spearman_levels(c_x: pd.DataFrame, c_y: pd.DataFrame, st: dict) -> dict:
    """Per level: Spearman of c_x.t_tr vs c_y.t_acq over tasks present in both; Holm over levels."""
    res = {}
    for lv in level_order(pd.concat([c_x["level"], c_y["level"]])):
        x = c_x[c_x["level"] == lv].set_index("task")
        y = c_y[c_y["level"] == lv].set_index("task")
        both = [t for t in task_order(x.index) if t in y.index]
        x, y = x.reindex(both), y.reindex(both)
        ok = x["t_tr"].notna() & y["t_acq"].notna()
        r = spearman_exact(x["t_tr"][ok], y["t_acq"][ok], st["exact_max_n"], st["n_resamples"], st["seed"])
        res[lv] = {**r.record(), "tasks": list(x.index[ok]),
                   "seeds_per_cell": seeds_span(list(x["n_seeds"][ok]) + list(y["n_seeds"][ok])),
                   "n_without_transition_or_unacquired": int((~ok).sum())}
    ps = [v["p"] for v in res.values()]
    alpha = st["alpha"]
    for v, ph in zip(res.values(), holm(ps)):
        v["p_holm"] = ph
        v["holm_family"] = f"{sum(p is not None for p in ps)} level(s)"
        v["verdict"] = ("no significant correlation" if ph is None or ph >= alpha
                        else ("predicts the order" if v["rho"] > 0 else "predicts the reverse order"))
    return res


def same_size(cells: pd.DataFrame, sizes: list[str], measures: list[str], st: dict) -> dict:
    out = {}
    for size in sizes:
        cs = cells[cells["size"] == size]
        out[size] = {m: _spearman_levels(cs[cs["measure"] == m], cs[cs["measure"] == m], st) for m in measures
                     if (cs["measure"] == m).any()}
    return out


def cross_scale(cells: pd.DataFrame, sizes: list[str], measures: list[str], st: dict) -> list[dict]:
    out = []
    for a, b in itertools.combinations(sizes, 2):
        if family(a) != family(b):
            continue
        ca, cb = cells[cells["size"] == a], cells[cells["size"] == b]
        by_m = {m: _spearman_levels(ca[ca["measure"] == m], cb[cb["measure"] == m], st) for m in measures
                if (ca["measure"] == m).any() and (cb["measure"] == m).any()}
        out.append({"a": a, "b": b, "question": f"does the transition order at {a} predict the acquisition order at "
                                                f"{b}?",
                    "by_measure": by_m})
    return out


def _sign(x):
    return int(np.sign(x))


def reversals(cells: pd.DataFrame, sizes: list[str], measures: list[str]) -> dict:
    acq = cells[cells["t_acq"].notna()].drop_duplicates(["size", "unit"]).set_index(["size", "unit"])["t_acq"]
    t_tr = {m: cells[cells["measure"] == m].set_index(["size", "unit"])["t_tr"] for m in measures}
    pairs, tot_cmp, tot_rev = [], 0, 0
    for a, b in itertools.combinations(sizes, 2):
        if family(a) != family(b):
            continue
        ua = set(acq.loc[a].index) if a in acq.index.get_level_values(0) else set()
        ub = set(acq.loc[b].index) if b in acq.index.get_level_values(0) else set()
        units = sorted(ua & ub)
        cmp_, rev = 0, []
        for u, v in itertools.combinations(units, 2):
            sa, sb = _sign(acq[(a, u)] - acq[(a, v)]), _sign(acq[(b, u)] - acq[(b, v)])
            if sa == 0 or sb == 0:
                continue
            cmp_ += 1
            if sa != sb:
                rev.append((u, v, sa, sb))
        by_m = {}
        for m in measures:
            s = t_tr[m]
            tracked = n_tracked = same_b = n_b = cross = n_a = 0
            for u, v, sa, sb in rev:
                da = s.get((a, u), np.nan) - s.get((a, v), np.nan)
                db = s.get((b, u), np.nan) - s.get((b, v), np.nan)
                if np.isfinite(da) and np.isfinite(db):
                    n_tracked += 1
                    tracked += int(_sign(da) == sa and _sign(db) == sb)
                if np.isfinite(db):
                    n_b += 1
                    same_b += int(_sign(db) == sb)
                if np.isfinite(da):
                    n_a += 1
                    cross += int(_sign(da) == sb)
            by_m[m] = {"tracked_k_of_n": f"{tracked}/{n_tracked}",
                       "same_size_at_b_k_of_n": f"{same_b}/{n_b}",
                       "cross_scale_from_a_k_of_n": f"{cross}/{n_a}",
                       "reversed_pairs_without_transition_at_both": len(rev) - n_tracked}
        pairs.append({"a": a, "b": b, "n_cells_acquired_at_both": len(units), "comparable_pairs": cmp_,
                      "reversed_pairs": len(rev), "share_reversed": len(rev) / cmp_ if cmp_ else None,
                      "reversed": [f"{u}/{v}" for u, v, _, _ in rev], "by_measure": by_m})
        tot_cmp, tot_rev = tot_cmp + cmp_, tot_rev + len(rev)
    return {"units": "task_level cells (median over seeds) acquired at both sizes; diverged and control runs left out",
            "pairs": pairs, "pooled": {"comparable_pairs": tot_cmp, "reversed_pairs": tot_rev,
                                       "share_reversed": tot_rev / tot_cmp if tot_cmp else None}}


def prediction(rows: pd.DataFrame, st: dict) -> dict:
    """prediction.json (module doc); ``st``: the resolved ``summary`` settings."""
    all_runs = rows.drop_duplicates("run")
    r = study_rows(rows)
    runs = r.drop_duplicates("run")
    measures = ordered_measures(r) if len(r) else []
    sizes = size_order(r["size"], dict(zip(r["size"], r["n_params"])))
    cells = cell_steps(r) if len(r) else pd.DataFrame(columns=["measure", "size", "level", "task", "unit", "n_seeds",
                                                               "t_acq", "t_tr", "family"])
    cell_ids = cells.drop_duplicates(["size", "level", "task"])
    wc = within_class(r)
    headline = {m: {cls: v[cls]["pooled"]["concordance"] for cls in CLASSES} for m, v in wc.items()}
    return {"method": __doc__.strip(),
            "test": {"within_class": "pairwise concordance and Kendall tau_b over runs of one size and class",
                     "same_size": SPEARMAN_TEST, "cross_scale": SPEARMAN_TEST,
                     "reversals": "counts of reversed task-level pairs (descriptive)"},
            "n_runs": int(all_runs["run"].nunique()), "n_runs_used": int(runs["run"].nunique()),
            "n_acquired": int(runs["acquired"].astype(bool).sum()),
            "n_cells": len(cell_ids), "seeds_per_cell": seeds_span(cell_ids["n_seeds"]),
            "n_control_runs_left_out": int((all_runs["control"].fillna("") != "").sum()),
            "n_diverged_runs_left_out": int(((all_runs["control"].fillna("") == "")
                                             & all_runs["diverged"].astype(bool)).sum()),
            "concordance_pooled": headline, "within_class": wc,
            "same_size": same_size(cells, sizes, measures, st),
            "cross_scale": cross_scale(cells, sizes, measures, st),
            "reversals": reversals(cells, sizes, measures)}
