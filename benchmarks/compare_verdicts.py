"""Compare two verdict.csv files word by word (e.g. one grid under two float paths).

    python benchmarks/compare_verdicts.py A/verdict.csv B/verdict.csv

Prints both word counts, the rows whose word differs and whether A marked them unstable.
"""
import sys
import pandas as pd
from geoanatomy.analysis.tables import read_table
a = read_table(sys.argv[1]); b = read_table(sys.argv[2])
key = ["claim", "measure", "variant", "event", "statistic"]
for df in (a, b):
    for k in key: df[k] = df[k].fillna("").astype(str)
m = a.merge(b, on=key, how="outer", suffixes=("_unpinned", "_pinned"), indicator=True)
print("rows", len(a), len(b), "matched", (m["_merge"] == "both").sum())
print("unpinned", a["verdict"].value_counts().to_dict()); print("pinned", b["verdict"].value_counts().to_dict())
d = m[(m["_merge"] == "both") & (m["verdict_unpinned"] != m["verdict_pinned"])]
print("words differ:", len(d))
for r in d.itertuples():
    print(f"- {r.claim} | {r.measure} | {r.event} : {r.verdict_unpinned} -> {r.verdict_pinned} (unpinned stable {r.stable_unpinned})")
st = m[m["_merge"] == "both"]
print("differing rows marked unstable in the unpinned run:", int((d["stable_unpinned"].astype(str).str.lower() == "false").sum()), "of", len(d))
