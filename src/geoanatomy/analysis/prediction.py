"""How well geometry predicts the order of acquisition.

within_class[measure][class]: over runs of one size and one behavioural class
(easy, hard; "acquired" = both) that acquired and have the measure's
transition step, every pair of runs is concordant when the transition steps
and the acquisition steps are in the same strict order, discordant when in
opposite order, tied otherwise (stats.concordance). by_size gives C, D, ties,
concordance = C / (C + D), Kendall tau_b and its p; pooled sums C and D over
sizes (pairs are only formed within one size: step budgets may differ
between sizes). Reference measures (loss_plateau_exit, logprob_emergence) are
scored the same way, as the baseline a geometric measure has to beat.

reversals: for each pair of sizes (a smaller than b, same family), units
(task_level) acquired at both; a unit pair is comparable when its acquisition
order is strict at both sizes and reversed when the order differs. share =
reversed / comparable. For each measure, among reversed pairs: tracked = its
transition order is strict and matches the acquisition order at *both* sizes
(geometry reversed too); predicted_at_b = it matches the order at size b; n = reversed
pairs where the measure has a transition in all four runs.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from .load import family, size_order
from .rates import ordered_measures
from .stats import concordance

CLASSES = {"easy": ["easy"], "hard": ["hard"], "acquired": ["easy", "hard"]}


def within_class(rows: pd.DataFrame) -> dict:
    out = {}
    sizes = size_order(rows["size"], dict(zip(rows["size"], rows["n_params"])))
    ok = rows[rows["acquired"] & rows["transition_step"].notna() & rows["acquisition_step"].notna()]
    for measure in ordered_measures(rows):
        res = {}
        for cls, members in CLASSES.items():
            by_size, C, D, T = {}, 0, 0, 0
            for size in sizes:
                g = ok[(ok["measure"] == measure) & (ok["size"] == size) & ok["difficulty"].isin(members)]
                if len(g) < 2:
                    continue
                c = concordance(g["transition_step"].astype(float), g["acquisition_step"].astype(float))
                by_size[size] = c
                C, D, T = C + c["concordant"], D + c["discordant"], T + c["tied"]
            res[cls] = {"pooled": {"concordant": C, "discordant": D, "tied": T,
                                   "concordance": C / (C + D) if C + D else None,
                                   "n_runs": int(sum(v["n"] for v in by_size.values()))},
                        "by_size": by_size}
        out[measure] = res
    return out


def _sign(x):
    return int(np.sign(x))


def reversals(rows: pd.DataFrame) -> dict:
    acq = rows[rows["acquired"] & rows["acquisition_step"].notna()].copy()
    acq["unit"] = acq["task"] + "_" + acq["level"]
    measures = ordered_measures(rows)
    t_acq = acq.drop_duplicates("run").set_index(["size", "unit"])["acquisition_step"].astype(float)
    t_tr = {m: acq[acq["measure"] == m].set_index(["size", "unit"])["transition_step"].astype(float) for m in measures}
    sizes = size_order(rows["size"], dict(zip(rows["size"], rows["n_params"])))
    pairs, tot_cmp, tot_rev = [], 0, 0
    for a, b in itertools.combinations(sizes, 2):
        if family(a) != family(b):
            continue
        ua = set(t_acq.loc[a].index) if a in t_acq.index.get_level_values(0) else set()
        ub = set(t_acq.loc[b].index) if b in t_acq.index.get_level_values(0) else set()
        units = sorted(ua & ub)
        cmp_, rev = 0, []
        for u, v in itertools.combinations(units, 2):
            sa, sb = _sign(t_acq[(a, u)] - t_acq[(a, v)]), _sign(t_acq[(b, u)] - t_acq[(b, v)])
            if sa == 0 or sb == 0:
                continue
            cmp_ += 1
            if sa != sb:
                rev.append((u, v, sa, sb))
        by_m = {}
        for m in measures:
            s = t_tr[m]
            tracked = pred_b = n_def = 0
            for u, v, sa, sb in rev:
                da, db = s.get((a, u), np.nan) - s.get((a, v), np.nan), s.get((b, u), np.nan) - s.get((b, v), np.nan)
                if not (np.isfinite(da) and np.isfinite(db)):
                    continue                                   # the measure has no transition in one of the runs
                n_def += 1
                tracked += int(_sign(da) == sa and _sign(db) == sb)
                pred_b += int(_sign(db) == sb)
            by_m[m] = {"tracked_k_of_n": f"{tracked}/{n_def}", "predicted_at_b_k_of_n": f"{pred_b}/{n_def}",
                       "reversed_pairs_without_transition": len(rev) - n_def}
        pairs.append({"a": a, "b": b, "n_units_acquired_at_both": len(units), "comparable_pairs": cmp_,
                      "reversed_pairs": len(rev), "share_reversed": len(rev) / cmp_ if cmp_ else None,
                      "reversed": [f"{u}/{v}" for u, v, _, _ in rev], "by_measure": by_m})
        tot_cmp, tot_rev = tot_cmp + cmp_, tot_rev + len(rev)
    return {"pairs": pairs, "pooled": {"comparable_pairs": tot_cmp, "reversed_pairs": tot_rev,
                                       "share_reversed": tot_rev / tot_cmp if tot_cmp else None}}


def prediction(rows: pd.DataFrame) -> dict:
    wc = within_class(rows)
    headline = {m: {cls: v[cls]["pooled"]["concordance"] for cls in CLASSES} for m, v in wc.items()}
    return {"method": __doc__.strip(), "n_runs": int(rows["run"].nunique()),
            "n_acquired": int(rows.drop_duplicates("run")["acquired"].sum()),
            "concordance_pooled": headline, "within_class": wc, "reversals": reversals(rows)}
