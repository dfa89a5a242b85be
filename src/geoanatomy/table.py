"""The per-run long table: ``metrics.csv``, ``measures.csv``, ``probes.csv`` (torch-free).

One row per checkpoint x measure x layer x position x variant::

    run, step, measure, layer, layer_index, position, variant, n_samples, value, settings, checkpoint

``layer_index`` is the depth of ``layer`` (embed = 0 .. ln_final = L + 1; -1 for
behaviour and all-parameter measures); ``settings`` is a JSON object (hyperparameters and
diagnostics of that value); ``checkpoint`` is the first 16 hex digits of the content sha256
of the weights the row was measured on (``checkpoints.content_sha256``, as train.json's
``checkpoint_sha256`` records it; empty where there is no checkpoint file, e.g. the
monitor's rows), so a row whose step label was changed no longer matches train.json. Floats
are written with 10 significant digits and always a decimal point or exponent, NaN as ``NaN``
(``manifest.number_text``: pandas, pyarrow, polars and duckdb all type the column as floats;
tables of earlier versions wrote ``nan``, still read), and the manifest records each column's
type. Every stage writes it with
``write_table`` and every reader reads it with ``read_table``; ``curve`` takes one curve out
of it.

The file is plain CSV: ``pandas.read_csv(path)`` and ``pyarrow.csv.read_csv(path)`` read it
without options. Its integrity (row count, SHA-256 of the bytes) is in the manifest beside it,
``metrics.csv-metadata.json`` (``geoanatomy.manifest``), checked by ``read_table``: a table cut
anywhere, even at a line boundary, or edited, is detected when it is read. Tables of the
earlier format (an end-marker last line) are still read and checked.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

COLUMNS = ["run", "step", "measure", "layer", "layer_index", "position", "variant", "n_samples",
           "value", "settings", "checkpoint"]
CHECKPOINT_DIGITS = 16     # hex digits of the content sha256 kept in the ``checkpoint`` column
TITLE = {"metrics.csv": "behaviour and RankMe at every checkpoint", "measures.csv":
         "gradient ranks, Hessian and LLC at fixed checkpoints", "probes.csv": "linear probes per layer"}


class TableError(RuntimeError):
    """A per-run table is unreadable or inconsistent; the message names the file and the fix."""


TYPES = {"run": "string", "step": "integer", "measure": "string", "layer": "string", "layer_index": "integer",
         "position": "string", "variant": "string", "n_samples": "integer", "value": "number", "settings": "string",
         "checkpoint": "string"}       # CSVW datatypes, recorded in the manifest


def _fmt(v) -> str:
    if isinstance(v, float):
        from .manifest import number_text
        return number_text(v, 10)
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


def stamp_checkpoints(rows: list[dict], hashes: dict) -> list[dict]:
    """Set each row's ``checkpoint`` from ``hashes`` ({str(step): content sha256}, train.json's
    ``checkpoint_sha256``); rows of a step without a hash are left empty."""
    for r in rows:
        h = hashes.get(str(int(r["step"])))
        if h:
            r["checkpoint"] = str(h)[:CHECKPOINT_DIGITS]
    return rows


def write_table(path: str | Path, rows: list[dict]) -> None:
    """Write ``rows`` to ``path`` and its manifest, atomically (module doc)."""
    from .manifest import write_with_manifest
    p = Path(path)
    write_with_manifest(p, to_csv(rows), title=f"geoanatomy per-run table {p.name}: "
                        f"{TITLE.get(p.name, 'long table')}", columns=COLUMNS, rows=len(rows), types=TYPES,
                        notes=["one row per checkpoint x measure x layer x position x variant; settings: JSON; "
                               "checkpoint: first 16 hex digits of the weights' content sha256"])


def read_table(path: str | Path, checkpoints: dict | None = None):
    """A per-run table as a pandas DataFrame (``settings`` stays a JSON string).

    Raises TableError naming the file when it cannot be read, does not match its manifest
    (bytes or row count), cannot be parsed or lacks a column. ``checkpoints`` (train.json's
    ``checkpoint_sha256``): every row's ``checkpoint`` must be the hash of its step's weights,
    so a row whose step label was changed is refused."""
    import pandas as pd

    from .manifest import check_rows, read_checked
    p = Path(path)
    fix = f"recompute it with `geoanatomy clean-run {p.parent}` and rerun snakemake"
    body, meta = read_checked(p, fix, TableError)
    try:
        df = pd.read_csv(io.BytesIO(body), keep_default_na=False, na_values=["NaN", "nan"],
                         dtype={"layer": str, "position": str, "variant": str, "checkpoint": str})
    except Exception as e:  # noqa: BLE001 - any parse failure is reported with the file name
        raise TableError(f"table {p} is unreadable ({e}); {fix}") from e
    if "checkpoint" not in df.columns:          # the earlier format had no checkpoint column
        df["checkpoint"] = ""
    missing = set(COLUMNS) - set(df.columns)
    if missing:
        raise TableError(f"table {p} lacks columns {sorted(missing)}; {fix}")
    check_rows(p, len(df), meta, fix, TableError)
    if checkpoints:
        check_checkpoint_column(p, df, checkpoints, fix)
    if meta.get("legacy"):              # read without a manifest (GEOANATOMY_LEGACY_TABLES=1): outputs say so
        df.attrs["legacy"] = f"{p.name}: {meta['legacy']} read without a manifest"
    return df


def check_checkpoint_column(p: Path, df, checkpoints: dict, fix: str) -> None:
    """Every stamped row's ``checkpoint`` equals its step's hash in ``checkpoints``."""
    stamped = df[df["checkpoint"] != ""]
    if not len(stamped):
        return
    want = stamped["step"].map(lambda s: str(checkpoints.get(str(int(s)), ""))[:CHECKPOINT_DIGITS])
    bad = stamped[want.to_numpy() != stamped["checkpoint"].to_numpy()]
    if len(bad):
        r = bad.iloc[0]
        owner = [s for s, h in checkpoints.items() if str(h)[:CHECKPOINT_DIGITS] == r["checkpoint"]]
        where = f"the weights of step {owner[0]}" if owner else "weights train.json does not list"
        raise TableError(f"table {p}: {len(bad)} rows are labelled with a step whose weights they were not "
                         f"measured on, e.g. step {int(r['step'])} {r['measure']} {r['layer']} holds a value of "
                         f"{where} (its checkpoint column {r['checkpoint']}); step labels were changed; {fix}")


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
