"""``headline.png`` and ``headline.csv``: the study's answer in one figure a reader gets in ten
seconds. Does the headline RankMe variant's collapse (its floor) time acquisition beyond what
the loss curve already says?

Left, one point per cell (task x level x size; the median over its seeds, as every claim reads
it): the cell's acquisition step (x) against the step of its RankMe floor and of the loss
curve's onset and extreme (y), both on log axes. Points under the diagonal come before
acquisition. Beside it, a strip for what never acquires: cells none of whose seeds acquired
(grey) and the shuffled-label controls (purple, one point per run), at their floor step: a
collapse that happens with nothing learned. The legend gives each event's Spearman rho with
the acquisition step over the drawn cells: the loss curve's answer beside the geometric one.

Right, the rows of verdict.csv that decide it: the timing test ("timing beyond the loss
curve") of both RankMe variants at both event kinds, the primary row first and in bold: the
partial rank correlation of log t_acq with the event given the loss curve's events before
acquisition and the design, its interval (verdict.csv's ``ci_level``), the null (dashed, 0) and the smallest effect
of interest (dotted); colour = the word. The title says the primary row's word and what its
bound excludes, in words.

``headline.csv`` is what the left panel draws, row for row (``headline_table``); the right
panel's rows are verdict.csv's (``timing_rows``). The runs' and machines' provenance goes into
the PNG's metadata (``Description``) and the caption, not onto the figure.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from . import figstyle, rates
from .claims.timing import PRIMARY_EVENT
from .figures_verdict import WORD_COLOUR, _num
from .units import unit_events

CLAIM = "timing beyond the loss curve"
EVENTS = {  # headline.csv column -> (legend label, colour, marker)
    "t_floor": ("RankMe floor", "tab:red", "o"),
    "t_loss_onset": ("loss-curve onset", "0.55", "v"),
    "t_loss_extreme": ("loss-curve extreme", "0.2", "s"),
}
EVENT_WORDS = {"extreme": "floor", "onset": "collapse onset"}   # RankMe's events in words
COLUMNS = ["task", "level", "size", "control", "difficulty", "runs", "acquired_runs", "acquired", "t_acq",
           "t_floor", "t_loss_onset", "t_loss_extreme"]


def headline_measure(st: dict) -> str:
    """The measure of the headline RankMe variant (``summary.headline_variant``)."""
    v = str(st["headline_variant"])
    return "rankme" if v == "uncentred" else f"rankme_{v}"


def timing_rows(verdict: pd.DataFrame) -> pd.DataFrame:
    """verdict.csv's timing-test rows of the RankMe variants (single-task protocol), the
    primary row (family '... (primary)') first, then by variant and event kind."""
    v = verdict[(verdict["claim"] == CLAIM) & verdict["measure"].astype(str).str.startswith("rankme")]
    if "protocol" in v:
        v = v[v["protocol"].fillna("single-task").astype(str) == "single-task"]
    primary = v["family"].astype(str).str.endswith("(primary)")
    rest = v[~primary]
    head = rest["headline"].astype(str).str.lower().isin(("true", "1", "1.0")) if "headline" in rest else False
    rest = rest.assign(_h=~pd.Series(head, index=rest.index), _e=(rest["event"].astype(str) != PRIMARY_EVENT))
    rest = rest.sort_values(["_h", "_e"], kind="stable").drop(columns=["_h", "_e"])
    return pd.concat([v[primary], rest]).reset_index(drop=True)


def headline_table(pres: list[dict], st: dict) -> pd.DataFrame:
    """One row per study cell (control ""): the cell as the timing claims read it
    (``units.unit_events`` of the headline measure: t_floor = its extreme, the median over the
    acquired seeds whose RankMe collapsed; t_acq = the median acquisition step, +inf when most
    seeds never acquired); then one row per shuffled-label control run (its own acquisition
    step, NaN when it never acquired, and floor step when its RankMe collapsed)."""
    m = headline_measure(st)
    rows = rates.measure_rows(pres, st["coincide_log10_tol"])
    rows = rows[rows["measure"] == m]
    u = unit_events(rows)
    cells = pd.DataFrame(columns=COLUMNS)
    if len(u):
        cells = pd.DataFrame({"task": u["task"], "level": u["level"], "size": u["size"], "control": "",
                              "difficulty": u["difficulty"], "runs": u["runs"], "acquired_runs": u["acquired_runs"],
                              "acquired": u["acquired"], "t_acq": u["t_acq"], "t_floor": u["t_extreme"],
                              "t_loss_onset": u["t_loss_onset"], "t_loss_extreme": u["t_loss_extreme"]})
    c = rows[(rows["control"] != "") & ~rows["diverged"].astype(bool)]
    ctrl = pd.DataFrame({"task": c["task"], "level": c["level"], "size": c["size"], "control": c["control"],
                         "difficulty": np.where(c["acquired"].astype(bool), "acquired", "unlearned"),
                         "runs": 1, "acquired_runs": c["acquired"].astype(bool).astype(int),
                         "acquired": c["acquired"].astype(bool),
                         "t_acq": pd.to_numeric(c["acquisition_step"], errors="coerce"),
                         "t_floor": np.where(c["transitioned"].fillna(False).astype(bool),
                                             pd.to_numeric(c["extreme_step"], errors="coerce"), np.nan),
                         "t_loss_onset": pd.to_numeric(c["loss_onset_step"], errors="coerce"),
                         "t_loss_extreme": pd.to_numeric(c["loss_extreme_step"], errors="coerce")})
    out = pd.concat([cells, ctrl], ignore_index=True) if len(ctrl) else cells
    for col in ("t_acq", "t_floor", "t_loss_onset", "t_loss_extreme"):
        out[col] = pd.to_numeric(out[col], errors="coerce").astype(float)
    return out[COLUMNS].reset_index(drop=True)


def _acquired_cells(t: pd.DataFrame) -> pd.DataFrame:
    return t[(t["control"] == "") & np.isfinite(t["t_acq"].to_numpy(float))]


def event_rho(t: pd.DataFrame, col: str) -> tuple[float, int]:
    """Spearman rho of ``col`` with t_acq over the acquired cells that have it, and their n."""
    a = _acquired_cells(t)
    a = a[np.isfinite(a[col].to_numpy(float))]
    if len(a) < 3 or a[col].nunique() < 2 or a["t_acq"].nunique() < 2:
        return float("nan"), len(a)
    return float(stats.spearmanr(a["t_acq"], a[col])[0]), len(a)


def _f(x, digits=2) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def answer(primary: dict | None, variant: str) -> tuple[str, str]:
    """(question and short answer, the evidence in one line) from the primary row."""
    q = f"Does RankMe's collapse ({variant} floor) time acquisition beyond the loss curve?"
    if primary is None:
        return q + " No primary row in verdict.csv", "the timing test needs acquired cells with a RankMe floor"
    w = str(primary.get("verdict"))
    est, lo, hi, eoi = (_num(primary.get(k)) for k in ("value", "ci_lo", "ci_hi", "effect_of_interest"))
    bound = _num(primary.get("bound"))
    lvl = _num(primary.get("ci_level")) or 0.9
    short = {"reproduced": "Yes", "not reproduced": "No", "inconclusive": "Not decided"}.get(w, w)
    n = f"{int(primary['n_units'])} cells ({int(primary['n_runs'])} runs)" if _num(primary.get("n_units")) else "-"
    ev = (f"primary row: partial r {_f(est)} [{lvl:.0%} interval {_f(lo)}, {_f(hi)}] over {n}, "
          f"given the loss curve's events before acquisition and the design: {w}")
    if w == "not reproduced" and bound is not None and eoi is not None:
        ev += f" (its one-sided bound {_f(bound)} excludes r >= {eoi:g}; a weaker effect is not excluded)"
    elif w == "inconclusive" and eoi is not None:
        ev += f" (neither a precursor nor r < {eoi:g} shown)"
    return f"{q}  {short}.", ev


def draw_headline(table: pd.DataFrame, verdict: pd.DataFrame, st: dict, counts: str = ""):
    """The figure (module doc). Artists carry gids a test reads back: "cells:<column>" (the
    acquired cells' points), "never:cells" / "never:controls" (the strip), "row:<i>" and
    "ci:<i>" (timing_rows' row i), "effect", "null"."""
    p = figstyle.plt()
    variant = str(st["headline_variant"])
    rows = timing_rows(verdict)
    primary = rows.iloc[0].to_dict() if len(rows) and str(rows.iloc[0]["family"]).endswith("(primary)") else None
    q, ev = answer(primary, variant)
    fig = p.figure(figsize=(12.0, 5.2))
    fig.text(0.5, 0.975, q, ha="center", va="top", fontsize=11.5, weight="bold")
    fig.text(0.5, 0.925, ev, ha="center", va="top", fontsize=8.2, color="0.2", wrap=True)
    ax = fig.add_axes([0.065, 0.13, 0.33, 0.66])
    strip = fig.add_axes([0.405, 0.13, 0.075, 0.66], sharey=ax)
    forest = fig.add_axes([0.615, 0.13, 0.23, 0.66])
    a = _acquired_cells(table)
    for col, (lab, colour, marker) in EVENTS.items():
        d = a[np.isfinite(a[col].to_numpy(float))]
        rho, n = event_rho(table, col)
        lab = f"{lab if col != 't_floor' else f'RankMe ({variant}) floor'}: rho {_f(rho)} with t_acq, n {n}"
        filled = col == "t_floor"
        ax.scatter(figstyle.xstep(d["t_acq"]), figstyle.xstep(d[col]), s=26 if filled else 18, marker=marker,
                   facecolors=colour if filled else "none", edgecolors=colour, linewidths=0.9, label=lab,
                   zorder=3 if filled else 2, gid=f"cells:{col}")
    finite = np.concatenate([a[c].to_numpy(float) for c in ["t_acq", *EVENTS]] +
                            [table[c].to_numpy(float) for c in EVENTS])
    finite = finite[np.isfinite(finite)]
    hi = float(finite.max()) + 1 if len(finite) else 1000.0
    lo = max(0.8, (float(finite.min()) + 1) / 1.8) if len(finite) else 0.8
    lim = (lo, hi * 1.6)
    ax.plot(lim, lim, color="0.5", lw=0.8, ls="-", zorder=1)
    ax.text(lim[1] / 1.15, lim[1] / 1.6, "same step", rotation=45, fontsize=6.5, color="0.4", ha="right",
            va="top", rotation_mode="anchor")
    ax.text(0.97, 0.04, "below the diagonal:\nbefore acquisition", transform=ax.transAxes, ha="right",
            va="bottom", fontsize=6.5, color="0.4")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*lim)
    ax.set_ylim(*lim)
    figstyle.lean_log_x(ax)
    from ..plots import plain_log
    plain_log(ax, "y")
    ax.set_xlabel("acquisition step of the cell + 1 (median over its seeds)")
    ax.set_ylabel("event step + 1")
    ax.set_title(f"{len(a)} acquired cells, one point each", fontsize=8, loc="left")
    ax.legend(loc="upper left", fontsize=6.5, frameon=True, framealpha=0.85)
    ax.grid(alpha=0.25, lw=0.5)
    never = table[(table["control"] == "") & ~np.isfinite(table["t_acq"].to_numpy(float))]
    ctrl = table[table["control"] != ""]
    for x, d, colour, gid in ((0, never, "0.45", "never:cells"), (1, ctrl, figstyle.CONTROL_COLOUR,
                                                                   "never:controls")):
        d = d[np.isfinite(d["t_floor"].to_numpy(float))]
        jitter = np.linspace(-0.18, 0.18, len(d)) if len(d) > 1 else np.zeros(len(d))
        strip.scatter(x + jitter, figstyle.xstep(d["t_floor"]), s=22, color=colour, marker="o", gid=gid, zorder=3)
    strip.set_xlim(-0.6, 1.6)
    strip.set_xticks([0, 1])
    strip.set_xticklabels([f"unlearned\n{len(never)} cells", f"controls\n{len(ctrl)} runs"],
                          fontsize=6.2)
    strip.tick_params(axis="y", labelleft=False)
    strip.set_title("RankMe floor,\nnothing learned", fontsize=6.8, loc="left")
    strip.grid(axis="y", alpha=0.25, lw=0.5)
    _forest(forest, rows)
    if counts:
        fig.text(0.5, 0.015, counts, ha="center", va="bottom", fontsize=7, color="0.3")
    return fig


def _forest(ax, rows: pd.DataFrame) -> None:
    labels = []
    n = len(rows)
    for i, r in enumerate(rows.to_dict("records")):
        y = n - 1 - i
        x, lo, hi = (_num(r.get(k)) for k in ("value", "ci_lo", "ci_hi"))
        c = WORD_COLOUR.get(str(r.get("verdict")), "k")
        if lo is not None and hi is not None:
            ax.plot([lo, hi], [y, y], color=c, lw=2.4, alpha=0.55, solid_capstyle="butt", gid=f"ci:{i}")
        if x is not None:
            ax.plot([x], [y], "o", color=c, ms=6 if i == 0 else 5, gid=f"row:{i}")
        nu = f"n {int(r['n_units'])} ({int(r['n_runs'])})" if _num(r.get("n_units")) is not None else "n -"
        ax.text(1.03, y, f"{r.get('verdict')}  {nu}", transform=ax.get_yaxis_transform(), va="center", fontsize=7,
                color=c, weight="bold" if i == 0 else "normal")
        variant = str(r.get("variant") or "uncentred")
        primary = str(r.get("family", "")).endswith("(primary)")
        labels.append(f"RankMe ({variant}) {EVENT_WORDS.get(str(r.get('event')), r.get('event'))}"
                      + ("\n(primary row)" if primary else ""))
    ax.axvline(0.0, color="0.3", ls="--", lw=0.8, gid="null")
    effects = {_num(r) for r in rows["effect_of_interest"]} - {None} if len(rows) else set()
    for f in effects:
        ax.axvline(f, color="0.3", ls=":", lw=1.0, gid="effect")
        ax.text(f, 1.0, f" smallest effect\n of interest r = {f:g}", transform=ax.get_xaxis_transform(),
                fontsize=6.2, color="0.3", va="bottom", ha="left")
    ax.set_yticks(range(n)[::-1])
    ax.set_yticklabels(labels, fontsize=7)
    for t, r in zip(ax.get_yticklabels(), rows.to_dict("records")):
        if str(r.get("family", "")).endswith("(primary)"):
            t.set_weight("bold")
    ax.set_ylim(-0.7, max(n, 1) - 0.3)
    lvl = _num(rows["ci_level"].iloc[0]) if len(rows) else None
    ax.set_xlabel("partial Spearman r of log t_acq with the event,\ngiven the loss events before acquisition"
                  " and the design"
                  + (f" ({lvl:.0%} interval)" if lvl else ""), fontsize=7)
    ax.set_xlim(-1.0, 1.0)
    ax.grid(axis="x", alpha=0.25, lw=0.5)
    if not n:
        ax.text(0.5, 0.5, "no timing row in verdict.csv", transform=ax.transAxes, ha="center", fontsize=8)


def verdict_counts(verdict: pd.DataFrame) -> str:
    """'verdict.csv: N rows; a reproduced, b not reproduced, c inconclusive, d descriptive'."""
    c = verdict["verdict"].astype(str).value_counts()
    words = ("reproduced", "not reproduced", "inconclusive", "descriptive")
    return (f"all of verdict.csv: {len(verdict)} rows; " + ", ".join(f"{int(c.get(w, 0))} {w}" for w in words)
            + " (docs/analysis.md: how each word is decided)")
