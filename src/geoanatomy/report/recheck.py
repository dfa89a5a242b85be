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
the docs-data test holds every recomputed summary file to it.
"""
from __future__ import annotations

import json
import math
import re
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
