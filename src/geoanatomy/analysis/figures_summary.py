"""Summary figures from the tables the statistics use: floors by task across sizes (the cell
floors of floor_spread.csv), lead/lag (the transitions the precursor rule counts) and
Spearman rho matrices between sizes (the per-level correlations of scale_invariance.json
the verdict reads). ``draw_*`` returns the Figure; the wrapper without ``draw_`` saves it."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .figstyle import DIFF_COLOUR, draw_placeholder, params_label, plt, plural, save
from ..plots import plain_log, plain_number
from .floors import cell_floors
from .load import level_order, size_order, task_order
from .rates import effective_transition, ordered_measures
from .settings import summary_settings

RHO_MIN_N = 3   # a rho cell is drawn when the statistics computed a rho: n >= 3 units, neither side constant


def floor_points(floors: pd.DataFrame, measure: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(cells, runs) the floor statistics use for ``measure``: ``cells`` = floors.cell_floors
    (one row per level x task x size, floor = median over its seeds; floor_spread.csv and
    floor_summary.json read these), ``runs`` = the per-run rows behind them (non-diverged
    study runs with a positive floor)."""
    f = floors[floors["measure"] == measure]
    cells = cell_floors(f)
    runs = f[~f["diverged"].astype(bool) & f["extreme_value"].notna()]
    runs = runs[runs["extreme_value"].astype(float) > 0]
    return cells, runs


def draw_floors_by_task(floors: pd.DataFrame, measure: str = "rankme"):
    """Cell floor vs parameter count, one line per task, one panel per level; the seeds of a
    cell as small dots (hollow: that run never acquired)."""
    cells, runs = floor_points(floors, measure)
    if cells.empty:
        return draw_placeholder("Collapse floors", f"no {measure} floors in these runs")
    p = plt()
    from matplotlib.ticker import NullLocator
    lvls = level_order(cells["level"])
    fig, axes = p.subplots(1, len(lvls), figsize=(max(5.5, 4.2 * len(lvls)), 4.2), squeeze=False, sharey=True,
                           constrained_layout=True)
    tasks = task_order(cells["task"])
    cmap = p.get_cmap("tab10")
    npar = runs.dropna(subset=["n_params"]).drop_duplicates("size").set_index("size")["n_params"].to_dict()
    for k, lv in enumerate(lvls):
        ax = axes[0][k]
        g, gr = cells[cells["level"] == lv], runs[runs["level"] == lv]
        for ti, t in enumerate(tasks):
            gt = g[g["task"] == t]
            if gt.empty:
                continue
            order = size_order(gt["size"], npar)
            gt = gt.set_index("size").loc[order]
            col = cmap(ti % 10)
            ax.plot(gt["n_params"].astype(float), gt["floor"].astype(float), color=col, lw=1.2, marker="o", ms=4,
                    label=t, gid=f"cells:{lv}:{t}")
            rt = gr[gr["task"] == t]
            if len(rt):
                acq = rt["acquired"].astype(bool).to_numpy()
                x, y = rt["n_params"].astype(float).to_numpy(), rt["extreme_value"].astype(float).to_numpy()
                ax.scatter(x[acq], y[acq], color=col, s=9, alpha=0.6, zorder=3, gid=f"runs:{lv}:{t}:acquired")
                ax.scatter(x[~acq], y[~acq], facecolor="white", edgecolor=col, s=9, zorder=3,
                           gid=f"runs:{lv}:{t}:not acquired")
        ax.set_xscale("log")
        sizes = size_order(g["size"], npar)
        ax.set_xticks([npar[s] for s in sizes if s in npar])
        ax.set_xticklabels([f"{s}\n{params_label(npar[s])}" for s in sizes if s in npar])
        ax.xaxis.set_minor_locator(NullLocator())
        plain_log(ax, "y")
        ax.set_xlabel("size (parameters, log scale)")
        n_div = int(floors[(floors["measure"] == measure) & (floors["level"] == lv)]["diverged"].astype(bool).sum())
        ax.set_title(f"level {lv}: {plural(len(g), 'cell')}, {plural(len(gr), 'run')}"
                     + (f" ({n_div} diverged, left out)" if n_div else ""))
        if k == 0:
            ax.set_ylabel(f"{measure} floor: cell median over seeds (line), per run (dots)")
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color=cmap(ti % 10), marker="o", ms=4, label=t) for ti, t in enumerate(tasks)]
    handles += [Line2D([], [], color="0.4", marker="o", ms=3, ls="", alpha=0.6, label="run (acquired)"),
                Line2D([], [], color="0.4", marker="o", ms=3, ls="", mfc="white", label="run never acquired")]
    # right of the panels, level with them (upper right ran into the figure's top edge)
    fig.legend(handles=handles, title="task (line: cell median)", fontsize=6, title_fontsize=6,
               loc="outside right center")
    r0 = runs.iloc[0] if len(runs) else floors[floors["measure"] == measure].iloc[0]
    fig.suptitle(f"Collapse floors by task across sizes (the cells of floor_spread.csv; control and diverged runs "
                 f"left out)\n{measure} at {r0['layer']}, position {r0['position']}, {r0['variant']}, "
                 f"N={r0['n_samples']} evaluation examples; floor = minimum over checkpoints", fontsize=9)
    return fig


def floors_by_task(floors: pd.DataFrame, out_png, measure: str = "rankme") -> list[str]:
    """``draw_floors_by_task`` saved (PNG and SVG)."""
    return save(draw_floors_by_task(floors, measure), out_png, svg=True)


def lead_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows the precursor statistics compare with acquisition: study runs (no control),
    not diverged, acquired, whose measure transitioned (``rates.effective_transition``: a
    geometric measure must have collapsed or risen; a reference needs its step), with
    ``lead`` = acquisition step - transition step."""
    r = rows[(rows["control"] == "") & ~rows["diverged"].astype(bool) & rows["acquired"].astype(bool)].copy()
    r["t_tr"] = effective_transition(r)
    r = r[np.isfinite(r["t_tr"].to_numpy(float))]
    r["lead"] = pd.to_numeric(r["acquisition_step"]).astype(float) - r["t_tr"]
    return r


def draw_lead_lag(rows: pd.DataFrame):
    """Lead = t_acq - t_transition per measure (references included), one dot per acquired
    study run whose measure transitioned."""
    r = lead_rows(rows)
    measures = ordered_measures(rows)
    study = rows[rows["control"] == ""]
    if r.empty:
        return draw_placeholder("Lead/lag relative to acquisition",
                                f"no acquired study run with a transition ({study['run'].nunique()} study runs)")
    p = plt()
    fig, axes = p.subplots(2, 1, figsize=(max(6.5, 1.25 * len(measures) + 2.5), 8.5), constrained_layout=True)
    rng = np.random.default_rng(0)
    for ax, kind in zip(axes, ["steps", "decades"]):
        for k, m in enumerate(measures):
            g = r[r["measure"] == m]
            if kind == "steps":
                y = g["lead"].to_numpy(float)
            else:
                y = np.log10((g["acquisition_step"].astype(float) + 1) / (g["t_tr"].astype(float) + 1)).to_numpy()
            x = k + rng.uniform(-0.18, 0.18, len(y))
            ax.scatter(x, y, s=10, c=[DIFF_COLOUR.get(d, "k") for d in g["difficulty"]], alpha=0.8, zorder=3,
                       gid=f"lead:{kind}:{m}")
            if len(y):
                q25, med, q75 = np.percentile(y, [25, 50, 75])
                ax.plot([k - 0.3, k + 0.3], [med, med], color="k", lw=2, gid=f"median:{kind}:{m}")
                ax.fill_between([k - 0.3, k + 0.3], q25, q75, color="0.8", zorder=1)
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_xticks(range(len(measures)))
        labels = []
        for m in measures:
            allm = study[study["measure"] == m]
            ref = " (ref.)" if m in ("loss_plateau_exit", "logprob_emergence") else ""
            labels.append(f"{m}{ref}\nn={int((r['measure'] == m).sum())}, pre "
                          f"{int(allm['precursor'].sum())}/{len(allm)}")
        ax.set_xticklabels(labels, rotation=30, ha="right")
        if kind == "steps":
            from matplotlib.ticker import FuncFormatter
            ax.set_yscale("symlog", linthresh=10)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: plain_number(v) if v >= 0 else "-" +
                                                       plain_number(-v)))
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
    fig.suptitle(f"Lead/lag of each measure relative to behavioural acquisition\n(n = acquired study runs whose "
                 f"measure "
                 f"transitioned: {r['run'].nunique()} runs; pre = precursors k/n over all {study['run'].nunique()} "
                 f"study "
                 f"runs; controls and diverged runs left out; measure: layer/position/variant, "
                 f"event)\n{desc}", fontsize=8)
    return fig


def lead_lag(rows: pd.DataFrame, out_png) -> list[str]:
    """``draw_lead_lag`` saved (PNG and SVG)."""
    return save(draw_lead_lag(rows), out_png, svg=True)


FAMILY_WORDS = {"toy": "algorithmic tasks", "pythia": "Pythia"}   # scale_invariance.json's families in words


def rho_panels(scale: dict, measure: str = "rankme") -> tuple[list, list[str]]:
    """The matrices the scale verdicts read, one per family x quantity x level: cell floors of
    ``measure`` and acquisition order (unacquired cells ranked last), per level
    (``by_level``: rho over the tasks of one level). Returns ([(matrix, title)], notes on
    families left out)."""
    out, notes = [], []
    for fam, res in (scale.get("families") or {}).items():
        sizes = res.get("sizes") or []
        if len(sizes) < 2:
            notes.append(f"{fam}: one size ({', '.join(sizes) or 'none'}), no size pair")
            continue
        quantities = [(f"{measure} floors", ((res.get("floors") or {}).get(measure) or {})),
                      ("acquisition order (not acquired = last)",
                       ((res.get("acquisition_order") or {}).get("censored_last") or {}))]
        for what, entry in quantities:
            for lv, e in (entry.get("by_level") or {}).items():
                if "matrix" in e:
                    out.append((e["matrix"], f"{FAMILY_WORDS.get(fam, fam)}: {what}\nlevel {lv}, units ="
                                             f" {e.get('units', 'task')}"))
    return out, notes


def _pair_ns(m: dict) -> str:
    k = len(m["sizes"])
    return ", ".join(str(m["n"][i][j]) for i in range(k) for j in range(i + 1, k))


def _drawable(m: dict) -> np.ndarray:
    """Boolean matrix: off-diagonal cells with a rho (n >= RHO_MIN_N and not constant)."""
    k = len(m["sizes"])
    ok = np.array([[i != j and m["rho"][i][j] is not None and int(m["n"][i][j]) >= RHO_MIN_N for j in range(k)]
                   for i in range(k)], dtype=bool)
    return ok.reshape(k, k)


def _matrix(ax, m: dict, title: str):
    sizes = m["sizes"]
    ok = _drawable(m)
    rho = np.array([[m["rho"][i][j] if ok[i, j] else np.nan for j in range(len(sizes))] for i in range(len(sizes))],
                   dtype=float).reshape(len(sizes), len(sizes))
    import matplotlib
    cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad="white")
    im = ax.imshow(np.ma.masked_invalid(rho), cmap=cmap, vmin=-1, vmax=1)
    im.set_gid("rho")
    for i in range(len(sizes)):
        for j in range(len(sizes)):
            n = int(m["n"][i][j])
            if i == j:
                ax.text(j, i, f"n={n}\n(cells)", ha="center", va="center", fontsize=5.5, color="0.3")
            elif ok[i, j]:
                ax.text(j, i, f"{rho[i, j]:.2f}\np={m['p'][i][j]:.2g}\nn={n}", ha="center", va="center",
                        fontsize=5.5, color="white" if abs(rho[i, j]) > 0.6 else "black")
            else:
                why = f"n={n}: not drawn" + (f"\n(n < {RHO_MIN_N})" if n < RHO_MIN_N else "\n(constant ranks)")
                ax.text(j, i, why, ha="center", va="center", fontsize=5.5, color="0.4", gid="not drawn")
    ax.set_xticks(range(len(sizes)))
    ax.set_yticks(range(len(sizes)))
    ax.set_xticklabels(sizes, rotation=45, ha="right")
    ax.set_yticklabels(sizes)
    ax.set_title(title, fontsize=7.5)
    return im


def draw_rho_matrix(scale: dict, measure: str = "rankme"):
    """Spearman rho between sizes per family x quantity x level (``rho_panels``), one panel for
    each matrix with at least one rho (no empty panel: the matrices without one are named in
    the title with their n); a cell is coloured only where rho exists (n >= RHO_MIN_N units at
    both sizes, neither side constant), else it says why not; no matrix with a coloured cell:
    a note."""
    panels, notes = rho_panels(scale, measure)
    drawn = [(m, t) for m, t in panels if _drawable(m).any()]
    if not drawn:
        lines = [f"{t.replace(chr(10), ', ')}: n = {_pair_ns(m)}" for m, t in panels] + notes
        return draw_placeholder("Scale invariance: Spearman rho between sizes",
                                f"no size pair with n >= {RHO_MIN_N} units at both sizes: no rho to draw\n"
                                + "\n".join(lines[:12]) + (" ..." if len(lines) > 12 else ""))
    left_out = [f"{t.replace(chr(10), ', ')} (n {_pair_ns(m)})" for m, t in panels if not _drawable(m).any()]
    p = plt()
    ncols = min(4, len(drawn))
    nrows = -(-len(drawn) // ncols)
    fig, axes = p.subplots(nrows, ncols, figsize=(max(3.3 * ncols + 0.8, 7.5), 3.6 * nrows + 0.3 * bool(left_out)),
                           squeeze=False, constrained_layout=True)
    flat = [a for row in axes for a in row]
    im = None
    for ax, (m, title) in zip(flat, drawn):
        im = _matrix(ax, m, title)
    for ax in flat[len(drawn):]:
        ax.remove()
    fig.colorbar(im, ax=flat[:len(drawn)], shrink=0.8, label="Spearman rho")
    if left_out:
        notes = notes + [f"no rho (fewer than {RHO_MIN_N} units at both sizes), not drawn: " + "; ".join(left_out)]
    st = scale.get("settings") or summary_settings()      # the file's own, else the defaults' home
    fig.suptitle("Spearman rho between sizes over the tasks of one level (cells: median over seeds), exact two-sided "
                 f"permutation p (exact for n <= {st['exact_max_n']}); n = units at both sizes;\n"
                 f"a cell is drawn only when rho exists (n >= {RHO_MIN_N}, neither side constant)"
                 + (f"; {'; '.join(notes)}" if notes else ""), fontsize=8)
    return fig


def rho_matrix(scale: dict, out_png, measure: str = "rankme") -> list[str]:
    """``draw_rho_matrix`` saved (PNG and SVG)."""
    return save(draw_rho_matrix(scale, measure), out_png, svg=True)


PROTOCOL_QUANTITIES = (("acquisition_step", "acquisition step (median over runs / units)", True),
                       ("floor", "RankMe floor (median)", False))


def protocol_rows(table: pd.DataFrame, variant: str = "centred") -> pd.DataFrame:
    """The rows of protocols.csv the figure draws: one per cell (the RankMe ``variant`` row;
    the acquisition columns are the same in both variants' rows), cells with a mixture side."""
    t = table[(table["variant"] == variant) & pd.to_numeric(table["mixture_runs"], errors="coerce").gt(0)]
    return t.reset_index(drop=True)


def draw_protocols(table: pd.DataFrame, variant: str = "centred"):
    """protocols.csv, one row per cell: each quantity of the single-task runs (circles) and of
    the mixture's units (squares) side by side, joined by a line; a median that lies beyond the
    run (half or more never acquired) drawn as a '>' at the right edge. Line gids
    "single:<quantity>:<row>" / "mixture:<quantity>:<row>" (row = index in ``protocol_rows``)."""
    rows = protocol_rows(table, variant)
    if rows.empty:
        return draw_placeholder("Single-task vs mixture protocol", "protocols.csv has no cell with mixture units")
    p = plt()
    n = len(rows)
    fig, axes = p.subplots(1, len(PROTOCOL_QUANTITIES), figsize=(10, 1.4 + 0.28 * n), squeeze=False, sharey=True)
    labels = [f"{r.task} {r.level} {r.size}" + (f" ({r.control})" if isinstance(r.control, str) and r.control else "")
              for r in rows.itertuples()]
    ys = np.arange(n)[::-1]
    for ax, (q, xlabel, log) in zip(axes[0], PROTOCOL_QUANTITIES):
        vals = {side: pd.to_numeric(rows[f"{side}_{q}"], errors="coerce").to_numpy(float) for side in ("single",
                                                                                                       "mixture")}
        finite = np.concatenate([v[np.isfinite(v)] for v in vals.values()])
        edge = (finite.max() * (2.0 if log else 1.1)) if finite.size else 1.0
        if not finite.size and q != "acquisition_step":
            ax.text(0.5, 0.5, f"no {q.replace('_', ' ')} in protocols.csv", transform=ax.transAxes, ha="center",
                    color="0.4", gid="not drawn")
        for i, y in enumerate(ys):
            a, b = vals["single"][i], vals["mixture"][i]
            if np.isfinite(a) and np.isfinite(b):
                ax.plot([a, b], [y, y], color="0.75", lw=1, zorder=1)
            for side, v, marker, col in (("single", a, "o", "tab:blue"), ("mixture", b, "s", "tab:orange")):
                cens = q == "acquisition_step" and bool(rows.loc[i, f"{side}_acquisition_censored"] is True
                                                         or str(rows.loc[i, f"{side}_acquisition_censored"]) == "True")
                if np.isfinite(v):
                    ax.plot([v], [y], marker, color=col, ms=5, zorder=3, gid=f"{side}:{q}:{i}")
                elif cens:
                    dy = 0.18 if side == "single" else -0.18          # both censored: both visible
                    ax.plot([edge], [y + dy], ">", color=col, ms=6, mfc="none", zorder=3,
                            gid=f"{side}:{q}:{i}:censored")
        if log:
            plain_log(ax, "x")
        ax.set_xlabel(xlabel)
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(ys)
    axes[0][0].set_yticklabels(labels)
    h = [p.Line2D([], [], marker="o", ls="", color="tab:blue", label="single-task runs"),
         p.Line2D([], [], marker="s", ls="", color="tab:orange", label="mixture units"),
         p.Line2D([], [], marker=">", ls="", color="0.3", mfc="none", label="median beyond the run (half never "
                                                                            "acquire)")]
    fig.legend(handles=h, loc="lower center", ncol=3, frameon=False, bbox_to_anchor=(0.5, 0.0))
    head = rows.dropna(subset=["layer"]).head(1)
    where = (f"floor: RankMe {variant} at {head['layer'].iloc[0]}/{head['position'].iloc[0]}, N = "
             f"{int(head['n_samples'].iloc[0])} held-out examples of the combination" if len(head)
             else f"floor: no RankMe {variant} curve in these units")
    fig.suptitle("Single-task vs mixture protocol, per cell (protocols.csv; no test here: a mixture's units share "
                 f"one model)\n{where}", fontsize=8)
    fig.subplots_adjust(left=0.2, bottom=max(0.12, 0.9 / (1.4 + 0.28 * n)), top=1 - 0.55 / (1.4 + 0.28 * n))
    return fig


def protocols_figure(table: pd.DataFrame, out_png, variant: str = "centred") -> list[str]:
    """``draw_protocols`` saved."""
    return save(draw_protocols(table, variant), out_png)
