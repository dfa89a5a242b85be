"""precursor.json's seal and strict reading (torch-free, standard library only).

Every writer of a precursor.json (the events stage, the Pythia branch, the monitor, the
scanner) writes it with ``write_sealed``: the record plus ``content_sha256``, the sha256 of
its canonical JSON (keys sorted, no whitespace, the seal itself left out). A reader
recomputes it (``seal_problem``), so a hand edit is detected like a table's (whose end
marker carries its hash), and the message says how to rebuild the file.

Strict parsing (``loads_strict``): NaN and Infinity, which Python's json module accepts by
default but JSON does not, are refused.
"""
from __future__ import annotations

import hashlib
import json
import os

SEAL_KEY = "content_sha256"


def canonical(d: dict) -> bytes:
    """The canonical JSON bytes of a record without its seal."""
    return json.dumps({k: v for k, v in d.items() if k != SEAL_KEY}, sort_keys=True, separators=(",", ":"),
                      allow_nan=False, ensure_ascii=True).encode()


def seal(d: dict) -> dict:
    """``d`` as written (JSON round trip: numpy scalars become numbers) with its seal."""
    from ..files import _json_default
    plain = json.loads(json.dumps({k: v for k, v in d.items() if k != SEAL_KEY}, allow_nan=False,
                                  default=_json_default))
    plain[SEAL_KEY] = hashlib.sha256(canonical(plain)).hexdigest()
    return plain


def write_sealed(path: str | os.PathLike, d: dict) -> dict:
    """Write ``seal(d)`` to ``path`` atomically; returns the sealed record."""
    from ..files import atomic_write_json
    s = seal(d)
    atomic_write_json(path, s)
    return s


def seal_problem(d: dict) -> str | None:
    """None when ``d`` carries its correct seal; else what is wrong, in words."""
    got = d.get(SEAL_KEY)
    if got is None:
        return (f"it has no {SEAL_KEY} seal (written by hand, by another tool, or by geoanatomy before "
                f"records were sealed)")
    if got != hashlib.sha256(canonical(d)).hexdigest():
        return f"its content does not match its {SEAL_KEY} seal (the file was edited after it was written)"
    return None


LEGACY_ENV = "GEOANATOMY_LEGACY_UNSEALED"    # set to 1 to read records written before they were sealed


def sealed_problem(d: dict) -> str | None:
    """``seal_problem`` for a file the project writes sealed (train.json, precursor.json): a
    missing seal is a problem too (a stripped seal once let a hand edit through), unless the
    documented legacy switch ``GEOANATOMY_LEGACY_UNSEALED=1`` is set for records written before
    they were sealed."""
    if d.get(SEAL_KEY) is None and os.environ.get(LEGACY_ENV) == "1":
        return None
    why = seal_problem(d)
    if why and d.get(SEAL_KEY) is None:
        why += f" (set {LEGACY_ENV}=1 to read a record written before records were sealed)"
    return why


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number (write null for a missing value)")


def loads_strict(text: str):
    """json.loads refusing NaN, Infinity and -Infinity."""
    return json.loads(text, parse_constant=_no_constant)
