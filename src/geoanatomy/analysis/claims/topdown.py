"""The top-down claim: layers reach their floors output side first (top_down_summary.json).
"""
from __future__ import annotations

from ..stats import binomial_p, clopper_pearson, upper_bound
from .base import BINOMIAL, RANKME, Claim, ClaimRow, k_of_n, summary_level


def top_down_propagation(jsons: dict) -> list[ClaimRow]:
    """One vote per cell (the sign of the median Kendall tau over its determined seeds)."""
    td = (jsons.get("top_down_summary.json") or {}).get("measures") or {}
    out, level = [], summary_level(jsons)
    for m, variant in RANKME.items():
        e = td.get(m) or {}
        c = e.get("cells_all") or {}
        k, n = k_of_n(c.get("top_down"))
        a = e.get("all") or {}
        out.append(ClaimRow("top-down propagation", m, variant, "share of determined cells whose floors run top-down",
                            k / n if n else None, clopper_pearson(k, n, level), n, int(a.get("runs") or 0),
                            "exact one-sided sign test over cells against 1/2 (tied and undetermined cells left out)",
                            0.5, binomial_p(k, n, "greater"), "top-down",
                            f"{k}/{n} cells top-down (runs: {a.get('top_down')} top-down, tied {a.get('tied_tau0')},"
                            f" undetermined {a.get('undetermined')}); seeds per cell {c.get('seeds_per_cell')}",
                            ci_level=level, bound=upper_bound(k, n)))
    return out


CLAIMS = [
    Claim("top-down propagation", "per RankMe variant",
          "layers reach their floors output side first (top-down) more often than input side first",
          "share of determined cells (the sign of the median tau over its seeds) that run top-down; exact"
          " one-sided sign test over cells, Clopper-Pearson interval",
          "1/2 (tied and undetermined cells left out)", "top_down_summary.json", "summary", top_down_propagation,
          design=BINOMIAL, figure="topdown", effect_of_interest=0.5,
          effect_reason="one half: the claim is 'more often than input side first'; a share below a half is what"
                        " it excludes"),
]
