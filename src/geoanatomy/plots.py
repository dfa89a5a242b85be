"""Per-run trajectory figure: behaviour and RankMe against training step, events marked."""
from __future__ import annotations

from pathlib import Path

import numpy as np

EVENT_STYLE = {  # event key -> (label, colour, linestyle)
    "logprob_emergence_step": ("log-prob emergence", "0.45", ":"),
    "collapse_step": ("RankMe collapse", "tab:purple", "--"),
    "floor_step": ("RankMe floor", "tab:red", "--"),
    "recovery_step": ("RankMe recovery", "tab:orange", "-."),
    "acquisition_step": ("acquisition", "tab:green", "-"),
}


def _x(steps):
    """Steps shifted by one so step 0 fits on a log axis (x = step + 1)."""
    return np.asarray(steps, dtype=float) + 1.0


def plot_run(df, pre: dict, out_png: str | Path) -> None:
    """Two panels: accuracy + headline RankMe (with events), RankMe of every layer."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .runtime import atomic_write_bytes

    rm = pre["measures"]["rankme"]
    pos, var, layer = rm["position"], rm["variant"], rm["layer"]
    fig, (ax1, ax3) = plt.subplots(2, 1, figsize=(8, 7.5), sharex=True, constrained_layout=True)

    def curve(measure, **kw):
        m = df["measure"] == measure
        for k, v in kw.items():
            m &= df[k] == v
        sub = df[m].sort_values("step")
        return sub["step"].to_numpy(), sub["value"].to_numpy(float)

    s, acc = curve("accuracy")
    ax1.plot(_x(s), acc, color="tab:green", lw=2, label="exact-match accuracy (held-out)")
    s, tacc = curve("token_accuracy")
    ax1.plot(_x(s), tacc, color="tab:green", lw=1, alpha=0.5, label="token accuracy")
    ax1.set_ylabel("accuracy")
    ax1.set_ylim(-0.03, 1.03)
    ax2 = ax1.twinx()
    s, r = curve("rankme", layer=layer, position=pos, variant=var)
    ax2.plot(_x(s), r, color="tab:blue", lw=2, label=f"RankMe {layer}, pos={pos}, {var}")
    ax2.set_ylabel(f"RankMe ({layer}, {pos}, {var}, N={rm['n_samples']})", color="tab:blue")
    events = {"acquisition_step": pre.get("acquisition_step"),
              "logprob_emergence_step": pre.get("logprob_emergence_step"),
              **{k: rm.get(k) for k in ("collapse_step", "floor_step", "recovery_step")}}
    for key, step in events.items():
        if step is None:
            continue
        lab, col, ls = EVENT_STYLE[key]
        ax1.axvline(step + 1, color=col, ls=ls, lw=1.3, label=f"{lab} @ {step}")
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax1.legend(h1 + h2, l1 + l2, fontsize=7, loc="center left", framealpha=0.85)
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
    ax3.set_ylabel(f"RankMe per layer ({pos}, {var})")
    ax3.set_xscale("log")
    ax3.set_xlabel("training step + 1 (log scale)")
    ax3.legend(fontsize=7, ncol=2)
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(out_png, buf.getvalue())
