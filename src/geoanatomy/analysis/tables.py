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


def tables_html(sections: list[tuple[str, list[str], pd.DataFrame | dict]], title: str) -> str:
    """One self-contained HTML page: per section a heading, its notes, and the table (or JSON)."""
    css = ("body{font-family:sans-serif;font-size:13px;margin:1.5em}table{border-collapse:collapse;margin-bottom:2em}"
           "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}"
           "p.note{margin:0.1em 0;color:#333}pre{background:#f6f6f6;padding:0.5em;max-height:40em;overflow:auto}")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{css}</style></head><body><h1>{html.escape(title)}</h1>"]
    for name, notes, obj in sections:
        parts.append(f"<h2 id='{html.escape(name)}'>{html.escape(name)}</h2>")
        parts += [f"<p class='note'>{html.escape(n)}</p>" for n in notes]
        if isinstance(obj, pd.DataFrame):
            parts.append(obj.to_html(index=False, na_rep="", float_format=lambda v: f"{v:.4g}", border=0) if len(obj)
                         else "<p><em>empty table (no rows)</em></p>")
        else:
            parts.append(f"<pre>{html.escape(json.dumps(obj, indent=1)[:200000])}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)
