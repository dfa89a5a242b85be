"""Per-run trajectory figure: behaviour and RankMe against training step, events marked.

``draw_run`` builds the figure from a run's table and its precursor.json dict and returns
it; ``plot_run`` saves it as ``trajectory.png``. Only events that happened are drawn: a
behavioural event when its step exists, a RankMe event only when the curve collapsed.
Log axes carry plain numbers (1, 10, 100, 1000). The helpers here (event lines and tags,
plain log ticks) are shared with the Pythia and scan figures and the summary figures.
"""
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
EVENT_TAG = {"logprob_emergence_step": "log-prob", "loss_plateau_exit_step": "plateau exit",
             "collapse_step": "collapse", "floor_step": "floor", "recovery_step": "recovery",
             "acquisition_step": "acquisition"}
CURVE_EVENTS = ("collapse_step", "floor_step", "recovery_step")
TAG_ROW_PT = 12  # height of one row of event tags above a panel, points


def _x(steps):
    """Steps shifted by one so step 0 fits on a log axis (x = step + 1)."""
    return np.asarray(steps, dtype=float) + 1.0


def curve_getter(df):
    """curve(measure, **column=value) -> (steps, values) sorted by step, from a long table."""
    from .table import curve
    return lambda measure, **kw: curve(df, measure, **kw)


def changed(entry: dict) -> bool:
    """Whether a measure's curve changed by the events rule (collapsed, or risen when rising)."""
    return bool(entry.get("risen") if entry.get("direction") == "rise" else entry.get("collapsed"))


def happened_events(pre: dict, measure: str = "rankme") -> dict:
    """event key -> step of the events that happened: acquisition, log-prob emergence and
    plateau exit when their step exists; the measure's collapse, floor and recovery only
    when its curve collapsed (an unchanged curve has a minimum, not a floor)."""
    out = {}
    for key in ("acquisition_step", "logprob_emergence_step", "loss_plateau_exit_step"):
        if key == "acquisition_step" and not pre.get("acquired", pre.get(key) is not None):
            continue
        if pre.get(key) is not None:
            out[key] = int(pre[key])
    m = (pre.get("measures") or {}).get(measure) or {}
    if changed(m):
        out.update({k: int(m[k]) for k in CURVE_EVENTS if m.get(k) is not None})
    return out


def plain_log_ticks(lo: float, hi: float) -> list[float]:
    """Tick positions for a log axis from lo to hi: powers of ten when the range spans two
    decades, else 1-2-5 steps, else every digit, else a few round numbers."""
    import math
    if not (lo > 0 and hi > lo and math.isfinite(hi)):
        return []
    e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for subs, need in (((1,), 3), ((1, 2, 5), 3), (tuple(range(1, 10)), 2)):
        t = [m * 10.0 ** e for e in range(e0, e1 + 1) for m in subs if lo <= m * 10.0 ** e <= hi]
        if len(t) >= need:
            return t
    step = 10.0 ** math.floor(math.log10(hi - lo))
    while (hi - lo) / step < 3:
        step /= 2
    return [v for v in np.arange(math.ceil(lo / step) * step, hi + step / 2, step) if v > 0]


def plain_number(v: float, pos=None) -> str:
    """A tick label as a plain number: 1, 10, 1000, 0.5 (no 3x10^1)."""
    if v >= 1 and abs(v - round(v)) < 1e-9 * max(1.0, abs(v)):
        return str(int(round(v)))
    return f"{v:.3g}"


def plain_log(ax, axis: str = "x") -> None:
    """Log scale on ``axis`` ('x' or 'y') with plain-number ticks chosen from the axis limits at
    draw time (``plain_log_ticks``) and no minor tick labels."""
    from matplotlib.ticker import FuncFormatter, Locator, NullLocator

    class PlainLogLocator(Locator):
        def __call__(self):
            lo, hi = sorted(self.axis.get_view_interval())
            return plain_log_ticks(lo, hi)

        def tick_values(self, vmin, vmax):
            return plain_log_ticks(*sorted((vmin, vmax)))

    a = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    a.set_major_locator(PlainLogLocator())
    a.set_major_formatter(FuncFormatter(plain_number))
    a.set_minor_locator(NullLocator())


def event_tags(ax, events: dict, fontsize: float = 6.5) -> int:
    """Short names and steps of the event lines in a strip above the axes, staggered in rows:
    a tag goes to the lowest row where it does not overlap another (text widths estimated
    from the axes' width and the log range of its x data); returns the number of rows (``TAG_ROW_PT`` each)."""
    import matplotlib.transforms as mtransforms
    base = mtransforms.blended_transform_factory(ax.transData, ax.transAxes)
    lo, hi = sorted(ax.dataLim.intervalx)          # the data's x range (step + 1), whatever the scale yet
    width_pt = max(1.0, ax.get_position().width * ax.figure.get_figwidth() * 72)
    dec_per_pt = np.log10(hi / lo) / width_pt if lo > 0 and hi > lo else 0.01
    rows: list[list[tuple[float, float]]] = []
    for key, step in sorted(events.items(), key=lambda kv: (kv[1], kv[0])):
        text = f"{EVENT_TAG[key]} {step}"
        half = (0.6 * fontsize * len(text) + 8) / 2 * dec_per_pt
        lx = np.log10(step + 1.0)
        r = next((i for i, spans in enumerate(rows) if all(lx + half < a or lx - half > b for a, b in spans)), None)
        if r is None:
            rows.append([])
            r = len(rows) - 1
        rows[r].append((lx - half, lx + half))
        trans = mtransforms.offset_copy(base, fig=ax.figure, y=3 + TAG_ROW_PT * r, units="points")
        ax.text(step + 1, 1.0, text, transform=trans, fontsize=fontsize,
                color=EVENT_STYLE[key][1], ha="center", va="bottom", clip_on=False, gid=f"event_tag:{r}",
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": EVENT_STYLE[key][1], "lw": 0.6})
    return len(rows)


def mark_events(ax, pre: dict, tags: bool = True) -> dict:
    """Vertical lines (legend label "name @ step") for the events that happened
    (``happened_events``), tagged above the axes; returns the events drawn."""
    events = happened_events(pre)
    for key, step in events.items():
        lab, col, ls = EVENT_STYLE[key]
        ax.axvline(step + 1, color=col, ls=ls, lw=1.3, label=f"{lab} @ {step}", gid=f"event:{key}")
    if tags and events:
        event_tags(ax, events)
    return events


def verdict_text(m: dict, pre: dict) -> str:
    """A RankMe entry's precursor verdict in words; no gap for a curve that never collapsed."""
    if not changed(m):
        drop = (pre.get("events_settings") or {}).get("collapse_drop")
        ch = m.get("change")
        return "no collapse" + (f" (change {ch:.0%} < {drop:.0%})" if ch is not None and drop is not None else "")
    if not pre.get("acquired"):
        return "collapsed, never acquired"
    word = "precursor" if m.get("precursor") else "no precursor"
    gap = m.get("gap_steps")
    return word + (f", gap {gap}" if gap is not None else "")


def legend_outside(ax, handles, labels, twin: bool = False) -> None:
    """A legend right of the axes (clear of a twin y axis' label when ``twin``), off the data."""
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.13 if twin else 1.02, 1.0),
              borderaxespad=0.0, framealpha=0.85)


def title_and_legend(ax1, ax2, pre: dict, loc: str) -> None:
    """Merged legend of both y axes (at ``loc`` inside, or ``"outside"``: right of the axes)
    and a title with the run's class and precursor verdict."""
    rm = pre["measures"]["rankme"]
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    if loc == "outside":
        legend_outside(ax1, h1 + h2, l1 + l2, twin=True)
    else:
        ax1.legend(h1 + h2, l1 + l2, fontsize=7, loc=loc, framealpha=0.85)
    parts = [f"uncentred: {verdict_text(rm, pre)}"]
    if "rankme_centred" in pre["measures"]:
        parts.append(f"centred: {verdict_text(pre['measures']['rankme_centred'], pre)}")
    control = f", {pre['control']} control" if pre.get("control") else ""
    ax1.set_title(f"{pre['run']}  ({pre['n_params']:,} params, {difficulty_text(pre)}{control})\nRankMe {rm['layer']} "
                  + "; ".join(parts), fontsize=9, pad=6 + TAG_ROW_PT * _tag_rows(ax1))


def difficulty_text(pre: dict) -> str:
    """The run's class with the rule that gave it, short: "easy: acquired by step 150",
    "hard: acquired after step 150", "easy by the class file", "unlearned: never acquired"."""
    cls = str(pre.get("difficulty"))
    src = pre.get("difficulty_source") or {}
    rule = str(src.get("rule") or "")
    emax = (pre.get("events_settings") or {}).get("easy_max_step")
    if cls in ("unlearned", "diverged"):
        return f"{cls}: never acquired" if cls == "unlearned" else cls
    if rule.startswith("class file"):
        return f"{cls} by the class file (calibration runs)"
    if emax is not None:
        return f"{cls}: acquired {'by' if cls == 'easy' else 'after'} step {emax}"
    return cls


def _tag_rows(ax) -> int:
    """How many rows of event tags sit above ``ax`` (to lift the title over them)."""
    return len({t.get_gid() for t in ax.texts if str(t.get_gid()).startswith("event_tag:")})


def plot_layers(ax, curve, pre: dict, ylabel: str, legend_fontsize: int = 7, outside: bool = False) -> None:
    """RankMe of every layer (log y), constant-by-construction layers dotted, acquisition marked;
    the legend inside, or right of the axes when ``outside``."""
    import matplotlib.pyplot as plt

    rm = pre["measures"]["rankme"]
    layers = list(rm["per_layer"].keys())
    cmap = plt.get_cmap("viridis")
    for i, name in enumerate(layers):
        s, r = curve("rankme", layer=name, position=rm["position"], variant=rm["variant"])
        const = rm["per_layer"][name].get("constant_by_construction")
        ax.plot(_x(s), r, color=cmap(i / max(1, len(layers) - 1)), lw=1.5, ls=":" if const else "-",
                label=name + (" (constant by construction)" if const else ""), gid=f"rankme:{name}")
    t_acq = happened_events(pre).get("acquisition_step")
    if t_acq is not None:
        ax.axvline(t_acq + 1, color="tab:green", lw=1.3, gid="event:acquisition_step")
    plain_log(ax, "y")
    ax.set_ylabel(ylabel)
    plain_log(ax, "x")
    ax.set_xlabel("training step + 1 (log scale)")
    if outside:
        h, lab = ax.get_legend_handles_labels()
        legend_outside(ax, h, lab)
    else:
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
    """RankMe of the headline layer in both variants, the floors of those that collapsed
    marked, and the mean share of the same matrix on a second axis (how much of the
    uncentred picture is the mean row)."""
    rm = pre["measures"]["rankme"]
    layer, pos = rm["layer"], rm["position"]
    for name, colour in (("rankme", "tab:blue"), ("rankme_centred", "tab:purple")):
        m = pre["measures"].get(name)
        if not m:
            continue
        s, r = curve("rankme", layer=layer, position=pos, variant=m["variant"])
        ax.plot(_x(s), r, color=colour, lw=1.8, label=f"RankMe {m['variant']}" + ("" if changed(m) else " (no "
                                                                                                        "collapse)"),
                gid=f"rankme:{m['variant']}")
        if changed(m) and m.get("floor_step") is not None:
            ax.axvline(m["floor_step"] + 1, color=colour, ls="--", lw=1, label=f"{m['variant']} floor @ "
                                                                               f"{m['floor_step']}",
                       gid=f"event:{name}:floor_step")
    plain_log(ax, "y")
    ax.set_ylabel(f"RankMe ({layer}, {pos}, N={rm['n_samples']})")
    ax2 = ax.twinx()
    s, share = curve("mean_share", layer=layer, position=pos)
    if len(s):
        ax2.plot(_x(s), share, color="0.35", lw=1.2, ls=":", label="mean share ||mean||²/mean||z||²", gid="mean_share")
    ax2.set_ylim(-0.02, 1.02)
    ax2.set_ylabel("mean share", color="0.35")
    t_acq = happened_events(pre).get("acquisition_step")
    if t_acq is not None:
        ax.axvline(t_acq + 1, color="tab:green", lw=1.3, gid="event:acquisition_step")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    legend_outside(ax, h1 + h2, l1 + l2, twin=True)


def mark_floor_band(ax, curve, pre: dict) -> None:
    """On the headline RankMe axis: the floor point (the first checkpoint within extreme_tol of
    the drop, the detector's floor) and the curve's minimum, when they differ, so a floor line
    left of the visible minimum reads as what it is."""
    rm = pre["measures"]["rankme"]
    if not changed(rm) or rm.get("floor_step") is None:
        return
    s, r = curve("rankme", layer=rm["layer"], position=rm["position"], variant=rm["variant"])
    at = dict(zip(s.tolist(), r.tolist()))
    tol = (pre.get("events_settings") or {}).get("extreme_tol")
    fs = int(rm["floor_step"])
    if fs in at:
        ax.plot([fs + 1], [at[fs]], "o", color="tab:red", ms=5, zorder=5, gid="floor_point",
                label=f"floor point: first within {tol:.0%} of the drop" if tol is not None else "floor point")
    am = rm.get("argextreme_step")
    if am is not None and int(am) != fs and int(am) in at:
        ax.plot([int(am) + 1], [at[int(am)]], "v", color="tab:red", mfc="white", ms=5, zorder=5, gid="minimum_point",
                label=f"minimum @ {int(am)}")


LOSS_EVENT_STYLE = {"onset_step": ("loss onset", ":"), "half_step": ("loss half-drop", "-."),
                    "extreme_step": ("loss floor", "--")}


# every loss curve a table can hold, as (measure, variant, colour, width, what it is): the
# pipeline writes train and heldout, the monitor and the scanner probe and batch_average
LOSS_CURVES = (("loss", "train", "tab:red", 1.8, "answer loss per token, fixed training sample"),
               ("loss", "heldout", "tab:orange", 1.0, "answer loss per token, held-out"),
               ("loss", "probe", "tab:orange", 1.8, "loss of the probe batch"),
               ("train_loss", "batch_average", "tab:red", 1.0, "training batch loss, mean since the last measurement"))


def plot_loss(ax, curve, pre: dict) -> None:
    """Every loss curve of the table (``LOSS_CURVES``: the pipeline's answer loss on the fixed
    training sample, the curve the loss events are read from, and on the held-out set; the
    monitor's and the scanner's probe-batch loss and training batch loss), with the loss curve's
    events that happened (precursor.json ``loss_events``): what every geometric event is judged
    against."""
    for measure, variant, colour, lw, what in LOSS_CURVES:
        s, v = curve(measure, variant=variant)
        if len(s):
            ax.plot(_x(s), v, color=colour, lw=lw, label=f"{what} ({variant})", gid=f"loss:{variant}")
    for key, (lab, ls) in LOSS_EVENT_STYLE.items():
        step = (pre.get("loss_events") or {}).get(key)
        if step is not None:
            ax.axvline(step + 1, color="tab:red", ls=ls, lw=1.1, label=f"{lab} @ {step}", gid=f"loss_event:{key}")
    ax.set_ylabel("loss (nats per answer token)")
    h, lab = ax.get_legend_handles_labels()
    if h:
        legend_outside(ax, h, lab)


def draw_run(df, pre: dict):
    """The trajectory figure of one run (four panels), returned unsaved: accuracy + headline
    RankMe (uncentred) with the events that happened; the loss curve with its events (what the
    verdict asks geometry to beat); RankMe of the headline layer in both variants with the mean
    share; RankMe of every layer."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rm = pre["measures"]["rankme"]
    pos, var, layer = rm["position"], rm["variant"], rm["layer"]
    fig, (ax1, axl, axv, ax3) = plt.subplots(4, 1, figsize=(11, 13.5), sharex=True, constrained_layout=True,
                                             gridspec_kw={"height_ratios": [1.2, 0.8, 1, 1]})
    curve = curve_getter(df)

    s, acc = curve("accuracy", position="answer")
    ax1.plot(_x(s), acc, color="tab:green", lw=2, label="exact-match accuracy (answer, held-out)",
             gid="accuracy:answer")
    s, acc1 = curve("accuracy", position="first")
    if len(s):
        ax1.plot(_x(s), acc1, color="tab:olive", lw=1, ls="--", label="first-token accuracy (first)",
                 gid="accuracy:first")
    s, tacc = curve("token_accuracy")
    ax1.plot(_x(s), tacc, color="tab:green", lw=1, alpha=0.5, label="token accuracy", gid="token_accuracy")
    ax1.set_ylabel("accuracy")
    ax1.set_ylim(-0.03, 1.03)
    ax2 = ax1.twinx()
    s, r = curve("rankme", layer=layer, position=pos, variant=var)
    ax2.plot(_x(s), r, color="tab:blue", lw=2, label=f"RankMe {layer}, pos={pos}, {var}", gid=f"rankme:{var}")
    mark_floor_band(ax2, curve, pre)
    ax2.set_ylabel(f"RankMe ({layer}, {pos}, {var}, N={rm['n_samples']})", color="tab:blue")
    mark_events(ax1, pre)
    title_and_legend(ax1, ax2, pre, loc="outside")
    plot_loss(axl, curve, pre)
    plot_variants(axv, curve, pre)
    plot_layers(ax3, curve, pre, f"RankMe per layer ({pos}, {var})", outside=True)
    return fig


def plot_run(df, pre: dict, out_png: str | Path) -> None:
    """``draw_run`` saved as a PNG (the run's trajectory.png)."""
    save_png(draw_run(df, pre), out_png)


# ------------------------------------------------ the figures of the outside-model branches
# (the Pythia branch, the checkpoint scanner and the monitor draw with these; they share them
# here so that none of the three imports another)
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


def plot_report(df, pre: dict, out_png: str | Path) -> None:
    """trajectory.png of a monitored run or a scanned checkpoint folder: ``plot_run`` when the
    table has accuracy and token accuracy (the monitor with labels), ``plot_pythia_run`` for
    benchmarks, and a loss panel (``plot_loss_run``) otherwise."""
    measures = set(df["measure"])
    if pre["behaviour"]["kind"] == "accuracy":
        if "token_accuracy" in measures:
            return plot_run(df, pre, out_png)
        return plot_pythia_run(df, {**pre, "scoring": pre.get("scoring", "sum")}, out_png)
    return plot_loss_run(df, pre, out_png)


def plot_loss_run(df, pre: dict, out_png: str | Path) -> None:
    """Two panels: probe-set loss + headline RankMe with its events, RankMe of every layer."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
