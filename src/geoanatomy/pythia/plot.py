"""Trajectory figure of one Pythia run (model x benchmark): a sibling of ``plots.plot_run``
with multiple-choice labels, a chance line and the excluded duplicate revisions marked."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..plots import _x, curve_getter, mark_events, plot_layers, save_png, title_and_legend


def plot_pythia_run(df, pre: dict, out_png: str | Path, duplicate_steps: list[int] = ()) -> None:
    """Top: accuracy (both scorings) + headline RankMe with events; bottom: RankMe per layer."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rm = pre["measures"]["rankme"]
    pos, var, layer = rm["position"], rm["variant"], rm["layer"]
    curve = curve_getter(df)

    fig, (ax1, ax3) = plt.subplots(2, 1, figsize=(8, 7.5), sharex=True, constrained_layout=True)
    other = "mean" if pre["scoring"] == "sum" else "sum"
    s, acc = curve("accuracy")
    if len(s):            # a curve without rows gets no legend entry (a scan once named one it did not draw)
        ax1.plot(_x(s), acc, color="tab:green", lw=2, label=f"accuracy ({pre['scoring']} of option log-probs)",
                 gid="accuracy")
    s, acc2 = curve(f"accuracy_{other}")
    if len(s):
        ax1.plot(_x(s), acc2, color="tab:green", lw=1, alpha=0.5, label=f"accuracy ({other} scoring)",
                 gid=f"accuracy_{other}")
    ax1.axhline(pre["chance_accuracy"], color="0.6", lw=1, ls=":", label=f"chance {pre['chance_accuracy']:.2f}")
    ax1.set_ylabel(f"multiple-choice accuracy (N={rm['n_samples']} items)")
    ax1.set_ylim(-0.03, 1.03)
    ax2 = ax1.twinx()
    s, r = curve("rankme", layer=layer, position=pos, variant=var)
    ax2.plot(_x(s), r, color="tab:blue", lw=2, label=f"RankMe {layer}, {pos}, {var}")
    ax2.set_ylabel(f"RankMe ({layer}, {pos}, {var}, N={rm['n_samples']})", color="tab:blue")
    mark_events(ax1, pre)
    if len(duplicate_steps):
        ax1.plot(_x(duplicate_steps), np.full(len(duplicate_steps), -0.02), "|", color="0.4", ms=8,
                 label=f"duplicate revisions, excluded ({len(duplicate_steps)})")
    title_and_legend(ax1, ax2, pre, loc="upper left")
    plot_layers(ax3, curve, pre, f"RankMe per layer ({pos}, {var}; max {rm['per_layer'][layer].get('max_rank')})",
                legend_fontsize=6)
    save_png(fig, out_png)
