"""What a recheck of committed numbers promises on another machine, and the one comparison that
tests it.

A summary recomputed from the same committed runs on another CPU takes another floating-point
path (MKL and numpy pick kernels by instruction set: AVX-512 on one machine, AVX2 on another),
so its files differ from the committed ones in the last digits of some numbers (seen: a sum of
squares 0.04553204540378021 on an Intel AVX-512 machine, ...18 on an AMD AVX2 one). Byte
equality holds on one machine only. The promise on any x86-64 CPU:

* every word, name, label, count and every other piece of text identical: the files agree
  character for character once each number is taken out;
* every number equal to a relative tolerance of ``REL`` (1e-9; and within ``ABS``, 1e-12, of
  zero): well above the float path's last-digit noise (relative 1e-15 to 1e-13 after the
  summary's sums and bootstraps), far below the three to four digits any page shows;
* a manifest's ``sha256`` (the digest of its table's bytes) is the one thing left out: it
  differs whenever one digit of the table does, and the table itself is compared as above.

``differences(a, b)`` lists where two files break that promise (empty when they keep it);
``recompute(data, out)`` summarises a committed snapshot's runs again (every part but the power
simulation, whose verdict_power.csv is taken as committed: it alone takes minutes);
``recheck(data)`` does both. The docs-data test holds every committed snapshot to it, and a
code-only re-freeze (``refreeze_shown``) is accepted only when every snapshot keeps it under
the re-fingerprinted rules: "code only" is shown, not declared.
"""
from __future__ import annotations

import contextlib
import json
import math
import re
import shutil
import tempfile
from pathlib import Path

REL = 1e-9
ABS = 1e-12
# a number as the summary writes one (repr floats, integers, exponents, nan and inf)
_NUMBER = re.compile(r"(?<![A-Za-z0-9_])-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![A-Za-z_])"
                     r"|(?<![A-Za-z_])-?(?:nan|NaN|inf|Infinity)(?![A-Za-z_])")


def _numbers(text: str) -> tuple[str, list[str]]:
    """The text with every number replaced by a placeholder, and the numbers in order."""
    nums: list[str] = []

    def take(m):
        nums.append(m.group(0))
        return "\x00"
    return _NUMBER.sub(take, text), nums


def _close(x: str, y: str, rel: float, abs_: float) -> bool:
    if x == y:
        return True
    try:
        a, b = float(x), float(y)
    except ValueError:
        return False
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def text_differences(a: str, b: str, rel: float = REL, abs_: float = ABS, where: str = "") -> list[str]:
    """Where texts ``a`` and ``b`` break the promise (module doc), line by line."""
    la, lb = a.splitlines(), b.splitlines()
    if len(la) != len(lb):
        return [f"{where}: {len(la)} lines against {len(lb)}"]
    out = []
    for i, (x, y) in enumerate(zip(la, lb), 1):
        if x == y:
            continue
        sx, nx = _numbers(x)
        sy, ny = _numbers(y)
        if sx != sy or len(nx) != len(ny):
            out.append(f"{where}:{i}: the text differs: {x[:160]!r} against {y[:160]!r}")
            continue
        bad = [(p, q) for p, q in zip(nx, ny) if not _close(p, q, rel, abs_)]
        if bad:
            out.append(f"{where}:{i}: {len(bad)} number(s) differ beyond relative {rel:g}: "
                       + ", ".join(f"{p} against {q}" for p, q in bad[:3]))
    return out


def _without_digest(text: str) -> str:
    d = json.loads(text)
    if isinstance(d, dict):
        d.pop("sha256", None)
    return json.dumps(d, indent=1, sort_keys=True)


def differences(a, b, rel: float = REL, abs_: float = ABS) -> list[str]:
    """Where files ``a`` and ``b`` break the recheck's promise (module doc); [] when they keep
    it. A table's manifest (``*-metadata.json``) is compared without its ``sha256``."""
    a, b = Path(a), Path(b)
    ta, tb = a.read_text(), b.read_text()
    if ta == tb:
        return []
    if a.name.endswith("-metadata.json"):
        ta, tb = _without_digest(ta), _without_digest(tb)
    return text_differences(ta, tb, rel, abs_, where=b.name)


# the summary parts a recheck recomputes, in order (the verdict reads the others' JSON files)
RECOMPUTED = ("tables", "scale", "prediction", "benchmark", "verdict")
TAKEN_AS_COMMITTED = ("verdict_power.csv", "verdict_power.csv-metadata.json")


def snapshot_settings(data) -> dict:
    """The ``summary:`` settings a snapshot's summary records (floor_summary.json)."""
    return json.loads((Path(data) / "summary" / "floor_summary.json").read_text())["settings"]


def recompute(data, out, settings: dict | None = None) -> list[str]:
    """Summarise the committed runs of snapshot folder ``data`` again into ``out`` with the
    summary settings it records (``settings`` overrides some); the files compared (tables,
    statistics and their manifests; figures left out)."""
    from ..analysis.parts import BY_NAME
    from ..analysis.settings import summary_settings
    from ..analysis.summarize import run as summarize_part
    data, out = Path(data), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for f in TAKEN_AS_COMMITTED:
        shutil.copy2(data / "summary" / f, out / f)
    pres = sorted(str(p) for p in data.glob("*/precursor.json"))
    curves = sorted(str(p) for p in data.glob("*/signal_curves.csv"))
    st = summary_settings({**snapshot_settings(data), **(settings or {})})
    for part in RECOMPUTED:
        summarize_part(part, pres, out, st, log=lambda *a: None, curves=curves)
    files = [f for part in RECOMPUTED for f in BY_NAME[part].files() if not f.endswith(".png")]
    return files + [f + "-metadata.json" for f in files if f.endswith(".csv")]


def recheck(data, settings: dict | None = None) -> list[str]:
    """Where a recomputation of snapshot ``data`` breaks the promise (module doc); [] when it
    keeps it. Run from the repository root (the settings name files relative to it)."""
    data = Path(data)
    with tempfile.TemporaryDirectory() as tmp:
        files = recompute(data, Path(tmp) / "summary", settings)
        return [d for f in files for d in differences(data / "summary" / f, Path(tmp) / "summary" / f)]


def refreeze_shown(cfg: dict, path, reason: str, snapshots) -> dict:
    """A code-only re-freeze (``analysis.freeze.refrozen``) written only when it is shown: every
    committed snapshot in ``snapshots`` is summarised again under the re-fingerprinted rules
    (a snapshot that names the frozen file reads the candidate at the same relative path in a
    scratch folder, with the same date) and keeps the recheck's promise, every word, n and p-value included. ValueError
    naming what moved otherwise, and the frozen file is left as it was."""
    from ..analysis.freeze import refrozen
    from ..files import atomic_write_json
    snapshots = [Path(d) for d in snapshots]
    if not snapshots:
        raise ValueError("--code-only must be shown: name the committed snapshots summarised with these rules "
                         "(--snapshot DATA); each is summarised again and must keep every word, n and p-value")
    p = Path(path)
    rec = refrozen(cfg, p, reason)
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        for d in snapshots:
            d = d.resolve()
            named = snapshot_settings(d).get("frozen_rules")
            where = contextlib.nullcontext()
            if named and Path(named).name == p.name and not Path(named).is_absolute():
                # the snapshot names the frozen file by a path relative to the repository: the
                # candidate goes to that path under a scratch folder, which the recheck runs in
                # (every setting the summary records stays as recorded; the real file is untouched)
                cand = Path(tmp) / named
                cand.parent.mkdir(parents=True, exist_ok=True)
                cand.write_text(json.dumps(rec))
                where = contextlib.chdir(tmp)
            with where:
                bad += [f"{d}: {x}" for x in recheck(d)]
    if bad:
        raise ValueError(f"not a code-only change: under the new rules {len(bad)} line(s) of the committed snapshots "
                         "move: " + "; ".join(bad[:5]) + (" ..." if len(bad) > 5 else "")
                         + " (a rule that changes a word is a new exploratory version, not a re-fingerprint)")
    rec["code_changes"][-1]["shown_on"] = [str(d) for d in snapshots]
    atomic_write_json(p, rec)
    return rec
