"""The verdict rule on known cases, and on simulated populations: null populations are
"reproduced" at most 10% of the time; planted effects of realistic size are found."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geoanatomy.analysis.rates import ROW_COLUMNS
from geoanatomy.analysis.stats import holm
from geoanatomy.analysis.nulls import cluster_bootstrap
from geoanatomy.analysis import verdict
from geoanatomy.analysis.verdict import CLAIMS, VERDICT_COLUMNS, ClaimRow, finish, precursor_claims, word

TASKS = ["copy", "rev", "cmp", "par", "add", "mod", "sort", "mul"]
ST = {"alpha": 0.05, "n_bootstrap": 100, "n_permutations": 500, "seed": 0, "verdict_min_units": 5}


def test_word_rule():
    assert word(0.01, 0.2, 0.5, 10, 0.0) == "reproduced"
    assert word(0.01, -0.1, 0.5, 10, 0.0) == "inconclusive"       # significant, interval reaches the null
    assert word(0.4, -0.3, -0.1, 10, 0.0) == "not reproduced"
    assert word(0.4, -0.3, 0.2, 10, 0.0) == "inconclusive"        # right direction, not shown
    assert word(0.001, 0.5, 0.9, 3, 0.0) == "inconclusive"        # too few units
    assert word(None, None, None, 10, 0.0) == "inconclusive"


def test_holm_adjustment():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5]


def test_cluster_bootstrap_resamples_cells_not_seeds():
    # two cells, ten seeds each: cell A all 1, cell B all 0. Resampling runs as independent
    # would give a narrow interval around 0.5; resampling cells gives the whole [0, 1].
    df = pd.DataFrame({"task": ["a"] * 10 + ["b"] * 10, "level": "L1", "size": "nano",
                       "x": [1.0] * 10 + [0.0] * 10})
    x = df["x"].to_numpy()
    lo, hi = cluster_bootstrap(df, lambda idx: float(x[idx].mean()), 500, 0)
    assert lo == 0.0 and hi == 1.0


def population(rng, planted: bool, sizes=("nano", "micro"), easy_max=150):
    """8 tasks x 3 levels x 2 sizes, one seed: acquisition log-uniform in [20, 3000]; the
    transition is at half the acquisition step (planted) or at half of another run's (null)."""
    rows = []
    cells = [(t, lv, s) for t in TASKS for lv in ("L1", "L2", "L3") for s in sizes]
    t_acq = np.round(10 ** rng.uniform(np.log10(20), np.log10(3000), len(cells)))
    base = t_acq if planted else rng.permutation(t_acq)
    t_tr = np.round(base * 0.5 * rng.uniform(0.7, 1.3, len(cells)))
    for (task, lv, size), a, t in zip(cells, t_acq, t_tr):
        rows.append({"run": f"{task}_{lv}_{size}", "task": task, "level": lv, "size": size, "family": "toy",
                     "n_params": 1, "steps": 5000, "difficulty": "easy" if a <= easy_max else "hard",
                     "acquired": True, "diverged": False, "control": "", "easy_max_step": easy_max,
                     "min_gap_frac": 0.25, "acquisition_step": a, "measure": "rankme", "kind": "geometric",
                     "layer": "ln_final", "position": "first", "variant": "uncentred", "direction": "collapse",
                     "transition": "floor", "transition_step": t, "recovery_step": t, "precursor": None,
                     "gap_steps": a - t, "transitioned": True})
    return pd.DataFrame(rows, columns=ROW_COLUMNS)


def _verdicts(df):
    v = finish(precursor_claims(df, ST), ST)
    return dict(zip(v["claim"], v["verdict"]))


@pytest.mark.slow
def test_null_populations_rarely_reproduced():
    rng = np.random.default_rng(0)
    counts = {"precursor on hard runs": 0, "precursor specific to hard runs": 0}
    for _ in range(200):
        v = _verdicts(population(rng, planted=False))
        for c in counts:
            counts[c] += v.get(c) == "reproduced"
    assert counts["precursor on hard runs"] <= 20, counts
    assert counts["precursor specific to hard runs"] <= 20, counts


@pytest.mark.slow
def test_planted_lead_is_reproduced():
    rng = np.random.default_rng(1)
    hits = sum(_verdicts(population(rng, planted=True)).get("precursor on hard runs") == "reproduced"
               for _ in range(10))
    assert hits >= 9


def test_json_claims_follow_the_rule():
    from geoanatomy.analysis.verdict import json_claims
    jsons = {
        "floor_summary.json": {"measures": {"rankme": {"all": {"n_cells": 24, "n_runs": 24, "p_task": 0.001,
                                                                 "omega2_task": 0.6, "omega2_size": 0.1}},
                                            "rankme_centred": {"all": {"n_cells": 24, "n_runs": 24, "p_task": 0.4,
                                                                       "omega2_task": 0.0, "omega2_size": 0.2}}}},
        "top_down_summary.json": {"measures": {"rankme": {"all": {"top_down": "11/12", "n_determined": 12, "runs": 16}}}},
        "scale_invariance.json": {"families": {"toy": {"floors": {"rankme": {"by_level": {"L3": {
            "smallest_vs_largest": {"a": "nano", "b": "micro", "rho": 0.9, "p": 0.004, "n": 8}}}}}}}},
    }
    v = finish(json_claims(jsons, ST), ST)
    got = {(r.claim, r.measure): r.verdict for r in v.itertuples()}
    assert got[("floors task-specific", "rankme")] == "reproduced"
    assert got[("floors task-specific", "rankme_centred")] == "not reproduced"
    assert got[("top-down propagation", "rankme")] == "reproduced"          # 11/12, p = 0.003
    assert got[("top-down propagation", "rankme_centred")] == "inconclusive"  # no data
    assert got[("floors scale-invariant", "rankme")] == "reproduced"        # one-sided p 0.002


def test_rule_text_in_the_csv_header_is_unchanged():
    # verdict.csv's header prints RULE: it is built from WORDS, and must read as it always did
    assert verdict.RULE == (
        "reproduced: Holm-adjusted one-sided p < alpha and the 95% interval above the null value "
        "(the estimate, for statistics without an interval: rank correlations, ANOVA); "
        "not reproduced: adjusted p >= alpha and the estimate at or below the null value; "
        "inconclusive: fewer than n_min units, no test, or neither of the above")
    assert [w for w, _ in verdict.WORDS] == ["reproduced", "not reproduced", "inconclusive"]


def test_claim_rows_have_the_csv_columns():
    r = ClaimRow("acquisition rate", "accuracy", "", "share", 0.75, (0.5, 0.9), 8, 16, "binomial", 0.5, 0.01,
                 "acquisition rate", "6/8 cells")
    d = r.as_dict()
    assert list(d) == VERDICT_COLUMNS
    assert (d["ci95_lo"], d["ci95_hi"], d["protocol"]) == (0.5, 0.9, "single-task")
    assert d["p_holm"] is None and d["verdict"] is None
    assert verdict._row(*r.__dict__.values()) == d            # the positional form analysis.protocols uses


def test_claims_list_orders_the_rows():
    names = [c.name for c in CLAIMS]
    assert len(names) == len(set(names)) and {c.reads for c in CLAIMS} == {"runs", "measure", "summary"}
    # every row belongs to a listed claim; within one view the rows follow CLAIMS
    df = population(np.random.default_rng(2), planted=True)
    df = pd.concat([df, df.assign(measure="rankme_centred", variant="centred")], ignore_index=True)
    rows = precursor_claims(df, ST)
    got = [r["claim"] for r in rows]
    per = [c.name for c in CLAIMS if c.reads == "measure"]
    assert got == per + per                        # two measures, each with hard, easy and recovery data
    assert [r["measure"] for r in rows] == ["rankme"] * 3 + ["rankme_centred"] * 3


def test_docs_claim_table_is_generated_from_the_list(tmp_path):
    docs = Path(__file__).resolve().parents[1] / "docs" / "analysis.md"
    block = verdict.docs_block(docs.read_text())
    assert block == verdict.claims_markdown(), "stale: python -m geoanatomy.analysis.verdict docs/analysis.md"
    for c in CLAIMS:
        assert f"| {c.name} |" in block
    stale = tmp_path / "analysis.md"
    stale.write_text(f"intro\n{verdict.DOCS_BEGIN}\nold table\n{verdict.DOCS_END}\nrest\n")
    assert verdict.write_docs(stale) and not verdict.write_docs(stale)
    text = stale.read_text()
    assert text.startswith("intro\n") and text.endswith("rest\n") and verdict.docs_block(text) == block


def test_verdict_names_where_the_classes_came_from():
    from geoanatomy.analysis.summarize import classes_line
    fixed = {"fixed_before_outcome": True, "classes_file": "config/classes.csv", "classes_sha256": "ab" * 32,
             "rule": "class file: easy if every calibration seed acquired by easy_max_step, hard otherwise"}
    post = {"fixed_before_outcome": False, "rule": "post-hoc"}
    assert ("ab" * 32) in classes_line([{"difficulty_source": fixed}, {"difficulty_source": fixed},
                                        {"control": "shuffled", "difficulty_source": post}])
    assert classes_line([{"difficulty_source": post}]).startswith("difficulty classes: post-hoc rule")
    assert "MIXED" in classes_line([{"difficulty_source": fixed}, {"difficulty_source": post}])


def test_cross_scale_rows_are_written_from_the_list_prediction_writes():
    """prediction.json's cross_scale is a list of {a, b, by_measure} (analysis.prediction);
    the verdict reads it (the old code iterated a dict and wrote no row)."""
    from geoanatomy.analysis.verdict import cross_scale_prediction
    entry = {"rho": 0.9, "p": 0.02, "n": 6, "reason": None}
    js = {"prediction.json": {"cross_scale": [{"a": "nano", "b": "micro",
                                                "by_measure": {"rankme": {"L3": entry}, "rankme_centred": {"L3": entry}}}]}}
    rows = cross_scale_prediction(js)
    assert len(rows) == 2 and all(r.claim == "smaller-size geometry predicts larger-size acquisition order" for r in rows)
    assert "nano -> micro" in rows[0].statistic and rows[0].value == 0.9 and rows[0].n_units == 6
