"""trajectory.png of a monitored run or a scanned checkpoint folder (its precursor.json is
built by ``precursor.record.report_record``, the one home of precursor.json's builders).

The figure: ``plots.plot_run`` when the table has accuracy and token accuracy (the monitor
with labels), ``pythia.plot.plot_pythia_run`` for benchmarks, and a loss panel otherwise.
"""
from __future__ import annotations

from pathlib import Path


def plot_report(df, pre: dict, out_png: str | Path) -> None:
    """trajectory.png of a report (module doc)."""
    from ..plots import plot_run
    measures = set(df["measure"])
    if pre["behaviour"]["kind"] == "accuracy":
        if "token_accuracy" in measures:
            return plot_run(df, pre, out_png)
        from ..pythia.plot import plot_pythia_run
        return plot_pythia_run(df, {**pre, "scoring": pre.get("scoring", "sum")}, out_png)
    return plot_loss_run(df, pre, out_png)


def plot_loss_run(df, pre: dict, out_png: str | Path) -> None:
    """Two panels: probe-set loss + headline RankMe with its events, RankMe of every layer."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..plots import _x, curve_getter, mark_events, plot_layers, save_png, title_and_legend
    rm = pre["measures"]["rankme"]
    pos, var, layer = rm["position"], rm["variant"], rm["layer"]
    get = curve_getter(df)
    fig, (ax1, ax3) = plt.subplots(2, 1, figsize=(8, 7.5), sharex=True, constrained_layout=True)
    s, loss = get("loss")
    ax1.plot(_x(s), loss, color="tab:green", lw=2, label="probe-set loss (mean next-token)")
    ax1.set_ylabel("loss (nats per token)")
    ax2 = ax1.twinx()
    s, r = get("rankme", layer=layer, position=pos, variant=var)
    ax2.plot(_x(s), r, color="tab:blue", lw=2, label=f"RankMe {layer}, pos={pos}, {var}")
    ax2.set_ylabel(f"RankMe ({layer}, {pos}, {var}, N={rm['n_samples']})", color="tab:blue")
    mark_events(ax1, pre)
    title_and_legend(ax1, ax2, {**pre, "n_params": pre.get("n_params") or 0}, loc="upper right")
    plot_layers(ax3, get, pre, f"RankMe per layer ({pos}, {var})")
    save_png(fig, out_png)
