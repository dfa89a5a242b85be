"""Shared figure helpers: Agg backend, colours, run labels, panel grids, saving PNG (+ SVG)
atomically. Every summary figure has a ``draw_*`` function that returns the Figure and a
wrapper that saves it (``save``)."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ..files import atomic_write_bytes
from ..plots import happened_events, plain_log
from .load import is_control, seed_of

DIFF_COLOUR = {"easy": "tab:green", "hard": "tab:orange", "unlearned": "0.55", "diverged": "tab:red"}
CONTROL_COLOUR = "tab:purple"
EVENT_LINES = {  # key in precursor.json (or measure entry) -> (label, colour, linestyle)
    "acquisition_step": ("acquisition (accuracy)", "darkgreen", "-."),
    "floor_step": ("RankMe floor (collapsed runs only)", "tab:red", "--"),
    "loss_plateau_exit_step": ("loss-plateau exit", "0.3", "--"),
    "logprob_emergence_step": ("log-prob emergence", "0.45", ":"),
}
EVENT_SHORT = {"acquisition_step": "acq", "floor_step": "floor", "loss_plateau_exit_step": "exit",
               "logprob_emergence_step": "logp"}


def plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as _plt
    _plt.rcParams.update({"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
                          "xtick.labelsize": 7, "ytick.labelsize": 7, "svg.hashsalt": "geoanatomy",
                          "svg.fonttype": "none"})
    return _plt


def xstep(steps):
    """Steps shifted by one so step 0 fits a log axis (x = step + 1)."""
    return np.asarray(steps, dtype=float) + 1.0


def save(fig, png: str | Path, svg: bool = False, dpi: int = 150, about: dict | None = None) -> list[str]:
    """Write fig as PNG (and SVG beside it when ``svg``) atomically; close it; return the paths.
    ``about``: text the file carries in its metadata, not on the figure (PNG text chunks
    ``Title``, ``Description``, ``Source``: the runs and machines a figure came from), read back
    with ``figure_metadata``."""
    out = []
    about = {k: str(v) for k, v in (about or {}).items() if v}
    for fmt, path in [("png", Path(png))] + ([("svg", Path(png).with_suffix(".svg"))] if svg else []):
        buf = io.BytesIO()
        meta = {"Date": None, **({"Title": about["Title"]} if "Title" in about else {}),
                **({"Description": about["Description"]} if "Description" in about else {})} if fmt == "svg" \
            else {"Software": None, **about}
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta)
        atomic_write_bytes(path, buf.getvalue())
        out.append(str(path))
    import matplotlib.pyplot as _plt
    _plt.close(fig)
    return out


def figure_metadata(png) -> dict:
    """The text chunks of a PNG written by ``save`` (its ``about``)."""
    from PIL import Image
    with Image.open(png) as im:
        return dict(im.text)


def grid(p, nrows: int, ncols: int, panel_w: float, panel_h: float, top_in: float = 0.9, bottom_in: float = 0.75,
         left_in: float = 0.75, right_in: float = 0.7, hspace: float = 0.75):
    """Figure with an nrows x ncols grid of fixed-size panels and fixed margins (inches).

    A fixed layout instead of constrained_layout: with 100+ panels the layout
    solver dominated the run time (seconds per figure)."""
    w = left_in + right_in + panel_w * ncols
    h = top_in + bottom_in + panel_h * nrows
    fig, axes = p.subplots(nrows, ncols, figsize=(w, h), squeeze=False)
    fig.subplots_adjust(left=left_in / w, right=1 - right_in / w, top=1 - top_in / h, bottom=bottom_in / h,
                        wspace=0.55, hspace=hspace)
    return fig, axes


def panels(p, n: int, panel_w: float, panel_h: float, max_cols: int = 5, min_width: float = 7.5, **kw):
    """One panel per item, reading order, at most ``max_cols`` a row with the rows as full as
    possible (6 items: 2 x 3): (fig, list of n axes, ncols). Grid cells past the last item are
    removed from the figure (no empty panels); a narrow grid is centred in a figure
    ``min_width`` inches wide (room for the title and legend)."""
    rows = max(1, -(-n // max(1, max_cols)))
    cols = max(1, -(-n // rows))
    left, right = kw.pop("left_in", 0.75), kw.pop("right_in", 0.7)
    extra = max(0.0, min_width - (left + right + panel_w * cols)) / 2
    fig, axes = grid(p, rows, cols, panel_w, panel_h, left_in=left + extra, right_in=right + extra, **kw)
    flat = [a for row in axes for a in row]
    for ax in flat[n:]:
        ax.remove()
    return fig, flat[:n], cols


def suptitle(fig, lines: list[str], fontsize: float = 8.5, panel_title_in: float = 0.45) -> None:
    """A figure title from ``lines``, each wrapped to the figure's width. On a fixed-layout
    grid (``grid``) the figure grows at the top when the title needs more room than the top
    margin leaves above the panel titles (``panel_title_in`` inches), panels unchanged."""
    import textwrap
    width = max(40, int(fig.get_figwidth() * 108 / fontsize))          # ~0.5 em a character
    text = "\n".join(textwrap.fill(ln, width) for ln in lines)
    if not fig.get_constrained_layout():
        h, sp = fig.get_figheight(), fig.subplotpars
        top_in, bottom_in = (1 - sp.top) * h, sp.bottom * h
        need = 0.15 + (text.count("\n") + 1) * fontsize * 1.3 / 72 + panel_title_in
        if need > top_in:
            h2 = h + need - top_in
            fig.set_figheight(h2)
            fig.subplots_adjust(top=1 - need / h2, bottom=bottom_in / h2)
    fig.suptitle(text, fontsize=fontsize, y=1 - 0.08 / fig.get_figheight(), va="top")


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def lean_log_x(ax):
    """Log x axis with plain-number major ticks (1, 10, 100, 1000) and no minor ticks (minor
    log ticks cost most of the drawing time)."""
    plain_log(ax, "x")


def draw_placeholder(title: str, text: str):
    """A figure that says in words why there is nothing to draw."""
    p = plt()
    fig, ax = p.subplots(figsize=(6.5, 2.8))
    ax.axis("off")
    ax.set_title(title)
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, gid="placeholder")
    return fig


def placeholder(path, title: str, text: str) -> list[str]:
    return save(draw_placeholder(title, text), path)


def params_label(n) -> str:
    if n is None or n != n:
        return "?"
    n = float(n)
    return f"{n / 1e9:.2g}B" if n >= 1e9 else f"{n / 1e6:.3g}M" if n >= 1e6 else f"{n / 1e3:.3g}K"


def run_labels(pres: list[dict]) -> dict:
    """run name -> short unique label: "par L3 nano", "par L3 nano s1", "mod L1 nano shuffled
    control". The seed is named when it is not 0 or its cell has other seeds."""
    cells: dict = {}
    for p in pres:
        cells.setdefault((p["task"], p["level"], p["size"], is_control(p)), set()).add(seed_of(p))
    out = {}
    for p in pres:
        seed = seed_of(p)
        lab = f"{p['task']} {p['level']} {p['size']}"
        if seed or len(cells[(p["task"], p["level"], p["size"], is_control(p))]) > 1:
            lab += f" s{seed}"
        if is_control(p):
            lab += f" {p.get('control') or 'shuffled'} control"
        out[p["run"]] = lab
    return out


def panel_title(pre: dict, label: str) -> str:
    """A run panel's title: label, parameters and the run's class (a control: acquired or not)."""
    if is_control(pre):
        what = "acquired (false alarm)" if pre.get("acquired") else "not acquired"
    else:
        what = pre["difficulty"]
    return f"{label} ({params_label(pre.get('n_params'))}): {what}"


def title_colour(pre: dict) -> str:
    return CONTROL_COLOUR if is_control(pre) else DIFF_COLOUR.get(pre["difficulty"], "k")


def summary_events(pre: dict) -> dict:
    """The events of a summary panel that happened (``plots.happened_events``): acquisition,
    headline RankMe floor (only when it collapsed), plateau exit, log-prob emergence."""
    ev = happened_events(pre, "rankme")
    return {k: ev[k] for k in EVENT_LINES if k in ev}


def draw_event_lines(ax, events: dict) -> str:
    """Vertical lines for ``events`` (label "name @ step", gid "event:KEY"); returns the
    events as one short line for the panel title ("acq 420 · floor 60")."""
    for key, step in events.items():
        lab, col, ls = EVENT_LINES[key]
        ax.axvline(step + 1, color=col, ls=ls, lw=1.0, label=f"{lab} @ {step}", gid=f"event:{key}")
    return " · ".join(f"{EVENT_SHORT[k]} {s}" for k, s in sorted(events.items(), key=lambda kv: kv[1])) or "no events"
