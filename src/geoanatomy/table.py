"""The per-run long table: ``metrics.csv``, ``measures.csv``, ``probes.csv`` (torch-free).

One row per checkpoint x measure x layer x position x variant::

    run, step, measure, layer, layer_index, position, variant, n_samples, value, settings

``layer_index`` is the depth of ``layer`` (embed = 0 .. ln_final = L + 1; -1 for
behaviour and all-parameter measures); ``settings`` is a JSON object (hyperparameters and
diagnostics of that value). Floats are written with 10 significant digits, NaN as
``nan``. Every stage writes it with ``write_table`` and every reader reads it with
``read_table``; ``curve`` takes one curve out of it.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

COLUMNS = ["run", "step", "measure", "layer", "layer_index", "position", "variant", "n_samples",
           "value", "settings"]


class TableError(RuntimeError):
    """A per-run table is unreadable or inconsistent; the message names the file and the fix."""


def _fmt(v) -> str:
    if isinstance(v, float):
        return "nan" if v != v else f"{v:.10g}"
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return str(v)


def to_csv(rows: list[dict]) -> str:
    """The CSV text of ``rows`` (dicts keyed by ``COLUMNS``; missing keys are empty)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _fmt(r.get(k, "")) for k in COLUMNS})
    return buf.getvalue()


def write_table(path: str | Path, rows: list[dict]) -> None:
    """Write ``rows`` to ``path`` atomically."""
    from .files import atomic_write_text
    atomic_write_text(path, to_csv(rows))


def read_table(path: str | Path):
    """A per-run table as a pandas DataFrame (``settings`` stays a JSON string).

    Raises TableError naming the file when it cannot be parsed or lacks a column."""
    import pandas as pd
    p = Path(path)
    fix = f"recompute it with `geoanatomy clean-run {p.parent}` and rerun snakemake"
    try:
        df = pd.read_csv(p, keep_default_na=False, na_values=["nan"],
                         dtype={"layer": str, "position": str, "variant": str})
    except Exception as e:  # noqa: BLE001 - any parse failure is reported with the file name
        raise TableError(f"table {p} is unreadable ({e}); {fix}") from e
    missing = set(COLUMNS) - set(df.columns)
    if missing:
        raise TableError(f"table {p} lacks columns {sorted(missing)}; {fix}")
    return df


def select(df, measure: str, **match):
    """The rows of ``measure`` whose columns equal ``match`` (e.g. layer="ln_final"), by step."""
    m = df["measure"] == measure
    for k, v in match.items():
        m &= df[k] == v
    return df[m].sort_values("step", kind="stable")


def curve(df, measure: str, **match) -> tuple[np.ndarray, np.ndarray]:
    """One curve: (steps (K,) int64, values (K,) float64) sorted by step."""
    sub = select(df, measure, **match)
    return sub["step"].to_numpy(np.int64), sub["value"].to_numpy(np.float64)
