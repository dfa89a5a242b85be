"""The findings of docs/study.md from a finished summary's verdict.csv.

    geoanatomy report findings results/study/summary
    geoanatomy report findings results/study/summary --by-claim [--write docs/study.md]

One markdown row per verdict row, in verdict.csv's order: the claim, the measure and RankMe
variant it was tested on, the event or scope (level, size, class), the statistic with its
estimate and interval, then the second statistic with its interval (timing rows: the
leave-one-out gain over the loss curve; lead rows: the relative lead, against the clear gap f
where rule lead reads it), n cells (runs), the null, the Holm-adjusted p, the
power at the row's own cell count (from verdict_power.csv), halves agree (the two seed halves'
estimates agree by a z test on their intervals; `-` where the grid has no split for it or the
row no interval) and the verdict. Then the counts of words (descriptive rows have none and
are not counted), the rows whose halves disagree, and the underpowered inconclusive rows.
Nothing is computed here: every number is a cell of verdict.csv.

``--by-claim`` prints the findings claim by claim instead, one section per figure family
(analysis.figures_verdict.FAMILIES, with the family's figure): for each claim the study's
statement, our test and its null (analysis.claims.CLAIMS), then one line per row with its
verdict, estimate and interval, n cells (runs), p, power and stability. ``--write PAGE``
replaces the block between BY_CLAIM_BEGIN and BY_CLAIM_END of PAGE with it.
"""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path


from ..analysis.tables import read_table

from ..analysis.claims import CLAIMS
from ..analysis.figures_verdict import FAMILIES, TITLES


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


def _bound(r) -> str:
    """'bound vs effect' of a row whose rule reads one ('-' otherwise): "0.12 < 0.3" when the
    bound excludes the smallest effect of interest, "0.45 >= 0.3" when it does not."""
    b, e = _float(getattr(r, "bound", None)), _float(getattr(r, "effect_of_interest", None))
    if b is None or e is None or str(r.rule) in ("equivalence", "descriptive"):
        return "-"
    below = b < e
    b, e = f"{b:.3g}", f"{e:.3g}"
    if str(r.rule) == "less":
        return f"{b} {'<=' if below else '>'} {e}"
    return f"{b} {'<' if below else '>='} {e}"


def findings(summary: Path) -> str:
    """The findings table (module doc) of ``summary``/verdict.csv."""
    df = read_table(Path(summary) / "verdict.csv")      # checked against its manifest
    stable = df["stable"].map(_flag)
    out = ["| # | claim | measure (variant) | event / scope | statistic: estimate [interval] | second statistic"
           " [95%] (gain over the covariates; relative lead) | bound vs smallest effect | n cells (runs) | null |"
           " p (Holm) | power | halves agree | verdict |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(df.itertuples(), 1):
        measure = str(r.measure or "")
        variant = str(r.variant or "")
        mv = f"{measure} ({variant})" if variant and variant != "nan" else measure
        has_second = str(r.second_statistic or "") not in ("", "nan")
        second = _est(r.second_value, r.second_ci_lo, r.second_ci_hi) if has_second else "-"
        level = _num(r.ci_level, 2)
        stat = f"{r.statistic}: {_est(r.value, r.ci_lo, r.ci_hi)}" + (f" ({level})" if level and _num(r.ci_lo) else "")
        event = str(r.event) if str(r.event) not in ("", "nan") else "-"
        out.append(f"| {i} | {r.claim} | {mv} | {event} | {stat} | {second} | {_bound(r)} |"
                   f" {int(r.n_units)} ({int(r.n_runs)}) |"
                   f" {r.null} | {_p(r.p_holm)} | {_num(r.power)} | {STABLE_WORD.get(stable[i - 1], '-')} | "
                   f"{r.verdict} |")
    words = Counter(df["verdict"])
    unstable = int((stable == "false").sum())
    decided = int(stable.isin(["true", "false"]).sum())
    n_desc = words.get("descriptive", 0)
    out.append("")
    out.append(f"{len(df) - n_desc} rows with a word: " + ", ".join(f"{words.get(w, 0)} {w}" for w in
                                                                  ("reproduced", "not reproduced", "inconclusive"))
               + (f" ({n_desc} descriptive rows without one)" if n_desc else "")
               + f"; the seed halves disagree in {unstable} of {decided} rows where their agreement is testable.")
    low = df[(df["verdict"] == "inconclusive")]
    powered = low[low["underpowered"].map(_flag) == "false"]
    out.append(f"Inconclusive rows the power report says the grid could power (power >= min_power): "
               f"{len(powered)}" + ("" if powered.empty else " (rows " + ", ".join(
                   str(int(k) + 1) for k in powered.index) + ")") + ".")
    return "\n".join(out)


BY_CLAIM_BEGIN = "<!-- findings by claim: generated by geoanatomy report findings --by-claim; do not edit by hand -->"
BY_CLAIM_END = "<!-- end of findings by claim -->"
FIGURE_DIR = "study"            # the page's figures, relative to docs/study.md


def _row_line(r, stable: str) -> str:
    """One verdict row as a sentence of the claim-by-claim findings."""
    measure, variant = str(r.measure or ""), str(r.variant or "")
    mv = f"{measure} ({variant})" if variant and variant != "nan" else measure
    event = str(r.event) if str(r.event) not in ("", "nan") else ""
    level = _num(r.ci_level, 2)
    est = _est(r.value, r.ci_lo, r.ci_hi)
    parts = [f"{r.statistic}: {est}" + (f" ({level} interval)" if level and _num(r.ci_lo) else "")]
    if str(r.second_statistic or "") not in ("", "nan"):
        parts.append(f"{r.second_statistic}: {_est(r.second_value, r.second_ci_lo, r.second_ci_hi)}")
    if _bound(r) != "-":
        parts.append(f"one-sided 95% bound vs smallest effect of interest {_bound(r)}")
    parts.append(f"{int(r.n_units)} cells ({int(r.n_runs)} runs)")
    parts.append(f"p (Holm) {_p(r.p_holm)}")
    pw = _num(r.power)
    parts.append(f"power {pw}" if pw else "power not simulated")
    parts.append({"true": "seed halves agree", "false": "**seed halves disagree**"}.get(
        stable, "halves' agreement not testable"))
    return f"* {mv}{', ' + event if event else ''}: **{r.verdict}** (rule {r.rule}); " + "; ".join(parts) + "."


def by_claim(summary: Path) -> str:
    """The findings claim by claim (see the module docstring), from ``summary``/verdict.csv."""
    df = read_table(Path(summary) / "verdict.csv")      # checked against its manifest
    df["_stable"] = df["stable"].map(_flag)
    claims = {c.name: c for c in CLAIMS}
    out = []
    for family, names in FAMILIES.items():
        present = [n for n in names if (df["claim"] == n).any()]
        if not present:
            continue
        out += [f"### {TITLES[family][0].upper()}{TITLES[family][1:]} (figure verdict_{family}.png)", ""]
        for name in present:
            c = claims.get(name)
            rows = df[df["claim"] == name]
            if c is not None:
                out.append(f"**{name}.** The study: {c.statement}. Our test: {c.test}. Null: {c.null}.")
            else:
                out.append(f"**{name}.**")
            out.append("")
            out += [_row_line(r, df.loc[r.Index, "_stable"]) for r in rows.itertuples()]
            out.append("")
        out += [f"![{TITLES[family]}]({FIGURE_DIR}/verdict_{family}.png)", ""]
    return "\n".join(out).rstrip("\n")


def block(text: str, begin: str = BY_CLAIM_BEGIN, end: str = BY_CLAIM_END, where: str = "page") -> str:
    """The generated block of a page's ``text`` (between the markers, without them)."""
    try:
        start = text.index(begin) + len(begin)
        return text[start:text.index(end, start)].strip("\n")
    except ValueError:
        raise ValueError(f"{where}: no block {begin!r} ... {end!r}") from None


def write_block(page: Path, text: str, begin: str = BY_CLAIM_BEGIN, end: str = BY_CLAIM_END) -> bool:
    """Replace the block between ``begin`` and ``end`` of ``page``; True if it changed."""
    page = Path(page)
    s = page.read_text()
    block(s, begin, end, str(page))
    start = s.index(begin) + len(begin)
    new = s[:start] + "\n" + text + "\n" + s[s.index(end, start):]
    if new == s:
        return False
    page.write_text(new)
    return True
