"""Shared figure helpers: Agg backend, colours, saving PNG (+ SVG) atomically."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ..files import atomic_write_bytes

DIFF_COLOUR = {"easy": "tab:green", "hard": "tab:orange", "unlearned": "0.55", "diverged": "tab:red"}
EVENT_LINES = {  # key in precursor.json (or measure entry) -> (label, colour, linestyle)
    "acquisition_step": ("acquisition (accuracy)", "darkgreen", "-."),
    "floor_step": ("RankMe floor", "tab:red", "--"),
    "loss_plateau_exit_step": ("loss-plateau exit", "0.3", "--"),
    "logprob_emergence_step": ("log-prob emergence", "0.45", ":"),
}


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


def save(fig, png: str | Path, svg: bool = False, dpi: int = 150) -> list[str]:
    """Write fig as PNG (and SVG beside it when ``svg``) atomically; close it; return the paths."""
    out = []
    for fmt, path in [("png", Path(png))] + ([("svg", Path(png).with_suffix(".svg"))] if svg else []):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=dpi, metadata={"Date": None} if fmt == "svg" else {"Software": None})
        atomic_write_bytes(path, buf.getvalue())
        out.append(str(path))
    import matplotlib.pyplot as _plt
    _plt.close(fig)
    return out


def grid(p, nrows: int, ncols: int, panel_w: float, panel_h: float, top_in: float = 0.9, bottom_in: float = 0.75,
         left_in: float = 0.75, right_in: float = 0.7):
    """Figure with an nrows x ncols grid of fixed-size panels and fixed margins (inches).

    A fixed layout instead of constrained_layout: with 100+ panels the layout
    solver dominated the run time (seconds per figure)."""
    w = left_in + right_in + panel_w * ncols
    h = top_in + bottom_in + panel_h * nrows
    fig, axes = p.subplots(nrows, ncols, figsize=(w, h), squeeze=False)
    fig.subplots_adjust(left=left_in / w, right=1 - right_in / w, top=1 - top_in / h, bottom=bottom_in / h,
                        wspace=0.55, hspace=0.75)
    return fig, axes


def lean_log_x(ax):
    """Log x axis with major ticks only (minor log ticks cost most of the drawing time)."""
    from matplotlib.ticker import LogLocator, NullLocator
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, numticks=6))
    ax.xaxis.set_minor_locator(NullLocator())


def placeholder(path, title: str, text: str) -> list[str]:
    p = plt()
    fig, ax = p.subplots(figsize=(6, 2.5))
    ax.axis("off")
    ax.set_title(title)
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True)
    return save(fig, path)


def params_label(n) -> str:
    if n is None or n != n:
        return "?"
    n = float(n)
    return f"{n / 1e9:.2g}B" if n >= 1e9 else f"{n / 1e6:.3g}M" if n >= 1e6 else f"{n / 1e3:.3g}K"
