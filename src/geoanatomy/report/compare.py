"""Compare two verdict.csv files word by word (one grid under two float paths, a seed half
against the full grid, a confirmation against the exploration).

    geoanatomy report compare A/verdict.csv B/verdict.csv
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..analysis.tables import read_table

KEY = ["claim", "measure", "variant", "event", "statistic"]


def machines(verdict_path) -> str | None:
    """The machines line its manifest records ("machine: FINGERPRINT (cpu, instruction set,
    BLAS) xN", or "machines: MIXED ..."), None where the manifest records none."""
    meta = Path(str(verdict_path) + "-metadata.json")
    if not meta.is_file():
        return None
    for note in json.loads(meta.read_text()).get("notes") or []:
        m = re.search(r"(machines?: .*?)(?:; settings:|; \d+ runs read from|$)", str(note))
        if m:
            return m.group(1)
    return None


def _fingerprints(line: str | None) -> set:
    return set(re.findall(r"\b([0-9a-f]{12}) \(", line or ""))


def compare_verdicts(a_path, b_path, names=("A", "B")) -> str:
    """Both word counts, the rows whose word differs, and how many of those A marked unstable;
    first, when the two grids' machine fingerprints differ, that they ran on other float paths."""
    a, b = read_table(a_path), read_table(b_path)
    for df in (a, b):
        for k in KEY:
            df[k] = df[k].fillna("").astype(str)
    na, nb = names
    m = a.merge(b, on=KEY, how="outer", suffixes=(f"_{na}", f"_{nb}"), indicator=True)
    both = m[m["_merge"] == "both"]
    d = both[both[f"verdict_{na}"] != both[f"verdict_{nb}"]]
    ma, mb = machines(a_path), machines(b_path)
    out = []
    if _fingerprints(ma) != _fingerprints(mb):
        out += [f"machines differ: {na} {ma or 'not recorded'}; {nb} {mb or 'not recorded'}",
                "  another CPU's float path trains other last bits, which on a plateau act like another seed:"
                " the runs' numbers differ in their last digits and some hard runs' events move, so a few "
                "words can change with no change of code or config"]
    out += [f"rows {len(a)} ({na}), {len(b)} ({nb}); matched {len(both)}",
           f"{na}: {a['verdict'].value_counts().to_dict()}", f"{nb}: {b['verdict'].value_counts().to_dict()}",
           f"words differ: {len(d)}"]
    out += [f"- {r['claim']} | {r['measure']} | {r['event']} : {r[f'verdict_{na}']} -> {r[f'verdict_{nb}']}"
            f" ({na} stable {r[f'stable_{na}']})" for r in d.to_dict("records")]
    unstable = int((d[f"stable_{na}"].astype(str).str.lower() == "false").sum())
    out.append(f"differing rows marked unstable in {na}: {unstable} of {len(d)}")
    return "\n".join(out)
