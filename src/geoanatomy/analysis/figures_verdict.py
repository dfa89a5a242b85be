"""The verdict drawn: one figure per family of claims, from verdict.csv's rows alone.

``figures/verdict_{family}.png`` (families: ``FAMILIES``), one panel per claim, one row per
verdict row (measure, RankMe variant, event kind): the row's estimate as a dot and its
interval as a bar (the interval verdict.csv gives, at its ``ci_level``), coloured by the
verdict word; the null as a dashed line, or for equivalence rows the equivalence band
(-delta, delta) shaded; at the right the row's word, n cells (runs) and stability, and where
it qualifies the word (inconclusive, not reproduced) the power of the claim's test on this
grid's design, named by the alternative it was simulated against (``ALTERNATIVES``). Rows with
no estimate (too few cells) are not drawn: the panel lists them by name instead. Nothing is
cut: long titles and labels wrap. The runs and machines the verdict came from are in the
PNG's metadata (``Description``) and the report's caption, not on the figure.

What a row draws (``row_estimate``): ``value`` and ``ci_lo``/``ci_hi`` against the null and,
dotted, the claim's smallest effect of interest (``effect_of_interest``: "not reproduced" when
the interval's upper end, the one-sided 95% bound, lies below it); claims that draw their
second statistic (``Claim.draws``) draw it against 0; and rows of rule ``lead`` draw their
second statistic, the lead as a share of the later event's step, against 0 (no lead) and the
smallest effect (dotted): rule lead reads "not reproduced" when that bound lies below it,
whatever the sign test on the lead in steps says, so the figure shows what decided the colour.
The lead in steps is printed at the right.
"""
from __future__ import annotations

import math
import textwrap

import pandas as pd

from . import figstyle
from .claims import CLAIMS
from .claims.base import FIGURES

# figure family -> its claims (each claim names its family: analysis.claims, Claim.figure), in
# the claims' table order
FAMILIES: dict[str, tuple[str, ...]] = {f: tuple(c.name for c in CLAIMS if c.figure == f) for f in FIGURES}
TITLES = {"timing": "geometry before behaviour, beyond the loss curve",
          "lags": "equivalence and lags: geometry and behaviour together or apart",
          "floors": "collapse floors across tasks and sizes",
          "topdown": "top-down propagation of the collapse",
          "prediction": "acquisition and the limits of prediction across sizes"}
WORD_COLOUR = {"reproduced": "tab:green", "not reproduced": "tab:red", "inconclusive": "0.5", "descriptive": "tab:blue"}
SECOND = {c.name for c in CLAIMS if c.draws == "second"}   # claims whose rows draw their second statistic
# what a claim's power is measured against, in words (analysis.power's scenarios; the claim's
# Design names them): "power 0.15 vs a precursor at half t_acq"
ALTERNATIVES = {"proportional": "a precursor at half t_acq", "proportional-noisy": "a precursor at half t_acq",
                "hard-only": "a precursor in hard cells only", "partial": "a precursor in half the cells",
                "simultaneous": "events simultaneous with acquisition",
                "simultaneous-noisy": "events simultaneous with acquisition",
                "lag": "a lag of 0.3 decade", "lag-noisy": "a lag of 0.3 decade"}
POWER_QUALIFIES = ("inconclusive", "not reproduced")    # the words a power figure qualifies


def alternative_text(claim: str) -> str:
    """What the claim's power was simulated against, in words ('' when not simulated)."""
    c = next((c for c in CLAIMS if c.name == claim), None)
    if c is None:
        return ""
    if c.design.kind == "binomial":
        return "a share of 0.8"
    return " or ".join(dict.fromkeys(ALTERNATIVES.get(a, a) for a in c.design.alternative))


def _num(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def row_estimate(r: dict) -> tuple:
    """(statistic, estimate, lo, hi) a verdict row draws (module doc); None where absent."""
    if r.get("claim") in SECOND or _is_lead(r):
        return (_text(r.get("second_statistic")), _num(r.get("second_value")), _num(r.get("second_ci_lo")),
                _num(r.get("second_ci_hi")))
    return _text(r.get("statistic")), _num(r.get("value")), _num(r.get("ci_lo")), _num(r.get("ci_hi"))


def _is_lead(r: dict) -> bool:
    """A row of rule lead that carries its relative lead (second statistic)."""
    return r.get("rule") == "lead" and _num(r.get("second_value")) is not None


def _text(x) -> str:
    """A table cell as text: '' for None and NaN (pandas reads empty cells as NaN)."""
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else str(x)


def row_label(r: dict) -> str:
    """measure (variant) event [protocol], as the verdict row names it; both RankMe variants
    read "rankme (variant)"."""
    label = _text(r.get("measure"))
    v = _text(r.get("variant"))
    if label.startswith("rankme") and v:
        label = "rankme"
    if v and v not in label:
        label += f" ({v})"
    if _text(r.get("event")):
        label += f" {_text(r['event'])}"
    if _text(r.get("protocol")) not in ("", "single-task"):
        label += f" [{_text(r['protocol'])}]"
    return label


def _right(r: dict) -> str:
    n = f"n {int(r['n_units'])} ({int(r['n_runs'])})" if _num(r.get("n_units")) is not None else "n -"
    pw = _num(r.get("power"))
    st = r.get("stable")
    stab = "" if st is None or (isinstance(st, float) and math.isnan(st)) or st == "" else \
        ("halves agree" if str(st).lower() in ("true", "1", "1.0") else "HALVES DIFFER")
    steps = f"lead {_num(r.get('value')):g} steps" if _is_lead(r) and _num(r.get("value")) is not None else ""
    alt = alternative_text(str(r.get("claim")))
    power = (f"power {pw:.2f}" + (f" vs {alt}" if alt else "")) if pw is not None and str(r.get("verdict")) in \
        POWER_QUALIFIES else ""
    return "  ".join(x for x in (str(r.get("verdict") or ""), n, steps, power, stab) if x)


def axis_label(stats: list[str]) -> str:
    """One x label for a panel's rows: their statistic when they share it; when they differ in a
    few words only (per-size rows: "... at nano ..." and "... at micro ..."), those words
    joined ("at nano/micro"); else the first with a pointer to the rows."""
    stats = [s for s in dict.fromkeys(stats) if s]
    if len(stats) <= 1:
        return stats[0] if stats else ""
    words = [s.split(" ") for s in stats]
    if len({len(w) for w in words}) == 1:
        cols = list(zip(*words))
        if sum(len(set(c)) > 1 for c in cols) <= 2:
            return " ".join(c[0] if len(set(c)) == 1 else "/".join(dict.fromkeys(c)) for c in cols)
    return stats[0] + " (the rows' own statistics: verdict.csv)"


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width) or [""]


def panel_labels(rows: list[dict]) -> list[str]:
    """``row_label`` of each row, rows sharing one label told apart by the words in which their
    statistics differ (e.g. the size of a per-size row: "rankme (uncentred) [nano]")."""
    labels = [row_label(r) for r in rows]
    out = list(labels)
    for lab in set(labels):
        idx = [i for i, x in enumerate(labels) if x == lab]
        if len(idx) < 2:
            continue
        words = [_text(rows[i].get("statistic")).replace(",", " ").split() for i in idx]
        common = set.intersection(*(set(w) for w in words))
        for i, w in zip(idx, words):
            extra = " ".join(x for x in w if x not in common)
            out[i] = f"{lab} [{extra}]" if extra else f"{lab} [{idx.index(i) + 1}]"
    return out


def _counted(labels: list[str]) -> str:
    seen = {}
    for x in labels:
        seen[x] = seen.get(x, 0) + 1
    return ", ".join(x + (f" x{n}" if n > 1 else "") for x, n in seen.items())


def family_rows(verdict: pd.DataFrame, family: str) -> dict[str, list[tuple[int, dict]]]:
    """{claim: [(row index in verdict.csv, row), ...] in table order} for the claims of
    ``family`` that have rows."""
    recs = list(enumerate(verdict.to_dict("records")))
    out = {c: [(i, r) for i, r in recs if r.get("claim") == c] for c in FAMILIES[family]}
    return {c: rows for c, rows in out.items() if rows}


def _titles(by_claim: dict) -> dict:
    """claim -> (panel title lines, no-estimate line) (wrapped, never cut)."""
    out = {}
    for claim, rows in by_claim.items():
        labels = panel_labels([r for _, r in rows])
        missing = [lab for (_, r), lab in zip(rows, labels) if row_estimate(r)[1] is None]
        if len(missing) == len(rows):
            out[claim] = ([], _wrap(f"{claim}: no estimate (too few cells) for {_counted(missing)}", 120))
        else:
            out[claim] = (_wrap(claim + (f"   (no estimate: {_counted(missing)})" if missing else ""), 115), [])
    return out


def draw_family(verdict: pd.DataFrame, family: str):
    """The figure of one family (module doc); a family none of whose claims has a row gets a
    figure that says so in words (a declared output of the workflow). Returns the Figure; its
    panels carry ``gid`` = the claim, each drawn row a dot (Line2D, gid "row:<claim>:<index in
    verdict.csv>") and, if it has an interval, a bar (gid "ci:...") so a test can read back
    what was drawn."""
    p = figstyle.plt()
    by_claim = family_rows(verdict, family)
    if not by_claim:
        return figstyle.draw_placeholder(f"verdict: {TITLES[family]}", "verdict.csv has no row of these claims")
    titles = _titles(by_claim)
    inches = [(0.75 + 0.26 * sum(row_estimate(r)[1] is not None for _, r in rows) + 0.13 * (len(titles[c][0]) - 1)
               + 0.12 * max(0, len(_wrap(axis_label([row_estimate(r)[0] for _, r in rows]), 110)) - 1))
              if any(row_estimate(r)[1] is not None for _, r in rows) else 0.3 + 0.13 * len(titles[c][1])
              for c, rows in by_claim.items()]
    header = 0.45                            # the title
    total = sum(inches) + header + 0.45      # + the legend's row at the bottom
    fig = p.figure(figsize=(12.5, total))
    y0 = 1.0 - header / total
    for (claim, rows), h_in in zip(by_claim.items(), inches):
        labels = panel_labels([r for _, r in rows])
        drawn, missing = [], []
        for (ri, r), lab in zip(rows, labels):
            stat, x, lo, hi = row_estimate(r)
            (drawn if x is not None else missing).append((ri, r, stat, x, lo, hi, lab))
        head, note = titles[claim]
        if not drawn:            # nothing to draw: the claim named in a line, no empty panel
            ax = fig.add_axes([0.24, y0 - h_in / total, 0.36, h_in / total])
            ax.set_gid(claim)
            ax.axis("off")
            ax.text(0.0, 0.5, "\n".join(note), transform=ax.transAxes, fontsize=7, color="0.35", va="center")
            y0 -= h_in / total
            continue
        xl = _wrap(axis_label([d[2] for d in drawn]), 110)
        top = 0.45 + 0.13 * (len(head) - 1)
        ax = fig.add_axes([0.24, y0 - h_in / total + (0.35 + 0.12 * (len(xl) - 1)) / total, 0.36,
                           (h_in - top - 0.35 - 0.12 * (len(xl) - 1)) / total])
        ax.set_gid(claim)
        y0 -= h_in / total
        ys = list(range(len(drawn)))[::-1]
        for yy, (ri, r, stat, x, lo, hi, lab) in zip(ys, drawn):
            c = WORD_COLOUR.get(str(r.get("verdict")), "k")
            if lo is not None and hi is not None:
                ax.plot([lo, hi], [yy, yy], color=c, lw=2.2, alpha=0.55, solid_capstyle="butt", gid=f"ci:{claim}:{ri}")
            ax.plot([x], [yy], "o", color=c, ms=5, gid=f"row:{claim}:{ri}")
            ax.text(1.02, yy, _right(r), transform=ax.get_yaxis_transform(), va="center", fontsize=6.5, color=c)
        nulls = {((0.0, "greater") if claim in SECOND else (_num(r.get("null_value")), r.get("rule")))
                 for _, r, *_ in drawn}
        for f in {_num(r.get("effect_of_interest")) for _, r, *_ in drawn
                  if (_is_lead(r) or claim not in SECOND) and r.get("rule") != "equivalence"} - {None}:
            ax.axvline(f, color="0.3", ls=":", lw=1.0, gid=f"effect:{claim}")
            ax.text(f, 0.0, " smallest effect", transform=ax.get_xaxis_transform(), fontsize=6, color="0.3",
                    va="bottom", ha="left")
        for nv, rule in nulls:
            if nv is None:
                continue
            if rule == "equivalence":
                ax.axvspan(-abs(nv), abs(nv), color="tab:blue", alpha=0.08, lw=0)
            else:
                ax.axvline(nv, color="0.3", ls="--", lw=0.8)
        ax.set_yticks(ys)
        ax.set_yticklabels([d[-1] for d in drawn], fontsize=6.5)
        ax.set_ylim(-0.7, len(drawn) - 0.3)
        ax.set_xlabel("\n".join(xl), fontsize=6.5)
        ax.set_title("\n".join(head), fontsize=7.5, loc="left")
    fig.suptitle(f"verdict: {TITLES[family]}", fontsize=9, y=1.0 - 0.12 / total, va="top")
    handles = [p.Line2D([], [], marker="o", ls="-", color=c, label=w) for w, c in WORD_COLOUR.items()]
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.05 / total), fontsize=7, frameon=False,
               ncol=len(handles))
    return fig


def verdict_figures(verdict: pd.DataFrame, fig_dir, provenance: str = "") -> list[str]:
    """Write figures/verdict_{family}.png for every family, ``provenance`` (the runs and
    machines) in each PNG's metadata; the paths written."""
    from pathlib import Path
    out = []
    for fam in FAMILIES:
        out += figstyle.save(draw_family(verdict, fam), Path(fig_dir) / f"verdict_{fam}.png",
                             about={"Title": f"verdict: {TITLES[fam]}", "Description": provenance,
                                    "Source": "geoanatomy summarize claims (analysis.figures_verdict)"})
    return out
