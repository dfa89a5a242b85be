"""Summary figures from the tables: floors by task across sizes, lead/lag, rho matrices."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .figstyle import DIFF_COLOUR, placeholder, plt, save
from .load import level_order, size_order, task_order
from .rates import ordered_measures


def floors_by_task(floors: pd.DataFrame, out_png, measure: str = "rankme") -> list[str]:
    """Headline floor vs parameter count, one line per task, one panel per level."""
    f = floors[(floors["measure"] == measure) & floors["floor"].notna()]
    if f.empty:
        return placeholder(out_png, "Collapse floors", f"no {measure} floors in these runs")
    p = plt()
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter
    lvls = level_order(f["level"])
    fig, axes = p.subplots(1, len(lvls), figsize=(max(5.5, 4.2 * len(lvls)), 4.0), squeeze=False, sharey=True,
                           constrained_layout=True)
    tasks = task_order(f["task"])
    cmap = p.get_cmap("tab10")
    for k, lv in enumerate(lvls):
        ax = axes[0][k]
        g = f[f["level"] == lv]
        for ti, t in enumerate(tasks):
            gt = g[(g["task"] == t) & ~g["diverged"].astype(bool)]
            if gt.empty:
                continue
            order = size_order(gt["size"], dict(zip(gt["size"], gt["n_params"])))
            gt = gt.set_index("size").loc[order]
            x = gt["n_params"].astype(float)
            ax.plot(x, gt["floor"], color=cmap(ti % 10), lw=1.2, label=t)
            filled = gt["acquired"].astype(bool)
            ax.scatter(x[filled], gt["floor"][filled], color=cmap(ti % 10), s=18, zorder=3)
            ax.scatter(x[~filled], gt["floor"][~filled], facecolor="white", edgecolor=cmap(ti % 10), s=18, zorder=3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("parameters (log scale)")
        n_div = int(g["diverged"].astype(bool).sum())
        ax.set_title(f"level {lv}: {len(g) - n_div} runs" + (f" ({n_div} diverged, left out)" if n_div else ""))
        if k == 0:
            ax.set_ylabel(f"{measure} floor (minimum over checkpoints)")
    axes[0][-1].legend(title="task\n(hollow marker:\nnever acquired)", fontsize=6, title_fontsize=6,
                       loc="upper left", bbox_to_anchor=(1.02, 1.0))
    r0 = f.iloc[0]
    fig.suptitle(f"Collapse floors by task across sizes\n{measure} at {r0['layer']}, position {r0['position']}, "
                 f"{r0['variant']}, N={r0['n_samples']} evaluation examples", fontsize=9)
    return save(fig, out_png, svg=True)


def lead_lag(rows: pd.DataFrame, out_png) -> list[str]:
    """Gap = t_acq - t_transition per measure (references included), acquired runs."""
    r = rows[rows["acquired"] & rows["gap_steps"].notna()]
    measures = ordered_measures(rows)
    if r.empty:
        return placeholder(out_png, "Lead/lag relative to acquisition",
                           f"no run acquired with a transition step ({rows['run'].nunique()} runs)")
    p = plt()
    fig, axes = p.subplots(2, 1, figsize=(max(6.5, 1.25 * len(measures) + 2.5), 8.5), constrained_layout=True)
    rng = np.random.default_rng(0)
    for ax, kind in zip(axes, ["steps", "decades"]):
        for k, m in enumerate(measures):
            g = r[r["measure"] == m]
            if kind == "steps":
                y = g["gap_steps"].astype(float).to_numpy()
            else:
                y = np.log10((g["acquisition_step"].astype(float) + 1) / (g["transition_step"].astype(float) + 1)).to_numpy()
            x = k + rng.uniform(-0.18, 0.18, len(y))
            ax.scatter(x, y, s=10, c=[DIFF_COLOUR.get(d, "k") for d in g["difficulty"]], alpha=0.8, zorder=3)
            if len(y):
                q25, med, q75 = np.percentile(y, [25, 50, 75])
                ax.plot([k - 0.3, k + 0.3], [med, med], color="k", lw=2)
                ax.fill_between([k - 0.3, k + 0.3], q25, q75, color="0.8", zorder=1)
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_xticks(range(len(measures)))
        labels = []
        for m in measures:
            allm = rows[rows["measure"] == m]
            ref = " (ref.)" if m in ("loss_plateau_exit", "logprob_emergence") else ""
            labels.append(f"{m}{ref}\nn={int((r['measure'] == m).sum())}, pre {int(allm['precursor'].sum())}/{len(allm)}")
        ax.set_xticklabels(labels, rotation=30, ha="right")
        if kind == "steps":
            ax.set_yscale("symlog", linthresh=10)
            ax.set_ylabel("lead = acquisition step - transition step (steps, symlog)")
        else:
            ax.set_ylabel("lead in decades: log10((t_acq + 1) / (t_tr + 1))")
        ax.set_title("above 0: the event precedes acquisition; bar = median, grey = IQR", fontsize=7)
    from matplotlib.lines import Line2D
    axes[0].legend(handles=[Line2D([], [], marker="o", ls="", color=c, label=f"{d} run") for d, c in DIFF_COLOUR.items()
                            if d in ("easy", "hard")], loc="lower left", fontsize=7)
    geo = rows[rows["kind"] == "geometric"].drop_duplicates("measure")
    items = [f"{g.measure}: {g.layer}/{g.position}/{g.variant}, {g.transition}" for g in geo.itertuples()]
    desc = "\n".join("; ".join(items[i:i + 2]) for i in range(0, len(items), 2))
    fig.suptitle(f"Lead/lag of each measure relative to behavioural acquisition\n({r['run'].nunique()} acquired runs; "
                 f"pre = precursors k/n over all {rows['run'].nunique()} runs; measure: layer/position/variant, event)\n{desc}",
                 fontsize=8)
    return save(fig, out_png, svg=True)


def _matrix(ax, entry: dict, title: str):
    m = entry["matrix"]
    sizes = m["sizes"]
    rho = np.array([[np.nan if v is None else v for v in row] for row in m["rho"]], dtype=float)
    np.fill_diagonal(rho, np.nan)
    import matplotlib
    cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad="0.93")
    im = ax.imshow(np.ma.masked_invalid(rho), cmap=cmap, vmin=-1, vmax=1)
    for i in range(len(sizes)):
        for j in range(len(sizes)):
            if i == j:
                ax.text(j, i, f"n={m['n'][i][j]}\n(units)", ha="center", va="center", fontsize=5.5, color="0.3")
            elif np.isfinite(rho[i, j]):
                ax.text(j, i, f"{rho[i, j]:.2f}\np={m['p'][i][j]:.2g}\nn={m['n'][i][j]}", ha="center", va="center",
                        fontsize=5.5, color="white" if abs(rho[i, j]) > 0.6 else "black")
            else:
                ax.text(j, i, f"n={m['n'][i][j]}", ha="center", va="center", fontsize=5.5, color="0.5")
    ax.set_xticks(range(len(sizes)))
    ax.set_yticks(range(len(sizes)))
    ax.set_xticklabels(sizes, rotation=45, ha="right")
    ax.set_yticklabels(sizes)
    ax.set_title(title, fontsize=7.5)
    return im


def rho_matrix(scale: dict, out_png, measure: str = "rankme") -> list[str]:
    panels = []
    for fam, res in scale.get("families", {}).items():
        if len(res.get("sizes", [])) < 2:
            continue
        if measure in res["floors"]:
            panels.append((res["floors"][measure], f"{fam}: {measure} floors\nunits = {res['floors'][measure]['units']}"))
        if measure in res.get("floors_by_task", {}):
            panels.append((res["floors_by_task"][measure], f"{fam}: {measure} floors\nunits = task (median over levels)"))
        panels.append((res["acquisition_order"], f"{fam}: acquisition order\nunits acquired at both sizes"))
    if not panels:
        return placeholder(out_png, "Scale invariance", "fewer than two sizes: no size pairs to correlate")
    p = plt()
    fig, axes = p.subplots(1, len(panels), figsize=(3.3 * len(panels) + 0.8, 3.6), squeeze=False, constrained_layout=True)
    im = None
    for ax, (entry, title) in zip(axes[0], panels):
        im = _matrix(ax, entry, title)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="Spearman rho")
    fig.suptitle("Spearman rho between sizes with exact permutation p (two-sided; n = units in both; "
                 f"exact for n <= {scale['settings']['exact_max_n']})", fontsize=8)
    return save(fig, out_png, svg=True)

