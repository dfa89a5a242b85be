"""Writing summary tables: plain CSV with a manifest beside it (``NAME.csv-metadata.json``,
``geoanatomy.manifest``) holding its title, notes (what it holds, how it was computed, from how
many runs), row count and sha256; and tables.html.

Read a table with ``pandas.read_csv(path)`` (or pyarrow) and its notes with ``header_lines``;
``read_table`` below also checks the table against its manifest.
"""
from __future__ import annotations

import html
import io
import json
from pathlib import Path

import pandas as pd

from ..manifest import check_rows, number_text, read_checked, write_with_manifest


def _integral_to_int(df: pd.DataFrame) -> pd.DataFrame:
    """Float columns holding only whole numbers (steps, counts, n_params with gaps) -> nullable Int64."""
    df = df.copy()
    for c in df.columns:
        if pd.api.types.is_float_dtype(df[c]):
            v = df[c].dropna()
            if len(v) and (v == v.round()).all() and v.abs().max() < 2 ** 53:
                df[c] = df[c].astype("Int64")
    return df


def csv_text(df: pd.DataFrame) -> str:
    """The plain CSV text of a summary table: whole-number columns as integers, other floats to
    6 significant digits with a decimal point or exponent and a missing number as ``NaN``
    (``manifest.number_text``; polars types a column from its first rows, so an empty first
    hundred made a number column text), other missing values empty: every reader types each
    column one way."""
    df = _integral_to_int(df)
    for c in df.columns:
        if pd.api.types.is_float_dtype(df[c]):
            df[c] = [number_text(float(v), 6) for v in df[c]]
    buf = io.StringIO()
    df.to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue()


def column_types(df: pd.DataFrame) -> dict:
    """column -> CSVW datatype of a summary table as ``csv_text`` writes it."""
    df = _integral_to_int(df)
    out = {}
    for c in df.columns:
        d = df[c]
        vals = [v for v in d if v is not None and not (isinstance(v, float) and v != v)]
        out[str(c)] = ("integer" if pd.api.types.is_integer_dtype(d) else "number" if pd.api.types.is_float_dtype(d)
                       else "boolean" if pd.api.types.is_bool_dtype(d) or (vals and all(isinstance(v, bool)
                                                                                        for v in vals))
                       else "string")
    return out


def write_csv(df: pd.DataFrame, path, title: str, notes: list[str]) -> None:
    """``path`` (plain CSV) and its manifest with ``title``, ``notes`` and column types, atomically."""
    write_with_manifest(path, csv_text(df), title=title, notes=notes, columns=[str(c) for c in df.columns],
                        rows=len(df), types=column_types(df))


def _fix(path) -> str:
    return f"rebuild the summary (delete {Path(path).name} and run snakemake again)"


def read_table(path, **read_csv) -> pd.DataFrame:
    """A summary CSV, checked against its manifest (an empty frame when it has no columns: a
    table with no rows, e.g. the single-task tables of a grid of mixture blocks only);
    ``read_csv``: pandas' options for the checked bytes."""
    data, meta = read_checked(path, _fix(path))
    try:
        df = pd.read_csv(io.BytesIO(data), **read_csv)
    except pd.errors.EmptyDataError:
        df = pd.DataFrame()
    check_rows(path, len(df), meta, _fix(path))
    return df


def header_lines(path) -> list[str]:
    """The table's title and notes (from its manifest)."""
    _, meta = read_checked(path, _fix(path))
    return [meta.get("dc:title") or ""] + list(meta.get("notes") or [])


FOLD_CHARS = 100     # a text cell longer than this is folded (<details>): rows stay one line tall

SORT_JS = """
document.querySelectorAll('table.sortable th').forEach(function(th, col) {
  th.style.cursor = 'pointer'; th.title = 'sort';
  th.addEventListener('click', function() {
    var tb = th.closest('table').tBodies[0], rows = Array.from(tb.rows);
    var dir = th.dataset.dir === 'asc' ? -1 : 1; th.dataset.dir = dir === 1 ? 'asc' : 'desc';
    var key = function(r) { var t = r.cells[col].innerText.trim(), x = parseFloat(t);
                            return isNaN(x) ? t.toLowerCase() : x; };
    rows.sort(function(a, b) { var x = key(a), y = key(b);
      if (typeof x !== typeof y) { return (typeof x === 'number' ? -1 : 1) * dir; }
      return (x < y ? -1 : x > y ? 1 : 0) * dir; });
    rows.forEach(function(r) { tb.appendChild(r); });
  });
});
"""


def _cell(v) -> str:
    """One table cell as HTML: numbers to 4 significant digits, long text folded."""
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    t = str(v)
    if len(t) > FOLD_CHARS:
        return (f"<details><summary>{html.escape(t[:FOLD_CHARS - 30].rsplit(' ', 1)[0])} (more)</summary>"
                f"{html.escape(t)}</details>")
    return html.escape(t)


def html_table(df: pd.DataFrame, sortable: bool = False) -> str:
    """A DataFrame as an HTML table (``_cell`` per cell); ``sortable``: click a header to sort."""
    if not len(df):
        return "<p><em>empty table (no rows)</em></p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>"
                   for row in df.itertuples(index=False))
    return (f"<table class='{'sortable' if sortable else 'plain'}'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def compact_verdict(v: pd.DataFrame) -> pd.DataFrame:
    """verdict.csv at a glance, one row per verdict row (``row`` = its 1-based number): claim,
    what the row measures, the word, the estimate [interval] at its level, n cells (runs), the
    one-sided bound against the smallest effect of interest (what decides a "not reproduced")
    and, where it qualifies the word, the power against the alternative the claim names."""
    from .figures_verdict import POWER_QUALIFIES, _num, alternative_text, row_label
    out = []
    for i, r in enumerate(v.to_dict("records"), 1):
        x, lo, hi, lvl = (_num(r.get(k)) for k in ("value", "ci_lo", "ci_hi", "ci_level"))
        est = "-" if x is None else f"{x:.3g}" + (f" [{lo:.3g}, {hi:.3g}]" if lo is not None and hi is not None
                                                 else "")
        bound, eoi = _num(r.get("bound")), _num(r.get("effect_of_interest"))
        pw = _num(r.get("power"))
        alt = alternative_text(str(r.get("claim")))
        nu, nr = _num(r.get("n_units")), _num(r.get("n_runs"))
        out.append({"row": i, "claim": r.get("claim"), "measure": row_label(r), "word": r.get("verdict"),
                    "estimate [interval]": est, "level": f"{lvl:.0%}" if lvl and lo is not None else "",
                    "n cells (runs)": "-" if nu is None else f"{int(nu)} ({int(nr or 0)})",
                    "bound vs smallest effect": f"{bound:.3g} vs {eoi:g}" if bound is not None and eoi is not None
                    else "",
                    "power (where it qualifies the word)": (f"{pw:.2f} vs {alt}" if alt else f"{pw:.2f}")
                    if pw is not None and str(r.get("verdict")) in POWER_QUALIFIES else ""})
    return pd.DataFrame(out)


def tables_html(sections: list[tuple[str, list[str], pd.DataFrame | dict]], title: str,
                headline_png: bytes | None = None) -> str:
    """One self-contained HTML page: the answer first (the headline figure, embedded, and
    verdict.csv at a glance: ``compact_verdict``, sortable, every column of verdict.csv folded
    below it), then per section a heading, its notes (folded) and the table (long text cells
    folded) or JSON."""
    import base64
    css = ("body{font-family:sans-serif;font-size:13px;margin:1.5em}table{border-collapse:collapse;margin-bottom:1em}"
           "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right;vertical-align:top}th{background:#eee}"
           "td details summary{cursor:pointer;color:#225}td details{text-align:left;max-width:40em}"
           "table.sortable td{text-align:left}tr:hover td{background:#f7f7ff}"
           "p.note{margin:0.1em 0;color:#333}pre{background:#f6f6f6;padding:0.5em;max-height:40em;overflow:auto}"
           "img{max-width:100%}")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{css}</style></head><body><h1>{html.escape(title)}</h1>"]
    if headline_png:
        parts.append("<img alt='headline.png: the headline test in one figure' src='data:image/png;base64,"
                     + base64.b64encode(headline_png).decode() + "'>")
    parts.append("<p>Contents: " + " | ".join(f"<a href='#{html.escape(n)}'>{html.escape(n)}</a>"
                                               for n, _, _ in sections) + "</p>")
    for name, notes, obj in sections:
        parts.append(f"<h2 id='{html.escape(name)}'>{html.escape(name)}</h2>")
        if notes:
            parts.append("<details><summary>notes: what the table holds and how it was computed</summary>"
                         + "".join(f"<p class='note'>{html.escape(n)}</p>" for n in notes) + "</details>")
        if isinstance(obj, pd.DataFrame):
            if name == "verdict.csv" and len(obj):
                counts = obj["verdict"].astype(str).value_counts()
                parts.append("<p><b>" + ", ".join(f"{int(counts.get(w, 0))} {w}" for w in
                                                  ("reproduced", "not reproduced", "inconclusive", "descriptive"))
                             + f"</b> of {len(obj)} rows; click a column's header to sort.</p>")
                parts.append(html_table(compact_verdict(obj), sortable=True))
                parts.append(f"<details><summary>every column of verdict.csv ({len(obj.columns)})</summary>"
                             + html_table(obj, sortable=True) + "</details>")
            else:
                parts.append(html_table(obj, sortable=True))
        else:
            parts.append(f"<pre>{html.escape(json.dumps(obj, indent=1)[:200000])}</pre>")
    parts.append(f"<script>{SORT_JS}</script></body></html>")
    return "\n".join(parts)
