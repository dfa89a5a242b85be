"""Print the findings table of docs/study.md from a finished summary's verdict.csv.

    python benchmarks/findings_table.py results/study/summary

One markdown row per verdict row, in verdict.csv's order: the claim, the measure and RankMe
variant it was tested on, the event or scope (level, size, class), the statistic with its
estimate and interval, then the second statistic with its interval (timing rows: the
leave-one-out gain over the loss curve; lead rows: the relative lead, against the clear gap f
where rule lead reads it), n cells (runs), the null, the Holm-adjusted p, the
power at the row's own cell count (from verdict_power.csv), stable (the word survives every
seed split; `-` where the grid has no split for it) and the verdict. Then the counts of words
and of unstable rows, and the underpowered inconclusive rows. Nothing is computed here: every
number is a cell of verdict.csv.
"""
from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path

import pandas as pd


def _float(x) -> float | None:
    """A finite number from a verdict.csv cell, None for an empty or non-numeric one."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _num(x, nd=2) -> str:
    x = _float(x)
    if x is None:
        return ""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.{nd}f}"


def _est(value, lo, hi, nd=2) -> str:
    v = _num(value, nd)
    if not v:
        return "-"
    lo_s, hi_s = _num(lo, nd), _num(hi, nd)
    return f"{v} [{lo_s}, {hi_s}]" if lo_s and hi_s else v


def _p(x) -> str:
    x = _float(x)
    if x is None:
        return "-"
    return f"{x:.2g}" if x >= 0.001 else "<0.001"


def _flag(x) -> str:
    """verdict.csv's booleans as read by pandas (True/False, or text when a column has gaps)."""
    return str(x).strip().lower()


STABLE_WORD = {"true": "yes", "false": "**no**"}


def findings(summary: Path) -> str:
    df = pd.read_csv(summary / "verdict.csv")
    stable = df["stable"].map(_flag)
    out = ["| # | claim | measure (variant) | event / scope | statistic: estimate [interval] | second statistic"
           " [95%] (gain over the loss curve; relative lead vs f) | n cells (runs) | null | p (Holm) | power | stable"
           " | verdict |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(df.itertuples(), 1):
        measure = str(r.measure or "")
        variant = str(r.variant or "")
        mv = f"{measure} ({variant})" if variant and variant != "nan" else measure
        second = _est(r.second_value, r.second_ci_lo, r.second_ci_hi) if str(r.second_statistic or "") not in ("", "nan") else "-"
        eoi = _num(getattr(r, "effect_of_interest", None))
        if second != "-" and eoi:
            second += f" vs f = {eoi}"
        level = _num(r.ci_level, 2)
        stat = f"{r.statistic}: {_est(r.value, r.ci_lo, r.ci_hi)}" + (f" ({level})" if level and _num(r.ci_lo) else "")
        event = str(r.event) if str(r.event) not in ("", "nan") else "-"
        out.append(f"| {i} | {r.claim} | {mv} | {event} | {stat} | {second} | {int(r.n_units)} ({int(r.n_runs)}) |"
                   f" {r.null} | {_p(r.p_holm)} | {_num(r.power)} | {STABLE_WORD.get(stable[i - 1], '-')} | {r.verdict} |")
    words = Counter(df["verdict"])
    unstable = int((stable == "false").sum())
    decided = int(stable.isin(["true", "false"]).sum())
    out.append("")
    out.append(f"{len(df)} rows: " + ", ".join(f"{words.get(w, 0)} {w}" for w in
                                                ("reproduced", "not reproduced", "inconclusive"))
               + f"; {unstable} of {decided} rows with a seed split unstable.")
    low = df[(df["verdict"] == "inconclusive")]
    powered = low[low["underpowered"].map(_flag) == "false"]
    out.append(f"Inconclusive rows the power report says the grid could power (power >= min_power): "
               f"{len(powered)}" + ("" if powered.empty else " (rows " + ", ".join(
                   str(int(k) + 1) for k in powered.index) + ")") + ".")
    return "\n".join(out)


if __name__ == "__main__":
    print(findings(Path(sys.argv[1] if len(sys.argv) > 1 else "results/summary")))
