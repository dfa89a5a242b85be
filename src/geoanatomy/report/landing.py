"""What the landing page of ``snakemake --report`` shows first: the headline figure and the
verdict's counts, read from a finished summary folder (``landing``). The Snakefile calls it
when it is asked for a report and hands the result to ``workflow/report/workflow.rst`` as
``config["report_landing"]`` (the page's template sees the config only).

Standard library only: the Snakefile imports this module at parse time.
"""
from __future__ import annotations

import base64
import csv
from collections import Counter
from pathlib import Path

WORDS = ("reproduced", "not reproduced", "inconclusive", "descriptive")


def landing(summary) -> dict:
    """``{"counts": "8 reproduced, 21 not reproduced, ...", "rows": N, "headline_png": base64 in
    indented lines or "", "primary": the primary row's word}`` of a summary folder; empty strings where a file
    is not there yet (a report made before the summary ran)."""
    s = Path(summary)
    out = {"counts": "", "rows": 0, "headline_png": "", "primary": ""}
    v = s / "verdict.csv"
    if v.is_file():
        with v.open(newline="") as f:
            rows = list(csv.DictReader(f))
        c = Counter(r.get("verdict", "") for r in rows)
        out["rows"] = len(rows)
        out["counts"] = ", ".join(f"{c.get(w, 0)} {w}" for w in WORDS)
        prim = [r for r in rows if str(r.get("family", "")).endswith("(primary)")]
        out["primary"] = prim[0].get("verdict", "") if prim else ""
    png = s / "headline.png"
    if png.is_file():
        # in lines of 76 characters, indented for the page's raw-html block: docutils refuses a
        # line over 10,000 characters, and a data URI's base64 may hold white space
        b = base64.b64encode(png.read_bytes()).decode()
        out["headline_png"] = "\n      ".join(b[i:i + 76] for i in range(0, len(b), 76))
    return out
