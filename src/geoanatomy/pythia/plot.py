"""Trajectory figure of one Pythia run (model x benchmark): a sibling of ``plots.plot_run``
with multiple-choice labels, a chance line and the excluded duplicate revisions marked."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..plots import EVENT_STYLE, _x


def plot_pythia_run(df, pre: dict, out_png: str | Path, duplicate_steps: list[int] = ()) -> None:
    """Top: accuracy (both scorings) + headline RankMe with events; bottom: RankMe per layer."""
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..runtime import atomic_write_bytes

    rm = pre["measures"]["rankme"]
    pos, var, layer = rm["position"], rm["variant"], rm["layer"]

    def curve(measure, **kw):
        m = df["measure"] == measure
        for k, v in kw.items():
            m &= df[k] == v
        sub = df[m].sort_values("step")
        return sub["step"].to_numpy(), sub["value"].to_numpy(float)

    fig, (ax1, ax3) = plt.subplots(2, 1, figsize=(8, 7.5), sharex=True, constrained_layout=True)
    other = "mean" if pre["scoring"] == "sum" else "sum"
    s, acc = curve("accuracy")
    ax1.plot(_x(s), acc, color="tab:green", lw=2, label=f"accuracy ({pre['scoring']} of option log-probs)")
    s, acc2 = curve(f"accuracy_{other}")
    ax1.plot(_x(s), acc2, color="tab:green", lw=1, alpha=0.5, label=f"accuracy ({other} scoring)")
    ax1.axhline(pre["chance_accuracy"], color="0.6", lw=1, ls=":", label=f"chance {pre['chance_accuracy']:.2f}")
    ax1.set_ylabel(f"multiple-choice accuracy (N={rm['n_samples']} items)")
    ax1.set_ylim(-0.03, 1.03)
    ax2 = ax1.twinx()
    s, r = curve("rankme", layer=layer, position=pos, variant=var)
    ax2.plot(_x(s), r, color="tab:blue", lw=2, label=f"RankMe {layer}, {pos}, {var}")
    ax2.set_ylabel(f"RankMe ({layer}, {pos}, {var}, N={rm['n_samples']})", color="tab:blue")
    events = {"acquisition_step": pre.get("acquisition_step"),
              "logprob_emergence_step": pre.get("logprob_emergence_step"),
              **{k: rm.get(k) for k in ("collapse_step", "floor_step", "recovery_step")}}
    for key, step in events.items():
        if step is None:
            continue
        lab, col, ls = EVENT_STYLE[key]
        ax1.axvline(step + 1, color=col, ls=ls, lw=1.3, label=f"{lab} @ {step}")
    if len(duplicate_steps):
        ax1.plot(_x(duplicate_steps), np.full(len(duplicate_steps), -0.02), "|", color="0.4", ms=8,
                 label=f"duplicate revisions, excluded ({len(duplicate_steps)})")
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax1.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper left", framealpha=0.85)
    verdict = "precursor" if rm.get("precursor") else "no precursor"
    gap = rm.get("gap_steps")
    ax1.set_title(f"{pre['run']}  ({pre['n_params']:,} params, {pre['difficulty']}, {verdict}"
                  + (f", gap {gap} steps" if gap is not None else "") + ")", fontsize=10)

    layers = list(rm["per_layer"].keys())
    cmap = plt.get_cmap("viridis")
    for i, name in enumerate(layers):
        s, r = curve("rankme", layer=name, position=pos, variant=var)
        const = rm["per_layer"][name].get("constant_by_construction")
        ax3.plot(_x(s), r, color=cmap(i / max(1, len(layers) - 1)), lw=1.5, ls=":" if const else "-",
                 label=name + (" (constant by construction)" if const else ""))
    if pre.get("acquisition_step") is not None:
        ax3.axvline(pre["acquisition_step"] + 1, color="tab:green", lw=1.3)
    ax3.set_yscale("log")
    ax3.set_ylabel(f"RankMe per layer ({pos}, {var}; max {rm['per_layer'][layer].get('max_rank')})")
    ax3.set_xscale("log")
    ax3.set_xlabel("training step + 1 (log scale)")
    ax3.legend(fontsize=6, ncol=3 if len(layers) > 12 else 2)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(out_png, buf.getvalue())
