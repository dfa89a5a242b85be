"""Writing summary tables: CSV with '#' provenance header lines, and tables.html.

Every CSV starts with comment lines (``# ...``) saying what it holds, how it
was computed and from how many runs; read it back with
``pandas.read_csv(path, comment="#")`` or ``read_table`` below.
"""
from __future__ import annotations

import html
import io
import json
from pathlib import Path

import pandas as pd

from ..files import atomic_write_text


def _integral_to_int(df: pd.DataFrame) -> pd.DataFrame:
    """Float columns holding only whole numbers (steps, counts, n_params with gaps) -> nullable Int64."""
    df = df.copy()
    for c in df.columns:
        if pd.api.types.is_float_dtype(df[c]):
            v = df[c].dropna()
            if len(v) and (v == v.round()).all() and v.abs().max() < 2 ** 53:
                df[c] = df[c].astype("Int64")
    return df


def csv_text(df: pd.DataFrame, title: str, notes: list[str]) -> str:
    lines = [f"# {title}"] + [f"# {n}" for n in notes]
    df = _integral_to_int(df)
    buf = io.StringIO()
    df.to_csv(buf, index=False, float_format="%.6g", lineterminator="\n")
    return "\n".join(lines) + "\n" + buf.getvalue()


def write_csv(df: pd.DataFrame, path, title: str, notes: list[str]) -> None:
    for n in notes:
        if "\n" in n:
            raise ValueError(f"note for {path} spans lines: {n!r}")
    atomic_write_text(path, csv_text(df, title, notes))


def read_table(path) -> pd.DataFrame:
    """A summary CSV without its '#' header lines (an empty frame when it has no columns: a
    table with no rows, e.g. the single-task tables of a grid of mixture blocks only)."""
    try:
        return pd.read_csv(path, comment="#")
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def header_lines(path) -> list[str]:
    out = []
    for line in Path(path).read_text().splitlines():
        if not line.startswith("#"):
            break
        out.append(line[1:].strip())
    return out


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
