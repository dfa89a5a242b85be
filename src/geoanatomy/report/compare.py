"""Compare two verdict.csv files word by word (one grid under two float paths, a seed half
against the full grid, a confirmation against the exploration).

    geoanatomy report compare A/verdict.csv B/verdict.csv
"""
from __future__ import annotations

from ..analysis.tables import read_table

KEY = ["claim", "measure", "variant", "event", "statistic"]


def compare_verdicts(a_path, b_path, names=("A", "B")) -> str:
    """Both word counts, the rows whose word differs, and how many of those A marked unstable."""
    a, b = read_table(a_path), read_table(b_path)
    for df in (a, b):
        for k in KEY:
            df[k] = df[k].fillna("").astype(str)
    na, nb = names
    m = a.merge(b, on=KEY, how="outer", suffixes=(f"_{na}", f"_{nb}"), indicator=True)
    both = m[m["_merge"] == "both"]
    d = both[both[f"verdict_{na}"] != both[f"verdict_{nb}"]]
    out = [f"rows {len(a)} ({na}), {len(b)} ({nb}); matched {len(both)}",
           f"{na}: {a['verdict'].value_counts().to_dict()}", f"{nb}: {b['verdict'].value_counts().to_dict()}",
           f"words differ: {len(d)}"]
    out += [f"- {r['claim']} | {r['measure']} | {r['event']} : {r[f'verdict_{na}']} -> {r[f'verdict_{nb}']}"
            f" ({na} stable {r[f'stable_{na}']})" for r in d.to_dict("records")]
    unstable = int((d[f"stable_{na}"].astype(str).str.lower() == "false").sum())
    out.append(f"differing rows marked unstable in {na}: {unstable} of {len(d)}")
    return "\n".join(out)
