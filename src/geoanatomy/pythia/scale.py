"""Cross-size comparison of the Pythia runs: do per-benchmark patterns hold across scale?

For every pair of models (e.g. 160m vs 410m vs 2.8b) and every per-benchmark quantity
(headline-layer RankMe floor value and floor step, acquisition step, final accuracy),
the Spearman rank correlation over the benchmarks both models have a finite value for,
with a two-sided permutation p-value from the project's one Spearman implementation
(``geoanatomy.analysis.stats.spearman_exact``):

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

from ..analysis.stats import EXACT_MAX_N
from ..analysis.stats import spearman_exact as _spearman

QUANTITIES = {  # name -> (where in precursor.json, description)
    "rankme_floor": (("measures", "rankme", "floor"), "RankMe floor value (headline layer, last prompt token)"),
    "rankme_floor_step": (("measures", "rankme", "floor_step"), "training step of the RankMe floor"),
    "acquisition_step": (("acquisition_step",), "first step of sustained chance-normalised accuracy >= threshold"),
    "final_accuracy": (("final_accuracy",), "accuracy at the last measured revision"),
}


def spearman_exact(x, y, n_resamples: int = 100_000, seed: int = 0) -> dict:
    """Spearman rho of x, y with an exact (n <= 10) or Monte-Carlo permutation p-value
    (``geoanatomy.analysis.stats.spearman_exact``), in this branch's record format:
    {n, rho, p_value, method, n_permutations, test}."""
    if len(x) != len(y):
        raise ValueError("x and y differ in length")
    r = _spearman(x, y, EXACT_MAX_N, n_resamples, seed)
    return {"n": r["n"], "rho": r["rho"], "p_value": r["p"],
            "method": r["method"] or f"not computed: {r['reason']}", "n_permutations": r["n_permutations"],
            "test": r["test"]}


def _get(d: dict, path: tuple):
    for k in path:
        if d is None:
            return None
        d = d.get(k)
    return d


def scale_summary(models: list[dict], benchmarks: list[str]) -> dict:
    """models: [{"name", "n_params", "precursors": {benchmark: precursor dict}}] ->
    the pythia_scale.json dict (per-model table and every pair's correlations)."""
    models = sorted(models, key=lambda m: m["n_params"])
    table = {m["name"]: {b: {q: _get(m["precursors"].get(b) or {}, path) for q, (path, _) in QUANTITIES.items()}
                         for b in benchmarks} for m in models}
    pairs = []
    for a, b in itertools.combinations(models, 2):
        for q, (_, desc) in QUANTITIES.items():
            keep = [bn for bn in benchmarks
                    if table[a["name"]][bn][q] is not None and table[b["name"]][bn][q] is not None]
            res = spearman_exact([table[a["name"]][bn][q] for bn in keep], [table[b["name"]][bn][q] for bn in keep])
            pairs.append({"a": a["name"], "b": b["name"], "quantity": q, "benchmarks": keep, **res})
    return {
        "kind": "pythia_scale",
        "models": [{"name": m["name"], "n_params": m["n_params"], "source": m.get("source")} for m in models],
        "benchmarks": benchmarks,
        "quantities": {q: desc for q, (_, desc) in QUANTITIES.items()},
        "method": "Spearman rho over benchmarks with a value in both models; p-value two-sided, exact "
                  f"permutation for n <= {EXACT_MAX_N}, Monte-Carlo above (see geoanatomy.pythia.scale)",
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
