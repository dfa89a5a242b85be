"""Per-run trajectory figure: behaviour and RankMe against training step, events marked."""
from __future__ import annotations

from pathlib import Path

import numpy as np

EVENT_STYLE = {  # event key -> (label, colour, linestyle)
    "logprob_emergence_step": ("log-prob emergence", "0.45", ":"),
    "loss_plateau_exit_step": ("loss-plateau exit", "tab:brown", ":"),
    "collapse_step": ("RankMe collapse", "tab:purple", "--"),
    "floor_step": ("RankMe floor", "tab:red", "--"),
    "recovery_step": ("RankMe recovery", "tab:orange", "-."),
    "acquisition_step": ("acquisition", "tab:green", "-"),
}


def _x(steps):
    """Steps shifted by one so step 0 fits on a log axis (x = step + 1)."""
    return np.asarray(steps, dtype=float) + 1.0


def curve_getter(df):
    """curve(measure, **column=value) -> (steps, values) sorted by step, from a long table."""
    from .table import curve
    return lambda measure, **kw: curve(df, measure, **kw)


def mark_events(ax, pre: dict) -> None:
    """Vertical lines for acquisition, log-prob emergence and the headline RankMe events."""
    rm = pre["measures"]["rankme"]
    events = {"acquisition_step": pre.get("acquisition_step"),
              "logprob_emergence_step": pre.get("logprob_emergence_step"),
              "loss_plateau_exit_step": pre.get("loss_plateau_exit_step"),
              **{k: rm.get(k) for k in ("collapse_step", "floor_step", "recovery_step")}}
    for key, step in events.items():
        if step is None:
            continue
        lab, col, ls = EVENT_STYLE[key]
        ax.axvline(step + 1, color=col, ls=ls, lw=1.3, label=f"{lab} @ {step}")


def title_and_legend(ax1, ax2, pre: dict, loc: str) -> None:
    """Merged legend of both y axes and a title with the run's class and precursor verdict."""
    rm = pre["measures"]["rankme"]
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax1.legend(h1 + h2, l1 + l2, fontsize=7, loc=loc, framealpha=0.85)
    def verdict(m):
        word = "precursor" if m.get("precursor") else "no precursor"
        gap = m.get("gap_steps")
        return word + (f", gap {gap}" if gap is not None else "")
    parts = [f"uncentred: {verdict(rm)}"]
    if "rankme_centred" in pre["measures"]:
        parts.append(f"centred: {verdict(pre['measures']['rankme_centred'])}")
    ax1.set_title(f"{pre['run']}  ({pre['n_params']:,} params, {pre['difficulty']})\nRankMe {rm['layer']} "
                  + "; ".join(parts), fontsize=9)


def plot_layers(ax, curve, pre: dict, ylabel: str, legend_fontsize: int = 7) -> None:
    """RankMe of every layer (log y), constant-by-construction layers dotted, acquisition marked."""
    import matplotlib.pyplot as plt

    rm = pre["measures"]["rankme"]
    layers = list(rm["per_layer"].keys())
    cmap = plt.get_cmap("viridis")
    for i, name in enumerate(layers):
        s, r = curve("rankme", layer=name, position=rm["position"], variant=rm["variant"])
        const = rm["per_layer"][name].get("constant_by_construction")
        ax.plot(_x(s), r, color=cmap(i / max(1, len(layers) - 1)), lw=1.5, ls=":" if const else "-",
                label=name + (" (constant by construction)" if const else ""))
    if pre.get("acquisition_step") is not None:
        ax.axvline(pre["acquisition_step"] + 1, color="tab:green", lw=1.3)
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_xscale("log")
    ax.set_xlabel("training step + 1 (log scale)")
    ax.legend(fontsize=legend_fontsize, ncol=3 if len(layers) > 12 else 2)


def save_png(fig, out_png: str | Path) -> None:
    """Render to PNG in memory and write it atomically."""
    import io

    import matplotlib.pyplot as plt

    from .files import atomic_write_bytes
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(out_png, buf.getvalue())


def plot_variants(ax, curve, pre: dict) -> None:
    """RankMe of the headline layer in both variants, their floors marked, and the mean share
    of the same matrix on a second axis (how much of the uncentred picture is the mean row)."""
    rm = pre["measures"]["rankme"]
    layer, pos = rm["layer"], rm["position"]
    for name, colour in (("rankme", "tab:blue"), ("rankme_centred", "tab:purple")):
        m = pre["measures"].get(name)
        if not m:
            continue
        s, r = curve("rankme", layer=layer, position=pos, variant=m["variant"])
        ax.plot(_x(s), r, color=colour, lw=1.8, label=f"RankMe {m['variant']}")
        if m.get("floor_step") is not None and m.get("collapsed"):
            ax.axvline(m["floor_step"] + 1, color=colour, ls="--", lw=1, label=f"{m['variant']} floor @ {m['floor_step']}")
    ax.set_yscale("log")
    ax.set_ylabel(f"RankMe ({layer}, {pos}, N={rm['n_samples']})")
    ax2 = ax.twinx()
    s, share = curve("mean_share", layer=layer, position=pos)
    if len(s):
        ax2.plot(_x(s), share, color="0.35", lw=1.2, ls=":", label="mean share ||mean||²/mean||z||²")
    ax2.set_ylim(-0.02, 1.02)
    ax2.set_ylabel("mean share", color="0.35")
    if pre.get("acquisition_step") is not None:
        ax.axvline(pre["acquisition_step"] + 1, color="tab:green", lw=1.3)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="lower left", framealpha=0.85)


def plot_run(df, pre: dict, out_png: str | Path) -> None:
    """Three panels: accuracy + headline RankMe (uncentred, events marked); RankMe of the
    headline layer in both variants with the mean share; RankMe of every layer."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rm = pre["measures"]["rankme"]
    pos, var, layer = rm["position"], rm["variant"], rm["layer"]
    fig, (ax1, axv, ax3) = plt.subplots(3, 1, figsize=(8, 10), sharex=True, constrained_layout=True)
    curve = curve_getter(df)

    s, acc = curve("accuracy", position="answer")
    ax1.plot(_x(s), acc, color="tab:green", lw=2, label="exact-match accuracy (held-out)")
    s, acc1 = curve("accuracy", position="first")
    if len(s):
        ax1.plot(_x(s), acc1, color="tab:olive", lw=1, ls="--", label="first-token accuracy")
    s, tacc = curve("token_accuracy")
    ax1.plot(_x(s), tacc, color="tab:green", lw=1, alpha=0.5, label="token accuracy")
    ax1.set_ylabel("accuracy")
    ax1.set_ylim(-0.03, 1.03)
    ax2 = ax1.twinx()
    s, r = curve("rankme", layer=layer, position=pos, variant=var)
    ax2.plot(_x(s), r, color="tab:blue", lw=2, label=f"RankMe {layer}, pos={pos}, {var}")
    ax2.set_ylabel(f"RankMe ({layer}, {pos}, {var}, N={rm['n_samples']})", color="tab:blue")
    mark_events(ax1, pre)
    title_and_legend(ax1, ax2, pre, loc="center left")
    plot_variants(axv, curve, pre)
    plot_layers(ax3, curve, pre, f"RankMe per layer ({pos}, {var})")
    save_png(fig, out_png)
