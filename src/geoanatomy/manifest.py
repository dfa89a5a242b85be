"""Every CSV the workflow writes is plain CSV (a header row, then data rows: ``pandas.read_csv``
and ``pyarrow.csv.read_csv`` read it without options); what it is and its integrity live in
a manifest beside it, ``NAME.csv-metadata.json`` (the name the W3C "CSV on the Web" standard
gives a CSV's metadata file, so CSVW tools find it)::

    {"@context": "http://www.w3.org/ns/csvw", "url": "metrics.csv",
     "dc:title": "...", "notes": ["...", ...],           # what the table holds, how it was made
     "rows": 1234, "sha256": "<SHA-256 of the CSV's bytes>",
     "tableSchema": {"columns": [{"name": "run"}, ...]}}

Every reader checks the CSV against its manifest (``read_checked``): a missing manifest, other
bytes (a file cut or edited) or another row count is an error naming the file. The manifest is
written first, then the CSV, each atomically, so a complete CSV always has its manifest.

Tables written before manifests existed are read only when asked for explicitly
(``GEOANATOMY_LEGACY_TABLES=1``), with a warning on every read: a per-run table whose last line
is ``# end of table: N rows, sha256 H`` is checked against that line, a summary table's leading
``# `` lines are its title and notes. Without the variable a table without its manifest is an
error: an edited table with a rewritten end marker passed that path unnoticed.

Standard library only (torch-free).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

CONTEXT = "http://www.w3.org/ns/csvw"
SUFFIX = "-metadata.json"
LEGACY_ENV = "GEOANATOMY_LEGACY_TABLES"     # set to 1 to read tables of the pre-manifest formats
_LEGACY_END = re.compile(r"^# end of table: (\d+) rows, sha256 ([0-9a-f]{64})$")


class ManifestError(RuntimeError):
    """A CSV does not match its manifest (or has none); the message names the file."""


def manifest_path(path: str | Path) -> Path:
    """The manifest of ``path``: ``NAME.csv-metadata.json`` beside it."""
    p = Path(path)
    return p.with_name(p.name + SUFFIX)


def count_rows(data: bytes) -> int:
    """Data rows of CSV bytes (records, quoted newlines counted once), header excluded."""
    import csv
    import io
    n = sum(1 for _ in csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    return max(0, n - 1)


def number_text(v: float, digits: int) -> str:
    """A float as every CSV reader types it (pandas, pyarrow, polars, duckdb): ``NaN``, ``inf``,
    ``-inf``, or ``digits`` significant digits that always carry a decimal point or an exponent,
    so a column of floats that happen to be whole (0.0, 1.0) is not read as integers up to the
    first 0.96 (polars infers a column's type from its first rows)."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    t = f"{v:.{digits}g}"
    return t if any(c in t for c in ".en") else t + ".0"


def write_with_manifest(path: str | Path, text: str, *, title: str, notes: list[str] | None = None,
                        columns: list[str] | None = None, rows: int | None = None,
                        types: dict | None = None) -> None:
    """Write the CSV ``text`` to ``path`` and its manifest beside it (both atomically,
    the manifest first). ``rows``: the data rows (counted from ``text`` when None); ``types``:
    column -> its CSVW datatype ("integer", "number", "boolean", "string"), recorded in the
    manifest's tableSchema so a reader can ask for them."""
    from .files import atomic_write_text
    data = text.encode("utf-8")
    for n in notes or []:
        if "\n" in n:
            raise ValueError(f"note for {path} spans lines: {n!r}")
    meta = {"@context": CONTEXT, "url": Path(path).name, "dc:title": title, "notes": list(notes or []),
            "rows": count_rows(data) if rows is None else int(rows), "sha256": hashlib.sha256(data).hexdigest(),
            "tableSchema": {"columns": [{"name": c, **({"datatype": types[c]} if types and c in types else {})}
                                        for c in (columns or [])]}}
    atomic_write_text(manifest_path(path), json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    atomic_write_text(path, text)


def read_checked(path: str | Path, fix: str, error: type[Exception] = ManifestError) -> tuple[bytes, dict]:
    """(the CSV's bytes, its manifest) after checking the bytes against the manifest's sha256;
    raises ``error`` naming the file and ``fix`` (what to do) when the file cannot be read, has
    no manifest, or its bytes differ. The caller parses the bytes and checks the row count
    with ``check_rows``. A legacy file (module doc) gives its body without the end marker or
    comment lines, and a manifest built from them."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise error(f"table {p} cannot be read ({e.strerror or e}); {fix}") from e
    mp = manifest_path(p)
    if not mp.exists():
        legacy = _legacy(p, data, fix, error) if os.environ.get(LEGACY_ENV) == "1" else None
        if legacy is not None:
            import warnings
            warnings.warn(f"table {p}: read without a manifest ({legacy[1]['legacy']} of an earlier format, "
                          f"{LEGACY_ENV}=1): only its own checksum vouches for it", RuntimeWarning, stacklevel=2)
            return legacy
        raise error(f"table {p} has no manifest {mp.name} beside it (the table was not written by geoanatomy, "
                    f"or its manifest was removed); {fix} (a table of an earlier format is read only with "
                    f"{LEGACY_ENV}=1)")
    try:
        meta = json.loads(mp.read_text(encoding="utf-8"))
        want_sha, want_rows = meta["sha256"], int(meta["rows"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise error(f"manifest {mp} of table {p} is unreadable ({e}); {fix}") from e
    if hashlib.sha256(data).hexdigest() != want_sha:
        raise error(f"table {p} is incomplete or damaged: its bytes do not match the sha256 in its manifest "
                    f"{mp.name} (the file was cut, or edited after it was written); {fix}")
    meta["rows"] = want_rows
    return data, meta


def folder_problems(folder: str | Path) -> list[str]:
    """One message per CSV table of ``folder`` that does not match its manifest (missing, cut,
    edited): what ``snakemake --report`` checks before it bundles a summary."""
    out = []
    for p in sorted(Path(folder).glob("*.csv")):
        try:
            read_checked(p, "rebuild the summary (delete it and run snakemake again)")
        except ManifestError as e:
            out.append(str(e))
    return out


def check_rows(path: str | Path, n: int, meta: dict, fix: str, error: type[Exception] = ManifestError) -> None:
    """The parsed table's ``n`` rows against the manifest's count (the caller parses once)."""
    if int(n) != int(meta["rows"]):
        what = "its end marker" if meta.get("legacy") == "end marker" else "its manifest"
        raise error(f"table {path} has {n} rows, {what} says {meta['rows']}; {fix}")


def _legacy(p: Path, data: bytes, fix: str, error) -> tuple[bytes, dict] | None:
    body, _, last = data.rstrip(b"\n").rpartition(b"\n")
    m = _LEGACY_END.match(last.decode("utf-8", "replace"))
    if m is not None:
        body += b"\n"
        if hashlib.sha256(body).hexdigest() != m.group(2):
            raise error(f"table {p} is damaged: its content does not match the checksum in its end marker; {fix}")
        return body, {"dc:title": p.name, "notes": [], "rows": int(m.group(1)), "legacy": "end marker"}
    if data.startswith(b"# "):                    # a summary table of the comment-header format
        lines = data.split(b"\n")
        head = [ln for ln in lines if ln.startswith(b"#")]
        i = len(head) if all(ln.startswith(b"#") for ln in lines[:len(head)]) else 0
        text = [ln.decode("utf-8")[1:].strip() for ln in lines[:i]]
        rest = b"\n".join(lines[i:])
        return rest, {"dc:title": text[0] if text else p.name, "notes": text[1:], "rows": count_rows(rest),
                      "legacy": "comment header"}
    return None
