"""The precursor benchmark drawn from precursor_benchmark.csv alone.

``figures/precursor_benchmark.png``: three panels sharing one row per signal (onset events),
ranked by AUROC (best at the top): the time-matched AUROC with its cell-bootstrap interval
(the clock's 0.5 and the loss curve's AUROC as reference lines), the median lead of the
onset over cells with its interval (the loss curve's lead as a reference line; a lead below
-2, an event more than two acquisition times late, is drawn as "<" at the edge with its value), and the gain
beyond the loss curve (partial r with its one-sided 95% bounds). A filled dot: the gain's
reading is "beyond the loss curve"; a hollow one: not shown; a cross after the name: the
reading changes with the detector (not robust). ``plotted`` returns what each panel draws,
so a test can compare it with the table.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import figstyle

LEAD_FLOOR = -2.0     # the lead panel's left edge: an event more than 2 acquisition times late is drawn there


def plotted(table: pd.DataFrame, event: str = "onset") -> pd.DataFrame:
    """The rows the figure draws, in drawing order (top first), with the drawn columns."""
    t = table[table["event"] == event].copy()
    t = t.sort_values("auroc", ascending=False, na_position="last").reset_index(drop=True)
    return t[["signal", "auroc", "auroc_lo", "auroc_hi", "lead", "lead_lo", "lead_hi", "gain_r", "gain_lo",
              "gain_hi", "reading", "robust", "n_cells", "n_negatives"]]


def draw(table: pd.DataFrame, png, title: str, event: str = "onset") -> list[str]:
    """The figure (module doc), saved; a placeholder when the table is empty."""
    if not len(table) or not (table["event"] == event).any():
        return figstyle.placeholder(png, "precursor benchmark", "no signal curves in this grid's runs "
                                    "(signal_curves.csv: written by the events stage)")
    return figstyle.save(figure(table, title, event), png)


def figure(table: pd.DataFrame, title: str, event: str = "onset"):
    """The matplotlib figure of ``draw`` (not saved)."""
    plt = figstyle.plt()
    t = plotted(table, event)
    n = len(t)
    fig, axes = plt.subplots(1, 3, figsize=(13, 0.38 * n + 1.9), sharey=True)
    y = np.arange(n)[::-1]
    ref = {k: t[t["signal"] == k] for k in ("loss", "clock")}
    panels = (("auroc", "AUROC (alarm before acquisition vs negatives)", 0.5),
              ("lead", "lead of the onset, (t_acq - t) / t_acq", 0.0),
              ("gain_r", "gain beyond the loss curve (partial r)", 0.0))
    for ax, (col, label, null) in zip(axes, panels):
        lo, hi = t[f"{col.split('_')[0]}_lo"], t[f"{col.split('_')[0]}_hi"]
        floor = LEAD_FLOOR if col == "lead" else -np.inf      # leads below it: drawn at its edge, "<"
        for yi, (_, r), a, b in zip(y, t.iterrows(), lo, hi):
            v = r[col]
            if v is None or not np.isfinite(float(v)):
                continue
            colour = "tab:red" if r["signal"] in ("loss", "clock") else "tab:blue"
            if a is not None and b is not None and np.isfinite(float(a)) and np.isfinite(float(b)):
                ax.plot([max(float(a), floor), max(float(b), floor)], [yi, yi], color=colour, lw=1.6)
            filled = r["reading"] == "beyond the loss curve"
            if float(v) < floor:
                ax.plot([floor], [yi], "<", color=colour, ms=7)
                ax.annotate(f"{float(v):.1f}", (floor, yi), xytext=(6, 4), textcoords="offset points", fontsize=6)
                continue
            ax.plot([float(v)], [yi], "o", color=colour, mfc=colour if filled else "white", ms=6)
        if col == "lead":
            ax.set_xlim(LEAD_FLOOR - 0.1, 1.05)
        ax.axvline(null, color="0.4", ls="--", lw=0.9)
        if col == "auroc" and len(ref["loss"]):
            ax.axvline(float(ref["loss"]["auroc"].iloc[0]), color="tab:red", ls=":", lw=1.0, label="loss curve")
            ax.legend(loc="best", fontsize=7, frameon=True, framealpha=0.8)
        if col == "lead" and len(ref["loss"]) and np.isfinite(float(ref["loss"]["lead"].iloc[0])):
            ax.axvline(float(ref["loss"]["lead"].iloc[0]), color="tab:red", ls=":", lw=1.0, label="loss curve")
            ax.legend(loc="best", fontsize=7, frameon=True, framealpha=0.8)
        ax.set_xlabel(label, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y)
    axes[0].set_yticklabels([f"{r['signal']}{'' if r['robust'] else ' (x)'}  [{r['n_cells']}]"
                             for _, r in t.iterrows()], fontsize=7.5)
    axes[0].set_xlim(-0.02, 1.02)
    keys = ([f"filled dot = reads \"beyond the loss curve\" ({int(t['reading'].eq('beyond the loss curve').sum())})"]
            if t["reading"].eq("beyond the loss curve").any() else []) + \
        (["(x) = reading changes with the detector"] if (~t["robust"].astype(bool)).any() else [])
    fig.suptitle("; ".join([title] + keys) + "; [n] = cells", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return fig
