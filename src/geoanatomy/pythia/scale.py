"""Cross-size comparison of the Pythia runs: do per-benchmark patterns hold across scale?

For every pair of models (e.g. 160m vs 410m vs 2.8b) and every per-benchmark quantity
(``pythia.events.FAIR_QUANTITIES``: RankMe floor divided by its cap min(N, d), so benchmarks
with 40, 50 and 60 items compare fairly; the floor step; the acquisition step; final
accuracy normalised by chance, (acc - chance) / (1 - chance), since chance runs from 1/2 to
1/7), the Spearman rank correlation over the benchmarks both models have a value for, with
a two-sided permutation p-value from the project's Spearman (``geoanatomy.analysis.stats``).
RankMe quantities are compared *within* last-token strata
(``analysis.stats.spearman_within_strata``): prompts that end on the same token share a
factor that would inflate rho by construction. Otherwise (``pair_correlation``, i.e.
``analysis.stats.spearman_exact``):

    rho  = Pearson correlation of the (average-tie) ranks of x and y
    p    = #{permutations pi of y : |rho(x, pi y)| >= |rho_obs| - 1e-12} / n!

exact over all n! permutations for n <= ``EXACT_MAX_N`` (10; enumerated block-wise, a few MB
of memory, never the whole n! x n array); above that, a seeded Monte-Carlo estimate with
``n_resamples`` random permutations, (1 + #extreme) / (1 + R). scipy's default Spearman
p-value assumes large n (its docs: > 500) and is not used. The smallest exact two-sided p at
n = 6 is 2/720.
"""
from __future__ import annotations

import itertools
import json
from pathlib import Path

from ..analysis.stats import EXACT_MAX_N, spearman_exact, spearman_within_strata
from .events import FAIR_QUANTITIES, fair_quantities

QUANTITIES = {q: (path, desc) for q, (path, _, desc) in FAIR_QUANTITIES.items()}
STRATIFIED = {q for q, (_, strat, _) in FAIR_QUANTITIES.items() if strat}


def pair_correlation(x, y, n_resamples: int = 100_000, seed: int = 0) -> dict:
    """One pair's record in pythia_scale.json: ``analysis.stats.spearman_exact`` (exact for
    n <= 10, else Monte Carlo; the one Spearman of the project) in this file's format:
    {n, rho, p_value, method, n_permutations, test}."""
    if len(x) != len(y):
        raise ValueError("x and y differ in length")
    r = spearman_exact(x, y, EXACT_MAX_N, n_resamples, seed)
    return {"n": r.n, "rho": r.statistic, "p_value": r.p, "method": _method(r), "n_permutations": r.n_permutations,
            "test": r.test}


def _method(r) -> str:
    """A correlation's null in this file's ``method`` (or why there is none)."""
    return r.null or f"not computed: {r.reason}"


def _pair(a: str, b: str, q: str, table: dict, benchmarks: list[str]) -> dict:
    keep = [bn for bn in benchmarks if table[a][bn][q] is not None and table[b][bn][q] is not None]
    x, y = [table[a][bn][q] for bn in keep], [table[b][bn][q] for bn in keep]
    out = {"a": a, "b": b, "quantity": q, "benchmarks": keep}
    if q not in STRATIFIED:
        return {**out, **pair_correlation(x, y)}
    strata = [table[a][bn]["stratum"] if table[a][bn]["stratum"] == table[b][bn]["stratum"]
              else f"{table[a][bn]['stratum']}|{table[b][bn]['stratum']}" for bn in keep]
    r = spearman_within_strata(x, y, strata)
    return {**out, "n": r.n, "rho": r.statistic, "p_value": r.p, "rho_pooled": r.pooled, "strata": r.strata,
            "method": _method(r), "n_permutations": r.n_permutations, "test": r.test}


def scale_summary(models: list[dict], benchmarks: list[str]) -> dict:
    """models: [{"name", "n_params", "precursors": {benchmark: precursor dict}}] ->
    the pythia_scale.json dict (per-model table and every pair's correlations)."""
    models = sorted(models, key=lambda m: m["n_params"])
    table = {}
    for m in models:
        table[m["name"]] = {}
        for bn in benchmarks:
            pre = m["precursors"].get(bn) or {}
            raw = ((pre.get("measures") or {}).get("rankme") or {}).get("floor")
            table[m["name"]][bn] = {**fair_quantities(pre), "rankme_floor": raw}   # raw floor: reference only
    pairs = [_pair(a["name"], b["name"], q, table, benchmarks)
             for a, b in itertools.combinations(models, 2) for q in QUANTITIES]
    return {
        "kind": "pythia_scale",
        "models": [{"name": m["name"], "n_params": m["n_params"], "source": m.get("source")} for m in models],
        "benchmarks": benchmarks,
        "quantities": {q: desc for q, (_, desc) in QUANTITIES.items()},
        "method": "Spearman rho over benchmarks with a value in both models (chance-normalised accuracy, "
                  "RankMe floor / min(N, d); RankMe quantities within last-token strata); p-value two-sided, "
                  f"exact permutation for n <= {EXACT_MAX_N}, Monte-Carlo above (see geoanatomy.pythia.scale)",
        "per_model": table,
        "pairs": pairs,
        "smallest_vs_largest": [p for p in pairs if p["a"] == models[0]["name"] and p["b"] == models[-1]["name"]]
        if len(models) >= 2 else [],
    }


def build_from_results(results_dir: str | Path, names: list[str], benchmarks: list[str]) -> dict:
    """Read results/pythia_<name>/{extract.json, <bench>/precursor.json} for every model."""
    results_dir = Path(results_dir)
    models = []
    for name in names:
        d = results_dir / f"pythia_{name}"
        ex = json.loads((d / "extract.json").read_text())
        pre = {b: json.loads((d / b / "precursor.json").read_text()) for b in benchmarks}
        models.append({"name": name, "n_params": ex["model"]["n_params"], "source": ex["source"], "precursors": pre})
    return scale_summary(models, benchmarks)
