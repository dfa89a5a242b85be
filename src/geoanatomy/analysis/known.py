"""Known transitions as positive controls: each published precursor claim, read on the grids of
the regime it was made in (grokking with and without weight decay, induction heads), by the
same detector and the same benchmark rules as the study (docs/known-transitions.md).

Inputs: one or more grid folders (a results folder or a snapshot of one: per run
``precursor.json`` and ``signal_curves.csv``, and ``summary/precursor_benchmark.csv``).

``run_events``   one row per run and signal: the signal's onset and extreme under the study's
                 matched detector (``analysis.benchmark.event_table``), beside the run's
                 behavioural events: the training set fitted (``train_acquisition_step``), the
                 held-out acquisition (``acquisition_step``: the grokking step in grok), the
                 delay between them, and the induction-head step (a head's prefix-matching
                 score >= 0.5 at the final ``=``).
``claim_rows``   one row per published claim and the grid it is read on: over the acquiring,
                 non-control runs, how many runs have the event, the share whose event comes
                 before acquisition, the share inside the delay (after the training set is
                 fitted, before acquisition: what a precursor of *generalisation* must do, since
                 the training loss has already moved; over the runs whose delay passes the
                 study's clear-gap rule), the median lead (t_acq - t_event) / t_acq,
                 the false alarms on the negatives (controls, runs that never acquire), and the
                 benchmark's cell-level word for the signal on that grid (gain beyond the loss
                 curve, Holm over signals; frozen rule) with its number of cells.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .benchmark import event_table, read_curves, run_table
from .load import load_precursors
from .tables import read_table


@dataclass(frozen=True)
class KnownClaim:
    """A published precursor claim: the signal, which of its events, the grid family and arm
    it was made for, the behavioural event it should precede, and where it was reported."""

    key: str
    statement: str
    signal: str
    event: str            # onset | extreme
    family: str           # grok | ind (the task)
    arm: str              # wd | nowd | "" (the grid's training regime)
    before: str           # acquisition_step | induction_head_step
    source: str
    expect: bool = True   # the paper says it precedes (False: the paper says it fails here)


CLAIMS: tuple[KnownClaim, ...] = (
    KnownClaim("commutator_grok", "the commutator defect rises before generalisation", "commutator", "onset",
               "grok", "wd", "acquisition_step", "arXiv 2602.16967"),
    KnownClaim("update_gap_grok_wd", "the update-Gram spectral gap precedes grokking with weight decay",
               "update_gap", "onset", "grok", "wd", "acquisition_step", "arXiv 2603.28964 (spectral edge)"),
    KnownClaim("update_gap_grok_nowd", "... and not without weight decay", "update_gap", "onset", "grok", "nowd",
               "acquisition_step", "arXiv 2603.28964 (spectral edge)", expect=False),
    KnownClaim("ildr_grok", "ILDR crosses its threshold before grokking", "ildr", "onset", "grok", "wd",
               "acquisition_step", "arXiv 2604.20923"),
    KnownClaim("heat_grok", "the loss-covariance heat capacity peaks before the transition (grokking)",
               "loss_cov_heat", "extreme", "grok", "wd", "acquisition_step", "arXiv 2603.29805"),
    KnownClaim("heat_ind", "the loss-covariance heat capacity peaks before the transition (induction)",
               "loss_cov_heat", "extreme", "ind", "", "induction_head_step", "arXiv 2603.29805"),
    KnownClaim("llc_ind", "the LLC changes at the induction-head stage boundary", "llc", "onset", "ind", "",
               "induction_head_step", "devinterp: the developmental landscape of in-context learning "
               "(Hoogland et al.)"),
    KnownClaim("weight_norm_grok", "the weight norm's decline precedes grokking", "weight_norm", "onset", "grok",
               "wd", "acquisition_step", "Nanda et al. 2023 (progress measures for grokking)"),
    KnownClaim("rankme_grok", "RankMe collapses before acquisition (grokking)", "rankme_uncentred", "extreme",
               "grok", "wd", "acquisition_step", "the study (arXiv 2602.15997)"),
    KnownClaim("rankme_c_grok", "centred RankMe collapses before acquisition (grokking)", "rankme_centred",
               "extreme", "grok", "wd", "acquisition_step", "the study (arXiv 2602.15997)"),
    KnownClaim("rankme_ind", "RankMe collapses before acquisition (induction)", "rankme_uncentred", "extreme",
               "ind", "", "acquisition_step", "the study (arXiv 2602.15997)"),
    KnownClaim("rankme_c_ind", "centred RankMe collapses before acquisition (induction)", "rankme_centred",
               "extreme", "ind", "", "acquisition_step", "the study (arXiv 2602.15997)"),
    KnownClaim("loss_grok", "reference: the training loss's onset (the curve every gain is beyond)", "loss",
               "onset", "grok", "wd", "acquisition_step", "reference"),
)

BEHAVIOUR = ("train_acquisition_step", "acquisition_step", "generalisation_delay", "induction_head_step")


def grid_arm(pres: list[dict]) -> str:
    """'wd' or 'nowd' for a grokking grid by its weight decay (> 0 or 0), '' otherwise."""
    if not pres or pres[0].get("task") != "grok":
        return ""
    wd = float(((pres[0].get("train_settings") or {}).get("train") or {}).get("weight_decay", 0.0))
    return "wd" if wd > 0 else "nowd"


def read_grid(folder: str | Path) -> dict:
    """{folder, pres, curves, benchmark, arm, family} of one grid folder."""
    folder = Path(folder)
    paths = sorted(p for p in folder.glob("*/precursor.json") if p.parent.name != "summary")
    if not paths:
        raise FileNotFoundError(f"{folder}: no RUN/precursor.json; give a grid's results folder or its snapshot")
    pres = load_precursors(paths)
    bench = folder / "summary" / "precursor_benchmark.csv"
    return {"folder": folder, "pres": pres, "curves": read_curves([p.with_name("signal_curves.csv") for p in paths]),
            "benchmark": read_table(bench) if bench.is_file() else None, "arm": grid_arm(pres),
            "family": pres[0].get("task", "")}


def run_events(grid: dict) -> pd.DataFrame:
    """One row per run x signal (module doc), the run's behavioural events beside."""
    pres = grid["pres"]
    runs = run_table(pres)
    ev = event_table(runs, grid["curves"], pres, "matched")
    beh = pd.DataFrame([{"run": p["run"], **{k: p.get(k) for k in BEHAVIOUR}} for p in pres])
    out = ev.merge(runs[["run", "task", "level", "seed", "control", "positive", "negative"]], on="run")
    out = out.merge(beh, on="run")
    out.insert(0, "arm", grid["arm"])
    return out


def _share(mask: pd.Series) -> float:
    return float(mask.mean()) if len(mask) else float("nan")


def claim_row(claim: KnownClaim, events: pd.DataFrame, bench: pd.DataFrame | None, gap_frac: float = 0.25) -> dict:
    """One claim read on one grid's events (module doc). ``share_in_delay`` counts only the runs
    whose delay is resolved by the study's clear-gap rule (t_acq - t_fit >= gap_frac x t_acq,
    ``events.precursor_min_gap_frac``): in a run that generalises as it fits, nothing can lie
    between the two."""
    e = events[events["signal"] == claim.signal]
    pos = e[e["positive"]].copy()
    t_ev = pos[claim.event].astype(float)
    t_to = pos[claim.before].astype(float)
    t_fit = pos["train_acquisition_step"].astype(float)
    has = t_ev.notna() & t_to.notna()
    resolved = has & t_fit.notna() & (pos["acquisition_step"].astype(float) - t_fit
                                      >= gap_frac * pos["acquisition_step"].astype(float))
    lead = ((t_to - t_ev) / t_to)[has]
    neg = e[e["negative"]]
    row = {"claim": claim.key, "statement": claim.statement, "signal": claim.signal, "event": claim.event,
           "family": claim.family, "arm": claim.arm, "compared_with": claim.before, "paper_says": (
               "precedes" if claim.expect else "fails here"), "source": claim.source,
           "n_runs": int(len(pos)), "n_with_event": int(has.sum()),
           "share_before": _share((t_ev < t_to)[has]),
           "n_resolved_delay": int(resolved.sum()),
           "share_in_delay": _share(((t_ev > t_fit) & (t_ev < t_to))[resolved]),
           "lead_median": float(lead.median()) if len(lead) else float("nan"),
           "lead_min": float(lead.min()) if len(lead) else float("nan"),
           "lead_max": float(lead.max()) if len(lead) else float("nan"),
           "n_negatives": int(len(neg)), "false_alarms": int(neg[claim.event].notna().sum())}
    b = None if bench is None else bench[(bench["signal"] == claim.signal) & (bench["event"] == claim.event)]
    if b is not None and len(b):
        b = b.iloc[0]
        row.update(benchmark_word=b["reading"], gain_r=float(b["gain_r"]), gain_p_holm=float(b["gain_p_holm"]),
                   n_cells=int(b["n_cells"]), auroc=float(b["auroc"]))
    else:
        row.update(benchmark_word="no benchmark", gain_r=np.nan, gain_p_holm=np.nan, n_cells=0, auroc=np.nan)
    return row


def claim_rows(grids: list[dict]) -> pd.DataFrame:
    """Every claim on the grid of its family and arm (a claim without such a grid is left out)."""
    rows = []
    for g in grids:
        ev = run_events(g)
        gap = float(g["pres"][0]["events_settings"]["precursor_min_gap_frac"])
        for c in CLAIMS:
            if c.family == g["family"] and c.arm == g["arm"]:
                rows.append(claim_row(c, ev, g["benchmark"], gap))
    return pd.DataFrame(rows)


def behaviour_table(grids: list[dict]) -> pd.DataFrame:
    """One row per run: its family, arm, level parameter, control and behavioural events."""
    rows = []
    for g in grids:
        for p in g["pres"]:
            rows.append({"family": g["family"], "arm": g["arm"], "run": p["run"], "level": p["level"],
                         "level_params": p.get("level_params"), "control": p.get("control") or "",
                         "final_accuracy": p.get("final_accuracy"), **{k: p.get(k) for k in BEHAVIOUR}})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ the figure
EVENT_STYLE = {"train_acquisition_step": ("training set fitted", "tab:blue", "--"),
               "acquisition_step": ("held-out acquisition", "tab:red", "-"),
               "induction_head_step": ("induction head (prefix score >= 0.5)", "tab:green", ":")}


def figure_rows(grid: dict, run: str) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """What ``plot_runs`` draws for ``run``: its signal curves (step x signal), its signal
    events (``run_events`` rows) and its behavioural events."""
    curves = grid["curves"][run][0]
    ev = run_events(grid)
    ev = ev[(ev["run"] == run) & ev["present"]]
    pre = next(p for p in grid["pres"] if p["run"] == run)
    return curves, ev, {k: pre.get(k) for k in EVENT_STYLE}


def plot_runs(panels: list[tuple[dict, str]], png: str | Path) -> list[str]:
    """``draw_runs`` written to ``png``."""
    from .figstyle import save
    return save(draw_runs(panels), png)


def scaled(v: np.ndarray) -> np.ndarray:
    """A curve scaled to [0, 1] over its finite values (NaN where it is constant or absent)."""
    v = np.asarray(v, dtype=float)
    if not np.isfinite(v).any():
        return np.full_like(v, np.nan)
    lo, hi = np.nanmin(v), np.nanmax(v)
    return (v - lo) / (hi - lo) if hi > lo else np.full_like(v, np.nan)


def draw_runs(panels: list[tuple[dict, str]]):
    """One heat strip per (grid, run): a row per signal, its curve scaled to [0, 1] over the run
    (``scaled``: dark low, light high) at each checkpoint it was measured at (an expensive
    measure's cell spans to its next measurement), its matched onset (o) and extreme (X), and
    the run's behavioural events as vertical lines, on a log axis of step + 1 (the early
    collapse and the training fit sit in the first tenth of the run). Returns the figure; row i
    of a panel is its axes' collection i."""
    from .figstyle import plt as _plt
    p = _plt()
    fig, axes = p.subplots(len(panels), 1, figsize=(10, 4.2 * len(panels)), squeeze=False)
    for ax, (grid, run) in zip(axes[:, 0], panels):
        curves, ev, beh = figure_rows(grid, run)
        names = [s for s in ev["signal"].tolist() if s in curves]
        steps = curves["step"].to_numpy(float)
        for i, s in enumerate(names):
            v = curves[s].to_numpy(float)
            ok = np.isfinite(v)
            st, val = steps[ok], scaled(v[ok])
            edges = 1 + (np.r_[st[0] - 0.5, (st[1:] + st[:-1]) / 2, steps[-1] + 0.5] if len(st) else
                         np.array([0.0, 1.0]))
            ax.pcolormesh(edges, [i, i + 1], np.ma.masked_invalid(val[None, :] if len(st) else np.full((1, 1), np.nan)),
                          cmap="viridis", vmin=0, vmax=1)
        for i, s in enumerate(names):
            r = ev[ev["signal"] == s].iloc[0]
            for k, m in (("onset", "o"), ("extreme", "X")):
                if np.isfinite(r[k]):
                    ax.plot(r[k] + 1, i + 0.5, m, color="white", mec="black", mew=0.6, ms=6, label=f"signal's {k}")
        for k, (label, colour, ls) in EVENT_STYLE.items():
            if beh.get(k) is not None:
                ax.axvline(beh[k] + 1, color=colour, ls=ls, lw=1.8, label=f"{label}: step {beh[k]}")
        ax.set_yticks(np.arange(len(names)) + 0.5, names)
        ax.set_ylim(len(names), 0)
        ax.set_xscale("log")
        ax.set_xlim(steps[0] + 0.5, steps[-1] + 1.5)
        ax.set_xlabel("training step + 1 (log)")
        pre = next(q for q in grid["pres"] if q["run"] == run)
        wd = ((pre.get("train_settings") or {}).get("train") or {}).get("weight_decay")
        acq, fit, ind = (beh.get(k) for k in ("acquisition_step", "train_acquisition_step", "induction_head_step"))
        params = ", ".join(f"{k} {v}" for k, v in (pre.get("level_params") or {}).items())
        note = (f"; induction head {acq - ind} steps before held-out acquisition" if acq is not None and ind is not None
                else f"; held-out acquisition {acq - fit} steps after the training set" if acq is not None
                and fit is not None else "")
        ax.set_title(f"{run} ({params}, weight decay {wd}){note}", loc="left")
        handles, labels = ax.get_legend_handles_labels()
        keep = dict(zip(labels, handles))
        ax.legend(keep.values(), keep.keys(), loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
                  title="rows: each curve scaled to [0, 1]\nover the run (dark low, light high)")
    h = fig.get_figheight()
    fig.subplots_adjust(left=0.14, right=0.7, top=1 - 0.35 / h, bottom=0.6 / h, hspace=0.9 / 4.2)
    return fig
