"""Per-run small multiples from ``metrics.csv``: trajectories, layer x step heatmaps, probes.

One panel per run present (seeds and controls each get their own, named in the title),
runs in ``load.sort_runs`` order (task, size, control, seed), one figure per level. Each
panel draws the table rows the events and summary statistics read: chance-normalised
exact-match accuracy (``accuracy_norm``, position ``answer``: acquisition), RankMe at the
headline layer, position and variant, probe accuracy at the probe entry's position.
``draw_*`` returns the Figure; the wrapper of the same name without ``draw_`` saves it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .figstyle import (EVENT_LINES, draw_event_lines, draw_placeholder, lean_log_x, panel_title, panels, plt, plural,
                       run_labels, save, summary_events, suptitle, title_colour, xstep)
from .behaviour import probes_entry
from ..table import TableError, curve, read_table
from .load import SummaryInputError, is_control, level_order, sort_runs

ACCURACY = ("accuracy_norm", "answer")  # (measure, position) of the behaviour curve acquisition reads


def read_metrics(path) -> pd.DataFrame:
    """A run's per-run table (``geoanatomy.table``); errors name the file."""
    try:
        return read_table(path)
    except TableError as e:
        raise SummaryInputError(str(e)) from e


def level_runs(pres: list[dict], level: str) -> list[dict]:
    """The runs of one level, one panel each, in panel order."""
    return sort_runs([r for r in pres if r["level"] == level])


def _threshold(pre: dict) -> float | None:
    return (pre.get("events_settings") or {}).get("acquisition_threshold")


def _counts(runs: list[dict]) -> str:
    n_ctrl = sum(is_control(r) for r in runs)
    n_seeds = sum(1 for r in runs if not is_control(r))
    cells = len({(r["task"], r["size"]) for r in runs if not is_control(r)})
    return (f"{plural(len(runs), 'run')}, one panel each: {plural(n_seeds, 'study run')} in "
            f"{plural(cells, 'task x size cell')}" + (f", {plural(n_ctrl, 'shuffled-label control')}" if n_ctrl else
                                                      ""))


def _rankme_key(rm: dict) -> str:
    return f"rankme:{rm.get('layer')}:{rm.get('position')}:{rm.get('variant')}"


def draw_trajectories(pres: list[dict], metrics: dict, level: str):
    """Chance-normalised exact-match accuracy and headline RankMe against step, one panel per
    run of ``level``; the events that happened marked, their steps in the panel title."""
    p = plt()
    runs = level_runs(pres, level)
    labels = run_labels(pres)
    fig, axes, cols = panels(p, len(runs), 2.9, 1.9, max_cols=5, top_in=1.0, bottom_in=1.15, hspace=1.0)
    heads = set()
    for k, (ax, pre) in enumerate(zip(axes, runs)):
        df = metrics[pre["run"]]
        rm = pre["measures"].get("rankme") or {}
        heads.add((rm.get("layer"), rm.get("position"), rm.get("variant"), rm.get("n_samples")))
        st, acc = curve(df, ACCURACY[0], position=ACCURACY[1])
        ax.plot(xstep(st), acc, color="tab:green", lw=1.4, label="accuracy_norm (answer)", gid=":".join(ACCURACY))
        thr = _threshold(pre)
        if thr is not None:
            ax.axhline(thr, color="tab:green", lw=0.7, ls=":", gid="acquisition_threshold")
        lo = float(np.nanmin(acc)) if len(acc) and np.isfinite(acc).any() else 0.0
        ax.set_ylim(min(-0.05, lo - 0.05), 1.05)
        lean_log_x(ax)
        ax2 = ax.twinx()
        st, r = curve(df, "rankme", layer=rm.get("layer"), position=rm.get("position"), variant=rm.get("variant"))
        ax2.plot(xstep(st), r, color="tab:blue", lw=1.2, label=f"RankMe {rm.get('layer')}", gid=_rankme_key(rm))
        ax2.tick_params(axis="y", colors="tab:blue", labelsize=6)
        line = draw_event_lines(ax, summary_events(pre))
        ax.set_title(f"{panel_title(pre, labels[pre['run']])}\n{line}", fontsize=6.5, color=title_colour(pre))
        if k % cols == 0:
            ax.set_ylabel("exact-match acc., chance-\nnormalised (answer)", color="tab:green", fontsize=7)
        if k % cols == cols - 1 or k == len(runs) - 1:
            ax2.set_ylabel("RankMe", color="tab:blue")
        if k + cols >= len(runs):
            ax.set_xlabel("training step + 1 (log)")
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color="tab:green", lw=1.4, label="exact-match accuracy, chance-normalised "
                      "(accuracy_norm, position answer; held-out)"),
               Line2D([], [], color="tab:green", lw=0.7, ls=":", label="acquisition threshold"),
               Line2D([], [], color="tab:blue", lw=1.2, label="RankMe (headline layer, position, variant)")]
    handles += [Line2D([], [], color=c, ls=ls, label=lab) for lab, c, ls in EVENT_LINES.values()]
    head = "; ".join(f"RankMe at {l}, position {po}, {v}, N={n}" for l, po, v, n in sorted(heads, key=str))
    suptitle(fig, [f"Training trajectories, level {level} ({_counts(runs)})", head,
                   "event lines only for events that happened, their steps in each title (acq = acquisition, "
                   "floor = RankMe floor, exit = loss-plateau exit, logp = log-prob emergence)"])
    fig.legend(handles=handles, loc="lower center", ncol=min(4, max(2, cols)), frameon=False, fontsize=6.5)
    return fig


def trajectories(pres: list[dict], metrics: dict, level: str, out_png) -> list[str]:
    """``draw_trajectories`` saved as a PNG."""
    return save(draw_trajectories(pres, metrics, level), out_png, dpi=110)


def heatmap_data(df: pd.DataFrame, rm: dict):
    """(steps, layer names, z, constant layers) of one run: z = log2(RankMe / RankMe at the first
    checkpoint) per layer (rows, embed first) x step, at the headline position and variant;
    rows of layers constant by construction are NaN."""
    sub = df[(df["measure"] == "rankme") & (df["position"] == rm.get("position")) & (df["variant"] ==
                                                                                     rm.get("variant"))]
    wide = sub.pivot_table(index="layer_index", columns="step", values="value", aggfunc="first").sort_index()
    names = sub.drop_duplicates("layer_index").set_index("layer_index")["layer"].reindex(wide.index).tolist()
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.log2(wide.to_numpy(float) / wide.to_numpy(float)[:, :1])                # (layers, checkpoints)
    const = [n for n, ev in (rm.get("per_layer") or {}).items() if ev.get("constant_by_construction")]
    for li, n in enumerate(names):
        if n in const:
            z[li, :] = np.nan
    return wide.columns.to_numpy(float), names, z, const


def draw_heatmaps(pres: list[dict], metrics: dict, level: str):
    """log2(RankMe / RankMe at the first checkpoint) per layer (rows) x step (columns), one
    panel per run of ``level``."""
    p = plt()
    from matplotlib.colors import TwoSlopeNorm
    runs = level_runs(pres, level)
    labels = run_labels(pres)
    fig, axes, cols = panels(p, len(runs), 2.7, 1.7, max_cols=5, top_in=1.0, left_in=0.9, right_in=1.2, hspace=0.8)
    heads, vmax, data = set(), 0.0, []
    for pre in runs:
        rm = pre["measures"].get("rankme") or {}
        d = heatmap_data(metrics[pre["run"]], rm)
        data.append(d)
        heads.add((rm.get("position"), rm.get("variant"), rm.get("n_samples")))
        if np.isfinite(d[2]).any():
            vmax = max(vmax, float(np.nanmax(np.abs(d[2][np.isfinite(d[2])]))))
    norm = TwoSlopeNorm(vcenter=0.0, vmin=-max(vmax, 1e-3), vmax=max(vmax, 1e-3))
    mesh = None
    for k, (ax, pre, (steps, names, z, const)) in enumerate(zip(axes, runs, data)):
        x = xstep(steps)
        lx = np.log10(x)
        edges = np.concatenate([[lx[0] - (lx[1] - lx[0]) / 2 if len(lx) > 1 else lx[0] - 0.5],
                                (lx[1:] + lx[:-1]) / 2, [lx[-1] + (lx[-1] - lx[-2]) / 2 if len(lx) > 1 else lx[0] +
                                                         0.5]])
        mesh = ax.pcolormesh(10 ** edges, np.arange(len(names) + 1), np.ma.masked_invalid(z),
                             cmap="RdBu_r", norm=norm, shading="flat")
        mesh.set_gid(f"heatmap:{pre['run']}")
        lean_log_x(ax)
        show = list(range(len(names)))
        if len(names) > 8:                                          # deep models: thin the labels
            show = sorted(set(range(0, len(names), 3)) | {len(names) - 1})
        ax.set_yticks(np.array(show) + 0.5)
        ax.set_yticklabels([names[i] + (" (const.)" if names[i] in const else "") for i in show], fontsize=5.5)
        ax.set_facecolor("0.85")
        t_acq = summary_events(pre).get("acquisition_step")
        if t_acq is not None:
            ax.axvline(t_acq + 1, color="tab:green", lw=1.2, gid="event:acquisition_step")
        ax.set_title(panel_title(pre, labels[pre["run"]]), fontsize=6.5, color=title_colour(pre))
        if k + cols >= len(runs):
            ax.set_xlabel("training step + 1 (log)")
    if mesh is not None:
        cax = fig.add_axes([1 - 0.9 / fig.get_figwidth(), 0.3, 0.15 / fig.get_figwidth(), 0.4])
        fig.colorbar(mesh, cax=cax, label="log2(RankMe / RankMe at step 0), per layer")
    head = "; ".join(f"position {po}, {v}, N={n}" for po, v, n in sorted(heads, key=str))
    suptitle(fig, [f"RankMe per layer against step, level {level} ({_counts(runs)}); {head}",
                   "rows: embed at the bottom, ln_final on top; blue = below its step-0 value (collapse)",
                   "green line = acquisition (acquired runs only), grey = excluded (constant by construction)"])
    return fig


def heatmaps(pres: list[dict], metrics: dict, level: str, out_png) -> list[str]:
    """``draw_heatmaps`` saved as a PNG."""
    return save(draw_heatmaps(pres, metrics, level), out_png, dpi=110)


def probe_view(pre: dict, df: pd.DataFrame):
    """What the probe statistics read for one run, or None without probe rows:
    (measure, position, layers in depth order, behaviour (measure, position), behavioural step
    the probes are compared with). The probe entry's measure and position
    (``probe_accuracy_norm`` at its position; stages.events.probe_entry) and, for position
    ``first``, first-token acquisition (``accuracy_norm`` at ``first``), else whole-answer."""
    e = probes_entry(pre) or {}
    names = [m for m in dict.fromkeys(df["measure"]) if str(m).startswith("probe")]
    if not names:
        return None
    meas = e.get("measure") if e.get("measure") in names else (
        "probe_accuracy_norm" if "probe_accuracy_norm" in names else names[0])
    sub = df[df["measure"] == meas]
    pos = e.get("position") if (sub["position"] == e.get("position")).any() else sub["position"].iloc[0]
    sub = sub[sub["position"] == pos]
    layers = sub.drop_duplicates("layer_index").sort_values("layer_index")["layer"].tolist()
    first = pos == "first"
    behaviour = ("accuracy_norm", "first") if first else ACCURACY
    t_beh = e["behaviour_acquisition_step"] if "behaviour_acquisition_step" in e else (
        pre.get("first_token_acquisition_step") if first else pre.get("acquisition_step"))
    return meas, pos, layers, behaviour, t_beh


def draw_probe_curves(pres: list[dict], metrics: dict, probe_table: pd.DataFrame):
    """Probe accuracy per layer vs the behavioural accuracy it is compared with (metrics rows
    named probe*), else a scatter of probe acquisition step vs behavioural acquisition step,
    else a note."""
    p = plt()
    with_curves = []
    for pre in pres:
        df = metrics.get(pre["run"])
        view = probe_view(pre, df) if df is not None else None
        if view is not None:
            with_curves.append((pre, df, view))
    if with_curves:
        labels = run_labels(pres)
        n = len(with_curves)
        fig, axes, cols = panels(p, n, 2.8, 2.2, max_cols=6, min_width=8.5, top_in=1.3, bottom_in=1.5, hspace=0.9)
        legend = ([], [])
        cmap = p.get_cmap("viridis")
        measures = set()
        for ax, (pre, df, (meas, pos, layers, (bm, bpos), t_beh)) in zip(axes, with_curves):
            measures.add(meas)
            sub = df[(df["measure"] == meas) & (df["position"] == pos)]
            e = probes_entry(pre) or {}
            const = {k for k, ev in (e.get("per_layer") or {}).items()
                     if isinstance(ev, dict) and ev.get("constant_by_construction")}
            lows = []
            for li, name in enumerate(layers):
                st, v = curve(sub, meas, layer=name)
                lows.append(np.nanmin(v) if len(v) and np.isfinite(v).any() else 0.0)
                ax.plot(xstep(st), v, color=cmap(li / max(1, len(layers) - 1)), lw=1, ls=":" if name in const else "-",
                        label=f"probe at {name}" + (" (constant by construction)" if name in const else ""),
                        gid=f"{meas}:{pos}:{name}")
            st, acc = curve(df, bm, position=bpos)
            lows.append(np.nanmin(acc) if len(acc) and np.isfinite(acc).any() else 0.0)
            word = "first-token" if bpos == "first" else "exact-match"
            ax.plot(xstep(st), acc, color="k", lw=1.8, label=f"behaviour: {word} accuracy ({bm}, position {bpos})",
                    gid=f"{bm}:{bpos}")
            thr = _threshold(pre)
            if thr is not None and meas.endswith("_norm"):
                ax.axhline(thr, color="0.5", lw=0.7, ls=":", gid="acquisition_threshold")
            if t_beh is not None:
                ax.axvline(t_beh + 1, color="tab:green", lw=1, gid="event:behaviour_acquisition_step",
                           label=f"{word} acquisition")
            lean_log_x(ax)
            ax.set_ylim(min(-0.05, float(min(lows)) - 0.05), 1.05)
            n_test = int(sub["n_samples"].iloc[0]) if len(sub) else None
            ax.set_title(f"{panel_title(pre, labels[pre['run']])}\nprobe position {pos}, N={n_test}"
                         + (f"; {word} acq {t_beh}" if t_beh is not None else f"; no {word} acquisition"),
                         fontsize=6.5, color=title_colour(pre))
            ax.set_xlabel("training step + 1 (log)")
            ax.set_ylabel(f"{meas} / {bm}", fontsize=6.5)
            hl = ax.get_legend_handles_labels()
            if len(hl[0]) > len(legend[0]):
                legend = hl
        fig.legend(*legend, loc="lower center", ncol=min(3, len(legend[0])), frameon=False, fontsize=6,
                   title="colour = depth (panel with the most layers shown; shallower models use the same scale)",
                   title_fontsize=6)
        suptitle(fig, [f"Linear-probe accuracy ({', '.join(sorted(measures))}, held-out probe test split) per layer "
                       f"vs the behavioural accuracy it is compared with, {plural(n, 'run')}",
                       "probe target: the answer token predicted at the probe position; probe position first: "
                       "first-token accuracy and acquisition, else exact match; dotted: acquisition threshold"],
                 fontsize=8)
        return fig
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
                       color=cmap(li / max(1, len(layers) - 1)), label=f"{name} (n={len(g)})", gid=f"probe:{name}")
        lim = [1, float(max(t["acquisition_step"].max(), t["probe_acquisition_step"].max())) * 1.5 + 1]
        ax.plot(lim, lim, color="0.5", lw=1, ls="--", label="probe = behaviour")
        lean_log_x(ax)
        from ..plots import plain_log
        plain_log(ax, "y")
        ax.set_xlabel("behavioural acquisition step + 1 (probes.csv acquisition_step: exact match)")
        ax.set_ylabel("probe acquisition step + 1")
        ax.set_title(f"Probe vs behavioural acquisition ({t['run'].nunique()} runs, {len(t)} run x layer points);\n"
                     "below the diagonal: the hidden states held the answer first", fontsize=8)
        ax.legend(fontsize=6)
        return fig
    return draw_placeholder("Probe vs behaviour",
                            f"No probe results in these {len(pres)} runs (no 'probes' entry in precursor.json,\n"
                            "no probe* rows in metrics.csv): enable the probes stage to fill this figure.")


def probe_curves(pres: list[dict], metrics: dict, out_png, probe_table: pd.DataFrame) -> list[str]:
    """``draw_probe_curves`` saved (PNG; the scatter also as SVG)."""
    fig = draw_probe_curves(pres, metrics, probe_table)
    scatter = any(c.get_gid() and str(c.get_gid()).startswith("probe:") for a in fig.axes for c in a.collections)
    return save(fig, out_png, svg=scatter, dpi=150 if scatter else 120)


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
