"""Per-run small multiples from ``metrics.csv``: trajectories, layer x step heatmaps, probes.

Grids have one row per task and one column per size, one figure per level.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .figstyle import DIFF_COLOUR, EVENT_LINES, grid, lean_log_x, params_label, placeholder, plt, save, xstep
from .behaviour import probes_entry
from ..table import TableError, curve, read_table
from .load import SummaryInputError, level_order, size_order, task_order

def read_metrics(path) -> pd.DataFrame:
    """A run's per-run table (``geoanatomy.table``); errors name the file."""
    try:
        return read_table(path)
    except TableError as e:
        raise SummaryInputError(str(e)) from e


def _grid(pres):
    sizes = size_order([p["size"] for p in pres], {p["size"]: p.get("n_params") for p in pres})
    tasks = task_order([p["task"] for p in pres])
    return sizes, tasks


def _panel_title(pre):
    return f"{pre['task']} {pre['level']} {pre['size']} ({params_label(pre.get('n_params'))}): {pre['difficulty']}"


def trajectories(pres: list[dict], metrics: dict, level: str, out_png) -> list[str]:
    """Accuracy and headline RankMe against step for every run of one level; events marked."""
    p = plt()
    runs = [r for r in pres if r["level"] == level]
    sizes, tasks = _grid(runs)
    fig, axes = grid(p, len(tasks), len(sizes), 2.7, 1.9, top_in=0.9, bottom_in=1.2 if len(sizes) < 3 else 0.9)
    by = {(r["task"], r["size"]): r for r in runs}
    heads = set()
    for i, t in enumerate(tasks):
        for j, s in enumerate(sizes):
            ax = axes[i][j]
            pre = by.get((t, s))
            if pre is None:
                ax.axis("off")
                ax.text(0.5, 0.5, f"{t} {level} {s}: no result", ha="center", va="center", transform=ax.transAxes)
                continue
            df = metrics[pre["run"]]
            rm = pre["measures"].get("rankme", {})
            heads.add((rm.get("layer"), rm.get("position"), rm.get("variant"), rm.get("n_samples")))
            st, acc = curve(df, "accuracy")
            ax.plot(xstep(st), acc, color="tab:green", lw=1.4)
            ax.set_ylim(-0.03, 1.03)
            lean_log_x(ax)
            ax2 = ax.twinx()
            st, r = curve(df, "rankme", layer=rm.get("layer"), position=rm.get("position"), variant=rm.get("variant"))
            ax2.plot(xstep(st), r, color="tab:blue", lw=1.2)
            ax2.tick_params(axis="y", colors="tab:blue", labelsize=6)
            ev = {"acquisition_step": pre.get("acquisition_step"), "floor_step": rm.get("floor_step"),
                  "loss_plateau_exit_step": pre.get("loss_plateau_exit_step"),
                  "logprob_emergence_step": pre.get("logprob_emergence_step")}
            for k, step in ev.items():
                if step is not None:
                    lab, col, ls = EVENT_LINES[k]
                    ax.axvline(step + 1, color=col, ls=ls, lw=1.0)
            ax.set_title(_panel_title(pre), fontsize=7, color=DIFF_COLOUR.get(pre["difficulty"], "k"))
            if j == 0:
                ax.set_ylabel("exact-match accuracy", color="tab:green")
            if j == len(sizes) - 1:
                ax2.set_ylabel("RankMe", color="tab:blue")
            if i == len(tasks) - 1 or (tasks[i + 1], s) not in by:
                ax.set_xlabel("training step + 1 (log)")
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color="tab:green", lw=1.4, label="accuracy (held-out, exact match)"),
               Line2D([], [], color="tab:blue", lw=1.2, label="RankMe (headline layer)")]
    handles += [Line2D([], [], color=c, ls=ls, label=lab) for lab, c, ls in EVENT_LINES.values()]
    head = "; ".join(f"RankMe at {l}, position {po}, {v}, N={n}" for l, po, v, n in sorted(heads, key=str))
    fig.suptitle(f"Training trajectories, level {level} ({len(runs)} runs; rows: task, columns: size)\n{head}",
                 fontsize=9)
    fig.legend(handles=handles, loc="lower center", ncol=min(6, max(2, 2 * len(sizes) - 1)), frameon=False)
    return save(fig, out_png, dpi=110)


def heatmaps(pres: list[dict], metrics: dict, level: str, out_png) -> list[str]:
    """log2(RankMe / RankMe at the first checkpoint) per layer (rows) x step (columns), per run."""
    p = plt()
    from matplotlib.colors import TwoSlopeNorm
    runs = [r for r in pres if r["level"] == level]
    sizes, tasks = _grid(runs)
    fig, axes = grid(p, len(tasks), len(sizes), 2.6, 1.7, top_in=1.0, left_in=0.9, right_in=1.2)
    by = {(r["task"], r["size"]): r for r in runs}
    mesh, heads, vmax = None, set(), 0.0
    data = {}
    for key, pre in by.items():
        rm = pre["measures"].get("rankme", {})
        df = metrics[pre["run"]]
        sub = df[(df["measure"] == "rankme") & (df["position"] == rm.get("position")) & (df["variant"] == rm.get("variant"))]
        wide = sub.pivot_table(index="layer_index", columns="step", values="value", aggfunc="first").sort_index()
        names = sub.drop_duplicates("layer_index").set_index("layer_index")["layer"].reindex(wide.index).tolist()
        z = np.log2(wide.to_numpy(float) / wide.to_numpy(float)[:, :1])                # (layers, checkpoints)
        const = [n for n, ev in (rm.get("per_layer") or {}).items() if ev.get("constant_by_construction")]
        for li, n in enumerate(names):
            if n in const:
                z[li, :] = np.nan
        data[key] = (wide.columns.to_numpy(float), names, z, const)
        heads.add((rm.get("position"), rm.get("variant"), rm.get("n_samples")))
        if np.isfinite(z).any():
            vmax = max(vmax, float(np.nanmax(np.abs(z))))
    norm = TwoSlopeNorm(vcenter=0.0, vmin=-max(vmax, 1e-3), vmax=max(vmax, 1e-3))
    for i, t in enumerate(tasks):
        for j, s in enumerate(sizes):
            ax = axes[i][j]
            if (t, s) not in data:
                ax.axis("off")
                continue
            pre = by[(t, s)]
            steps, names, z, const = data[(t, s)]
            x = xstep(steps)
            lx = np.log10(x)
            edges = np.concatenate([[lx[0] - (lx[1] - lx[0]) / 2 if len(lx) > 1 else lx[0] - 0.5],
                                    (lx[1:] + lx[:-1]) / 2, [lx[-1] + (lx[-1] - lx[-2]) / 2 if len(lx) > 1 else lx[0] + 0.5]])
            mesh = ax.pcolormesh(10 ** edges, np.arange(len(names) + 1), np.ma.masked_invalid(z),
                                 cmap="RdBu_r", norm=norm, shading="flat")
            lean_log_x(ax)
            show = list(range(len(names)))
            if len(names) > 8:                                          # deep models: thin the labels
                show = sorted(set(range(0, len(names), 3)) | {len(names) - 1})
            ax.set_yticks(np.array(show) + 0.5)
            ax.set_yticklabels([names[k] + (" (const.)" if names[k] in const else "") for k in show], fontsize=5.5)
            ax.set_facecolor("0.85")
            if pre.get("acquisition_step") is not None:
                ax.axvline(pre["acquisition_step"] + 1, color="tab:green", lw=1.2)
            ax.set_title(_panel_title(pre), fontsize=7, color=DIFF_COLOUR.get(pre["difficulty"], "k"))
            if i == len(tasks) - 1:
                ax.set_xlabel("training step + 1 (log)")
    if mesh is not None:
        cax = fig.add_axes([1 - 0.9 / fig.get_figwidth(), 0.3, 0.15 / fig.get_figwidth(), 0.4])
        fig.colorbar(mesh, cax=cax, label="log2(RankMe / RankMe at step 0), per layer")
    head = "; ".join(f"position {po}, {v}, N={n}" for po, v, n in sorted(heads, key=str))
    fig.suptitle(f"RankMe per layer against step, level {level}, {len(runs)} runs; {head}\n"
                 "rows: embed at the bottom, ln_final on top; blue = below its step-0 value (collapse),\n"
                 "green line = acquisition, grey = excluded (constant by construction)", fontsize=8.5)
    return save(fig, out_png, dpi=110)


def probe_curves(pres: list[dict], metrics: dict, out_png, probe_table: pd.DataFrame) -> list[str]:
    """Probe accuracy per layer vs behavioural accuracy (metrics rows named probe*), else
    a scatter of probe acquisition step vs behavioural acquisition step, else a note."""
    p = plt()
    with_curves = []
    for pre in pres:
        df = metrics.get(pre["run"])
        if df is None:
            continue
        names = [m for m in dict.fromkeys(df["measure"]) if str(m).startswith("probe")]
        if names:
            with_curves.append((pre, df, "probe_accuracy" if "probe_accuracy" in names else names[0]))
    if with_curves:
        n = len(with_curves)
        cols = min(6, n)
        rows = int(np.ceil(n / cols))
        fig, axes = grid(p, rows, cols, 2.8, 2.2, top_in=0.8, bottom_in=1.5)
        legend = ([], [])
        cmap = p.get_cmap("viridis")
        for k, (pre, df, meas) in enumerate(with_curves):
            ax = axes[k // cols][k % cols]
            sub = df[df["measure"] == meas]
            pos = (probes_entry(pre) or {}).get("position", sub["position"].iloc[0])
            sub = sub[sub["position"] == pos] if (sub["position"] == pos).any() else sub[sub["position"] == sub["position"].iloc[0]]
            pos = sub["position"].iloc[0]
            layers = sub.drop_duplicates("layer_index").sort_values("layer_index")["layer"].tolist()
            const = {n for n, ev in ((probes_entry(pre) or {}).get("per_layer") or {}).items()
                     if isinstance(ev, dict) and ev.get("constant_by_construction")}
            for li, name in enumerate(layers):
                st, v = curve(sub, meas, layer=name)
                ax.plot(xstep(st), v, color=cmap(li / max(1, len(layers) - 1)), lw=1, ls=":" if name in const else "-",
                        label=f"probe at {name}" + (" (constant by construction)" if name in const else ""))
            st, acc = curve(df, "accuracy")
            ax.plot(xstep(st), acc, color="k", lw=1.8, label="behaviour: exact-match accuracy")
            if pre.get("acquisition_step") is not None:
                ax.axvline(pre["acquisition_step"] + 1, color="tab:green", lw=1)
            lean_log_x(ax)
            ax.set_ylim(-0.03, 1.03)
            ax.set_title(f"{_panel_title(pre)}\nprobe position {pos}, N={int(sub['n_samples'].iloc[0])}", fontsize=7)
            ax.set_xlabel("training step + 1 (log)")
            ax.set_ylabel("accuracy")
            hl = ax.get_legend_handles_labels()
            if len(hl[0]) > len(legend[0]):
                legend = hl
        fig.legend(*legend, loc="lower center", ncol=min(5, len(legend[0])), frameon=False, fontsize=6,
                   title="colour = depth (panel with the most layers shown; shallower models use the same scale)",
                   title_fontsize=6)
        for k in range(n, rows * cols):
            axes[k // cols][k % cols].axis("off")
        fig.suptitle(f"Linear-probe accuracy ({meas}, held-out probe test split) per layer vs the model's exact-match "
                     f"accuracy, {n} run{'s' if n != 1 else ''}\nprobe target: the answer token predicted at the probe "
                     "position; green line: behavioural acquisition", fontsize=8)
        return save(fig, out_png, dpi=120)
    t = probe_table.dropna(subset=["probe_acquisition_step", "acquisition_step"]) if len(probe_table) else probe_table
    if "probe_constant_by_construction" in t.columns:
        t = t[~t["probe_constant_by_construction"].fillna(False).astype(bool)]
    if len(t):
        fig, ax = p.subplots(figsize=(5, 4.5), constrained_layout=True)
        layers = list(dict.fromkeys(t["layer"]))
        cmap = p.get_cmap("viridis")
        for li, name in enumerate(layers):
            g = t[t["layer"] == name]
            ax.scatter(g["acquisition_step"] + 1, g["probe_acquisition_step"] + 1, s=14,
                       color=cmap(li / max(1, len(layers) - 1)), label=f"{name} (n={len(g)})")
        lim = [1, float(max(t["acquisition_step"].max(), t["probe_acquisition_step"].max())) * 1.5 + 1]
        ax.plot(lim, lim, color="0.5", lw=1, ls="--", label="probe = behaviour")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("behavioural acquisition step + 1")
        ax.set_ylabel("probe acquisition step + 1")
        ax.set_title(f"Probe vs behavioural acquisition ({t['run'].nunique()} runs, {len(t)} run x layer points);\n"
                     "below the diagonal: the hidden states held the answer first", fontsize=8)
        ax.legend(fontsize=6)
        return save(fig, out_png, svg=True)
    return placeholder(out_png, "Probe vs behaviour",
                       f"No probe results in these {len(pres)} runs (no 'probes' entry in precursor.json,\n"
                       "no probe* rows in metrics.csv): enable the probes stage to fill this figure.")


def load_metrics(pres: list[dict], paths) -> dict:
    """run name -> metrics DataFrame; the run name is the metrics file's parent folder.

    When a run's precursor.json has a ``probes`` entry, its probes.csv (beside
    metrics.csv; an input of that precursor.json, so it exists and is older) is
    appended: rows probe_accuracy / probe_accuracy_norm / probe_chance per layer."""
    want = {p["run"]: p for p in pres}
    out = {}
    for path in paths:
        run = Path(path).parent.name
        if run in want:
            df = read_metrics(path)
            probes = Path(path).with_name("probes.csv")
            if probes_entry(want[run]) is not None and probes.exists():
                df = pd.concat([df, read_metrics(probes)], ignore_index=True)
            out[run] = df
    missing = sorted(set(want) - set(out))
    if missing:
        raise SummaryInputError(f"no metrics.csv given for runs {missing[:10]}{' ...' if len(missing) > 10 else ''}")
    return out


def levels(pres) -> list[str]:
    return level_order([p["level"] for p in pres])
