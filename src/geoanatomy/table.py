"""The per-run long table: ``metrics.csv``, ``measures.csv``, ``probes.csv`` (torch-free).

One row per checkpoint x measure x layer x position x variant::

    run, step, measure, layer, layer_index, position, variant, n_samples, value, settings

``layer_index`` is the depth of ``layer`` (embed = 0 .. ln_final = L + 1; -1 for
behaviour and all-parameter measures); ``settings`` is a JSON object (hyperparameters and
diagnostics of that value). Floats are written with 10 significant digits, NaN as
``nan``. Every stage writes it with ``write_table`` and every reader reads it with
``read_table``; ``curve`` takes one curve out of it.

The last line is an end marker, ``# end of table: N rows, sha256 H`` (H = SHA-256 of all
the bytes before that line), so a table cut anywhere, even at a line boundary, is
detected when it is read. Other tools read the file with ``pandas.read_csv(path,
comment="#")``.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from pathlib import Path

import numpy as np

COLUMNS = ["run", "step", "measure", "layer", "layer_index", "position", "variant", "n_samples",
           "value", "settings"]


_END = re.compile(r"^# end of table: (\d+) rows, sha256 ([0-9a-f]{64})$")


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
    body = buf.getvalue()
    return body + f"# end of table: {len(rows)} rows, sha256 {hashlib.sha256(body.encode()).hexdigest()}\n"


def write_table(path: str | Path, rows: list[dict]) -> None:
    """Write ``rows`` to ``path`` atomically."""
    from .files import atomic_write_text
    atomic_write_text(path, to_csv(rows))


def read_table(path: str | Path):
    """A per-run table as a pandas DataFrame (``settings`` stays a JSON string).

    Raises TableError naming the file when it cannot be read, is incomplete (no end marker,
    or the bytes or the row count disagree with it), cannot be parsed or lacks a column."""
    import pandas as pd
    p = Path(path)
    fix = f"recompute it with `geoanatomy clean-run {p.parent}` and rerun snakemake"
    try:
        data = p.read_bytes()
    except OSError as e:
        raise TableError(f"table {p} cannot be read ({e.strerror or e}); {fix}") from e
    body, _, last = data.rstrip(b"\n").rpartition(b"\n")
    m = _END.match(last.decode("utf-8", "replace"))
    if m is None:
        raise TableError(f"table {p} is incomplete: its end marker is missing (the file was cut or "
                         f"not written by geoanatomy); {fix}")
    body += b"\n"
    if hashlib.sha256(body).hexdigest() != m.group(2):
        raise TableError(f"table {p} is damaged: its content does not match the checksum in its end "
                         f"marker; {fix}")
    try:
        df = pd.read_csv(io.BytesIO(body), keep_default_na=False, na_values=["nan"],
                         dtype={"layer": str, "position": str, "variant": str})
    except Exception as e:  # noqa: BLE001 - any parse failure is reported with the file name
        raise TableError(f"table {p} is unreadable ({e}); {fix}") from e
    missing = set(COLUMNS) - set(df.columns)
    if missing:
        raise TableError(f"table {p} lacks columns {sorted(missing)}; {fix}")
    if len(df) != int(m.group(1)):
        raise TableError(f"table {p} has {len(df)} rows, its end marker says {m.group(1)}; {fix}")
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
