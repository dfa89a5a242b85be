"""Cross-run analysis (geoanatomy.analysis) on synthetic per-run results with known answers."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from geoanatomy.analysis import (
    behaviour,
    floors,
    prediction,
    rates,
    scale,
    topdown,
)
from geoanatomy.analysis.load import SummaryInputError, class_counts, load_precursors
from geoanatomy.analysis.stats import (
    concordance,
    log_steps_close,
    quantiles,
    spearman_exact,
)
from geoanatomy.analysis.tables import header_lines, read_table
from geoanatomy.precursor.seal import seal
from geoanatomy.analysis.summarize import run as summarize_run
from geoanatomy.sizes import SIZES

SIZE_NAMES = list(SIZES)
N_PARAMS = {"nano": 409088, "micro": 1353408, "small": 4757504, "medium": 19400000, "large": 85100000,
            "xlarge": 151300000}
from geoanatomy.cli.summarize import make_settings as settings  # noqa: E402

ST = settings()


def layer_events(floor_steps: dict, collapsed=True, const=("embed",)) -> dict:
    return {name: {"init": 10.0, "floor": 2.0 + i, "floor_step": s, "collapsed": collapsed, "collapse_step": s,
                   "recovery_step": None, "final": 9.0, "constant_by_construction": name in const}
            for i, (name, s) in enumerate(floor_steps.items())}


def make_pre(task="copy", level="L1", size="nano", acq=None, floor=2.0, tr=10, plateau=None, logprob=None,
             steps=1000, diverged=False, per_layer=None, extra_measures=None, probes=None, precursor=None,
             seed=0, control="", collapsed=True) -> dict:
    acquired = acq is not None and not diverged
    diff = "diverged" if diverged else ("unlearned" if not acquired else ("easy" if acq <= 0.1 * steps else "hard"))
    gap = acq - tr if acquired and tr is not None else None
    pre_flag = precursor if precursor is not None else bool(acquired and tr is not None and tr < acq
                                                            and acq - tr >= 0.25 * acq)
    rm = {"layer": "ln_final", "position": "first", "variant": "uncentred", "direction": "collapse", "n_samples": 200,
          "eps": 1e-7,
          "init": 10.0, "floor": floor, "floor_step": tr, "collapsed": collapsed, "collapse_step": tr,
          "recovery_step": None, "final": 9.0, "transition": "floor", "transition_step": tr,
          "precursor": pre_flag, "gap_steps": gap, "gaps": {"collapse": gap, "floor": gap, "recovery": None},
          "per_layer": per_layer or layer_events({"embed": 0, "block0": tr, "ln_final": tr})}
    name = f"{task}_{level}_{size}" + (f"_s{seed}" if seed else "") + ("_shuffled" if control else "")
    d = {"schema_version": 1, "run": name, "task": task, "level": level, "size": size, "seed": seed, "control": control,
         "n_params": N_PARAMS.get(size), "steps": steps, "n_checkpoints": 80, "diverged": diverged,
         "acquired": acquired, "acquisition_step": acq if acquired else None, "logprob_emergence_step": logprob,
         "loss_plateau_exit_step": plateau, "difficulty": diff, "final_accuracy": 1.0 if acquired else 0.0,
         "chance_accuracy": 0.0, "events_settings": {"precursor_min_gap_frac": 0.25},
         "measures": {"rankme": rm, **(extra_measures or {})}}
    if probes is not None:
        d["probes"] = probes
    return d


def write(tmp_path, pres) -> list[str]:
    paths = []
    for p in pres:
        f = tmp_path / p["run"] / "precursor.json"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(seal(p)))          # as the events stage writes it
        paths.append(str(f))
    return paths


# ------------------------------------------------------------------ statistics
def test_spearman_perfect_order_n6_exact_p():
    r = spearman_exact([1, 2, 3, 4, 5, 6], [10, 20, 30, 40, 50, 60])
    assert r.statistic == pytest.approx(1.0)
    assert r.p == pytest.approx(2 / 720, abs=1e-15)
    assert r.n_permutations == 720
    r = spearman_exact([1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1])
    assert r.statistic == pytest.approx(-1.0) and r.p == pytest.approx(2 / 720, abs=1e-15)


def test_spearman_n4_hand_count():
    # rho = 1 - 6 * 2 / (4 * 15) = 0.8; |rho| >= 0.8 for sum d^2 in {0, 2, 18, 20}: 1 + 3 + 3 + 1 of 24
    r = spearman_exact([1, 2, 3, 4], [1, 3, 2, 4])
    assert r.statistic == pytest.approx(0.8)
    assert r.p == pytest.approx(8 / 24)


def test_spearman_matches_brute_force_with_ties():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 3, 6).astype(float)      # ties on purpose
    y = rng.normal(size=6)
    obs = stats.spearmanr(x, y).statistic
    null = [stats.spearmanr(x, y[list(p)]).statistic for p in itertools.permutations(range(6))]
    want = np.mean(np.abs(null) >= abs(obs) - 1e-12)
    r = spearman_exact(x, y)
    assert r.statistic == pytest.approx(obs)
    assert r.p == pytest.approx(want)


def test_spearman_monte_carlo_close_to_exact_above_exact_max_n():
    x = np.arange(8.0)
    y = np.array([0, 2, 1, 3, 5, 4, 7, 6.0])
    exact = spearman_exact(x, y)
    mc = spearman_exact(x, y, exact_max_n=5, n_resamples=20000, seed=1)
    assert "Monte Carlo" in mc.null and exact.null.startswith("exact")
    assert mc.statistic == pytest.approx(exact.statistic)
    assert mc.p == pytest.approx(exact.p, abs=0.005)


def test_spearman_undefined_cases():
    assert spearman_exact([1, 2], [1, 2]).statistic is None
    assert spearman_exact([1, 1, 1, 1], [1, 2, 3, 4]).reason == "constant ranks on one side"
    assert spearman_exact([1, 2, np.nan, 4], [1, 2, 3, np.nan]).n == 2


def test_concordance_and_quantiles():
    c = concordance([1, 2, 3], [1, 3, 2])
    assert (c.concordant, c.discordant, c.tied) == (2, 1, 0)
    assert c.statistic == pytest.approx(2 / 3)
    c = concordance([1, 1, 2], [1, 2, 3])
    assert (c.concordant, c.discordant, c.tied) == (2, 0, 1)
    q = quantiles([20, 60])
    assert (q["median"], q["q25"], q["q75"], q["iqr"]) == (40, 30, 50, 20)
    assert log_steps_close(40, 42, 0.1) is True and log_steps_close(40, 100, 0.1) is False
    assert log_steps_close(None, 3, 0.1) is None


def test_settings_reject_unknown():
    with pytest.raises(ValueError, match="alpa"):
        settings({"alpa": 0.1})


# ------------------------------------------------------------------ tables
@pytest.mark.slow
def test_planted_gap_recovered_and_unlearned_counted():
    pres = [make_pre("copy", size="nano", acq=100, tr=40, plateau=90, logprob=80),
            make_pre("rev", size="nano", acq=400, tr=380, plateau=385, logprob=300),   # gap 20 < 0.25*400: no precursor
            make_pre("mod", size="nano", acq=None, tr=50, plateau=None, logprob=None),
            make_pre("mul", size="nano", acq=None, diverged=True, tr=5)]
    rows = rates.measure_rows(pres, ST["coincide_log10_tol"])
    pr = rates.precursor_rates(rows)
    rm = pr[(pr["measure"] == "rankme") & (pr["size"] == "nano")].set_index("difficulty")
    assert rm.loc["easy", "gap_median_steps"] == 60 and rm.loc["easy", "rate_k_of_n"] == "1/1"
    assert rm.loc["hard", "rate_k_of_n"] == "0/1" and rm.loc["hard", "gap_median_steps"] == 20
    assert rm.loc["unlearned", "runs"] == 1 and rm.loc["unlearned", "precursors"] == 0
    assert rm.loc["diverged", "runs"] == 1
    allr = pr[(pr["measure"] == "rankme") & (pr["size"] == "all")].set_index("difficulty")
    assert allr.loc["easy", "runs"] + allr.loc["hard", "runs"] == 2
    assert class_counts(pres) == {"easy": 1, "hard": 1, "unlearned": 1, "diverged": 1}
    # reference measures: plateau exit 90 vs acq 100 is 10 < 25: no precursor; log-prob 80: 20 < 25: none
    ref = pr[(pr["measure"] == "loss_plateau_exit") & (pr["size"] == "all") & (pr["difficulty"] == "easy")].iloc[0]
    assert ref["rate_k_of_n"] == "0/1" and ref["gap_median_steps"] == 10
    # rev: transition 380 vs plateau exit 385 coincide (0.006 decades); copy: 40 vs 90 do not
    co = rows[rows["measure"] == "rankme"].set_index("task")["coincides_plateau_exit"]
    assert co["rev"] is True and co["copy"] is False and co["mod"] is None


@pytest.mark.slow
def test_reference_precursor_rule_and_iqr():
    pres = [make_pre("copy", size="nano", acq=1000, tr=100, plateau=200, logprob=500, steps=5000),
            make_pre("rev", size="nano", acq=1000, tr=800, plateau=900, logprob=100, steps=5000)]
    pr = rates.precursor_rates(rates.measure_rows(pres, 0.1))
    hard = pr[(pr["size"] == "nano") & (pr["difficulty"] == "hard")].set_index("measure")
    assert hard.loc["rankme", "rate_k_of_n"] == "1/2"          # gaps 900 (>= 250) and 200 (< 0.25 * 1000)
    assert hard.loc["rankme", "gap_q25_steps"] == 375 and hard.loc["rankme", "gap_q75_steps"] == 725
    assert hard.loc["loss_plateau_exit", "rate_k_of_n"] == "1/2"   # 800 yes, 100 no
    assert hard.loc["logprob_emergence", "rate_k_of_n"] == "2/2"


def test_every_measure_present_is_iterated_and_probes_read():
    extra = {"grad_erank": {"layer": "params", "position": "answer", "variant": "", "direction": "collapse", "init":
                            50.0, "floor": 5.0,
                            "floor_step": 30, "collapsed": True, "transition": "floor", "transition_step": 30,
                            "precursor": True, "gap_steps": 70},
             "probes": {"per_layer": {"block0": {"acquisition_step": 60, "accuracy": 0.9}, "ln_final": 80,
                                      "embed": None}, "settings": {"threshold": 0.5}}}
    pres = [make_pre("copy", size="nano", acq=100, tr=40, extra_measures=extra),
            make_pre("rev", size="nano", acq=None)]
    rows = rates.measure_rows(pres, 0.1)
    assert set(rows["measure"]) == {"rankme", "grad_erank", "loss_plateau_exit", "logprob_emergence"}
    g = rows[rows["measure"] == "grad_erank"].iloc[0]
    assert g["gap_steps"] == 70 and bool(g["precursor"])
    pb = behaviour.probes(pres)
    assert list(pb["layer"]) == ["block0", "ln_final", "embed"]
    assert list(pb["lead_steps"].iloc[:2]) == [40, 20]
    assert pd.isna(pb["lead_steps"].iloc[2])
    assert pb["probe_accuracy"].iloc[0] == 0.9 and json.loads(pb["probe_settings"].iloc[0]) == {"threshold": 0.5}
    assert behaviour.probes([make_pre()]).empty


def test_emergence_lead():
    em = behaviour.emergence([make_pre("copy", acq=100, logprob=30, plateau=50), make_pre("rev", acq=None, logprob=70)])
    assert list(em["lead_logprob_steps"].iloc[:1]) == [70] and em["lead_plateau_exit_steps"].iloc[0] == 50
    assert pd.isna(em["lead_logprob_steps"].iloc[1]) and em["logprob_emergence_step"].iloc[1] == 70


# ------------------------------------------------------------------ top-down
def test_planted_top_down_order_counted():
    down = layer_events({"embed": 0, "block0": 40, "block1": 20, "ln_final": 10})   # output side first
    up = layer_events({"embed": 0, "block0": 10, "block1": 20, "ln_final": 40})
    tied = layer_events({"embed": 0, "block0": 10, "block1": 10, "ln_final": 10})
    pres = [make_pre("copy", size="nano", per_layer=down), make_pre("rev", size="nano", per_layer=up),
            make_pre("mod", size="nano", per_layer=tied)]
    td = topdown.top_down(pres).set_index("task")
    assert td.loc["copy", "top_down"] is True and td.loc["copy", "top_down_strict"] is True
    assert td.loc["copy", "order_by_floor_step"] == "ln_final < block1 < block0"
    assert td.loc["copy", "excluded_constant"] == "embed"        # embed's step-0 floor would make it bottom-up
    # block1 and ln_final are one unit (same depth): their pair counts neither way in tau_b
    assert td.loc["copy", "kendall_tau_depth_vs_floor_step"] == pytest.approx(-2 / np.sqrt(6))
    assert td.loc["copy", "units"] == "block0 block1+ln_final"
    assert td.loc["rev", "top_down"] is False and td.loc["rev", "first_layer"] == "block0"
    assert td.loc["mod", "status"].startswith("undetermined")
    s = topdown.top_down_summary(topdown.top_down(pres))
    assert s["rankme"]["all"]["top_down"] == "1/2" and s["rankme"]["all"]["undetermined"] == 1


def test_top_down_skips_layers_that_never_collapsed():
    pl = layer_events({"embed": 0, "block0": 5, "block1": 20, "block2": 15, "ln_final": 10})
    pl["block0"]["collapsed"] = False
    r = topdown.run_order(pl, require_collapse=True)
    assert r["excluded_not_collapsed"] == "block0" and r["top_down"] is True
    assert topdown.run_order(pl, require_collapse=False)["top_down_strict"] is False


# ------------------------------------------------------------------ floors and scale
def _grid(n_tasks=6, sizes=SIZE_NAMES, floor=lambda t, s: 1.0 + t + 0.01 * s, acq=lambda t, s: 100 * (t + 1)):
    tasks = ["copy", "rev", "cmp", "par", "add", "mod", "sort", "mul"][:n_tasks]
    return [make_pre(task, size=size, acq=acq(ti, si), floor=floor(ti, si), tr=10)
            for ti, task in enumerate(tasks) for si, size in enumerate(sizes)]


def test_scale_invariance_planted_floors_rho1_exact_p():
    pres = _grid()
    res = scale.scale_invariance(pres, ST)
    toy = res["families"]["toy"]
    assert toy["sizes"] == SIZE_NAMES and toy["n_cells"] == 36 and toy["seeds_per_cell"] == "1"
    pairs = toy["floors"]["rankme"]["by_level"]["L1"]["pairs"]
    assert len(pairs) == 15
    for e in pairs:
        assert e["rho"] == pytest.approx(1.0) and e["p"] == pytest.approx(2 / 720) and e["n"] == 6
        assert e["p_holm"] == pytest.approx(2 / 720) and e["verdict"] == "same order"   # family of one level
    for version in ("censored_last", "dropped"):
        acq = toy["acquisition_order"][version]["by_level"]["L1"]["smallest_vs_largest"]
        assert (acq["a"], acq["b"], acq["rho"], acq["p"]) == ("nano", "xlarge", pytest.approx(1.0),
                                                              pytest.approx(2 / 720))


def test_scale_invariance_reversed_order_and_unacquired_excluded():
    pres = _grid(n_tasks=6, sizes=["nano", "micro"],
                 floor=lambda t, s: (1.0 + t) if s == 0 else (10.0 - t),
                 acq=lambda t, s: None if t == 5 and s == 1 else 100 * (t + 1))
    toy = scale.scale_invariance(pres, ST)["families"]["toy"]
    e = toy["floors"]["rankme"]["by_level"]["L1"]["pairs"][0]
    assert e["rho"] == pytest.approx(-1.0) and e["p"] == pytest.approx(2 / 720) and e["verdict"] == "reversed order"
    a = toy["acquisition_order"]["dropped"]["by_level"]["L1"]["pairs"][0]
    assert a["n"] == 5 and a["n_excluded_unacquired"] == 1 and a["p"] == pytest.approx(2 / 120)
    # censored version: the task never acquired at micro is ranked last there (it is last at nano too)
    c = toy["acquisition_order"]["censored_last"]["by_level"]["L1"]["pairs"][0]
    assert c["n"] == 6 and c["n_censored_ranked_last"] == 1 and c["rho"] == pytest.approx(1.0)
    assert c["p"] == pytest.approx(2 / 720)


def test_floor_spread_rising_with_capacity_and_task_specific():
    pres = _grid(n_tasks=3, floor=lambda t, s: 10.0 ** t * (1 + 0.1 * s))
    fl = floors.collapse_floors(pres)
    sp = floors.floor_spread(fl, ST)
    assert (sp["trend_with_capacity"] == "rising").all()
    assert sp["p_raw"].iloc[0] == pytest.approx(2 / 720)
    assert list(sp["p_holm"]) == pytest.approx([3 * 2 / 720] * 3)           # Holm over the 3 tasks of L1
    summ = floors.floor_summary(fl, sp, ST)["measures"]["rankme"]["L1"]
    assert summ["task_specific"] is True and summ["task_share"] > 0.9 and summ["p_task"] < 1e-6
    assert (summ["df_task"], summ["df_size"], summ["df_residual"]) == (2, 5, 10)
    assert summ["rising_with_capacity_k_of_n"] == "3/3"


def test_pythia_scale_file_is_read(tmp_path):
    per_model = {m: {b: {"rankme_floor": f, "acquisition_step": a} for b, f, a in
                     zip(["syntax", "semantics", "arithmetic", "icl", "factual", "general"], fl, acqs)}
                 for m, fl, acqs in [("160m", [1, 2, 3, 4, 5, 6], [1000, 2000, 3000, 4000, 5000, 6000]),
                                     ("2.8b", [2, 3, 4, 5, 6, 7], [6000, 5000, 4000, 3000, 2000, 1000])]}
    f = tmp_path / "pythia_scale.json"
    f.write_text(json.dumps({"kind": "pythia_scale", "per_model": per_model,
                             "models": [{"name": "160m", "n_params": 1.6e8}, {"name": "2.8b", "n_params": 2.8e9}],
                             "pairs": []}))
    res = scale.scale_invariance(_grid(n_tasks=3, sizes=["nano", "micro"]), ST, f)
    py = res["families"]["pythia"]
    assert res["pythia_file"]["status"] == "used" and py["sizes"] == ["160m", "2.8b"]
    assert py["floors"]["rankme"]["by_level"]["-"]["pairs"][0]["rho"] == pytest.approx(1.0)
    acq = py["acquisition_order"]["dropped"]["by_level"]["-"]["pairs"][0]
    assert acq["rho"] == pytest.approx(-1.0) and acq["p"] == pytest.approx(2 / 720)
    assert scale.scale_invariance(_grid(n_tasks=3, sizes=["nano"]), ST, tmp_path /
                                  "absent.json")["pythia_file"]["status"] == "absent"


# ------------------------------------------------------------------ prediction
def test_prediction_concordance_and_reversals():
    # nano: A then B then C acquired; micro: B before A. RankMe transitions follow the acquisition order.
    acq = {("copy", "nano"): 100, ("rev", "nano"): 200, ("cmp", "nano"): 300,
           ("copy", "micro"): 250, ("rev", "micro"): 150, ("cmp", "micro"): 350}
    pres = [make_pre(t, size=s, acq=a, tr=a // 4, steps=100) for (t, s), a in acq.items()]
    pres.append(make_pre("mod", size="nano", acq=None))
    rows = rates.measure_rows(pres, 0.1)
    res = prediction.prediction(rows, ST)
    assert res["within_class"]["rankme"]["hard"]["pooled"]["concordance"] == 1.0
    assert res["within_class"]["rankme"]["hard"]["pooled"]["concordant"] == 6
    rv = res["reversals"]["pairs"][0]
    assert (rv["a"], rv["b"], rv["comparable_pairs"], rv["reversed_pairs"]) == ("nano", "micro", 3, 1)
    assert rv["reversed"] == ["copy_L1/rev_L1"]
    assert rv["by_measure"]["rankme"]["tracked_k_of_n"] == "1/1"
    assert rv["by_measure"]["rankme"]["same_size_at_b_k_of_n"] == "1/1"      # micro's own geometry: same-size
    assert rv["by_measure"]["rankme"]["cross_scale_from_a_k_of_n"] == "0/1"  # nano's geometry missed the reversal
    assert res["n_acquired"] == 6 and res["n_runs"] == 7


# ------------------------------------------------------------------ files, CLI, errors
def _write_metrics(path, pre: dict) -> None:
    """A metrics table of ``pre``'s run, written as the stages write it (with its manifest)."""
    from geoanatomy.table import write_table
    rows = []
    for step in [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]:
        acc = 1.0 if pre["acquired"] and step >= pre["acquisition_step"] else 0.0
        rows.append({"run": pre["run"], "step": step, "measure": "accuracy", "layer": "output", "layer_index": -1,
                     "position": "answer", "variant": "", "n_samples": 200, "value": acc})
        for li, layer in enumerate(["embed", "block0", "ln_final"]):
            v = 1.0 if layer == "embed" else 10.0 / (1 + step) ** 0.3
            rows.append({"run": pre["run"], "step": step, "measure": "rankme", "layer": layer, "layer_index": li,
                         "position": "first", "variant": "uncentred", "n_samples": 200, "value": v})
    write_table(path, rows)


@pytest.mark.slow
def test_cli_all_writes_every_file_with_provenance(tmp_path):
    from geoanatomy.cli.summarize import main
    pres = [make_pre("copy", size="nano", acq=100, tr=40, plateau=90, logprob=80),
            make_pre("copy", size="micro", acq=None, tr=60)]
    write(tmp_path, pres)
    for p in pres:
        _write_metrics(tmp_path / p["run"] / "metrics.csv", p)
    assert main(["all", "--results", str(tmp_path), "--settings",
                 json.dumps({"power_populations": 10, "power_multiples": [1]})]) == 0
    out = tmp_path / "summary"
    for f in ["precursor_rates.csv", "transitions.csv", "collapse_floors.csv", "floor_spread.csv", "top_down.csv",
              "emergence.csv",
              "probes.csv"]:
        head = header_lines(out / f)                          # the manifest's title and notes
        assert head[0] == "geoanatomy summary: " + f
        assert any("n = 2 runs (easy 1, hard 0, unlearned 1, diverged 0)" in ln for ln in head)
        assert not (out / f).read_text().startswith("#")      # plain CSV
        read_table(out / f)
    assert read_table(out / "probes.csv").empty and any("no probes entry" in ln for ln in header_lines(out /
                                                                                                       "probes.csv"))
    from geoanatomy.analysis.load import load_precursors
    from geoanatomy.analysis.summarize import statistics_of
    from geoanatomy.cli.summarize import make_settings
    st = make_settings({"power_populations": 10, "power_multiples": [1]})
    again = statistics_of(load_precursors(sorted(str(p) for p in tmp_path.glob("*/precursor.json"))), st)
    for f in ["scale_invariance.json", "prediction.json", "floor_summary.json", "top_down_summary.json"]:
        d = json.loads((out / f).read_text())
        assert d["n_runs"] == 2 and "method" in d and "test" in d
        # the stability check recomputes these files on seed subsets with the same functions
        assert json.loads(json.dumps(again[f], default=str)) == d, f
    fs = read_table(out / "floor_spread.csv")
    assert {"n_sizes", "n_seeds_per_size", "p_raw", "p_holm", "test"} <= set(fs.columns)
    assert any("n = sizes = cells" in ln for ln in header_lines(out / "floor_spread.csv"))
    sc = json.loads((out / "scale_invariance.json").read_text())["families"]["toy"]
    assert sc["n_cells"] == 2 and sc["seeds_per_cell"] == "1"
    assert any("sign test" in ln for ln in header_lines(out / "top_down.csv"))
    for f in ["trajectories_L1.png", "rankme_heatmap_L1.png", "floors_by_task.png", "lead_lag.png", "probes.png",
              "rho_matrix.png"]:
        assert (out / "figures" / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "precursor_rates.csv" in (out / "tables.html").read_text()
    # the registry's files are exactly what `all` wrote (figures also save an SVG beside some PNGs,
    # every CSV its manifest)
    from geoanatomy.analysis import parts
    want = set(parts.targets(["L1"], mixtures=False))
    got = {f.relative_to(out).as_posix() for f in out.rglob("*") if f.is_file()}
    extra = {f for f in got - want if not (f.endswith(".csv-metadata.json") and f[:-len("-metadata.json")] in want)}
    assert want <= got and all(f.endswith(".svg") and f[:-4] + ".png" in want for f in extra), extra
    assert all(f + "-metadata.json" in got for f in want if f.endswith(".csv"))


def test_cli_seed_half_summarizes_exactly_the_stability_checks_half(tmp_path):
    """`summarize --seed-half A|B` keeps the runs verdict.seed_subsets puts in that half
    (within a cell, seeds ascending: even positions A, odd B; a one-seed control in A)."""
    from geoanatomy.analysis.verdict import seed_subsets
    from geoanatomy.cli.summarize import main
    pres = [make_pre("copy", seed=s, acq=100, tr=40) for s in (0, 1, 2)] + \
           [make_pre("mod", level="L3", seed=s, acq=900, tr=300) for s in (0, 7)] + \
           [make_pre("mod", seed=0, control="shuffled")]
    write(tmp_path, pres)
    for half, want in (("A", {"copy_L1_nano", "copy_L1_nano_s2", "mod_L3_nano", "mod_L1_nano_shuffled"}),
                       ("B", {"copy_L1_nano_s1", "mod_L3_nano_s7"})):
        out = tmp_path / f"half_{half}"
        assert main(["tables", "--results", str(tmp_path), "--seed-half", half, "--out", str(out)]) == 0
        assert set(read_table(out / "transitions.csv")["run"]) == want
    study = [p for p in pres if not p["control"]]
    assert {p["run"] for p in dict(seed_subsets(study))["seed half B"]} == {"copy_L1_nano_s1", "mod_L3_nano_s7"}
    # without its own --out a half would overwrite the full summary: refused
    assert main(["tables", "--results", str(tmp_path), "--seed-half", "A"]) == 2


def test_summary_parts_registry(tmp_path):
    """One registry of summary parts: stdlib-only at import (the Snakefile reads it at parse
    time), each part's writer exists, every report caption has its .rst, no file written twice,
    the CLI offers exactly its parts, tables.html sections are files of the parts."""
    import subprocess
    import sys
    from geoanatomy.analysis import parts, summarize
    from geoanatomy.cli.summarize import PARTS
    code = ("import sys, geoanatomy.analysis.parts; "
            "print(sorted(m for m in ('numpy', 'pandas', 'scipy', 'matplotlib', 'torch') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "[]", p.stdout + p.stderr
    assert PARTS == [q.name for q in parts.PARTS] + ["all"]
    files = [f for q in parts.PARTS for f in q.files(["L1", "L2"])]
    assert len(files) == len(set(files)) and "figures/trajectories_L2.png" in files
    report = Path(__file__).resolve().parents[1] / "workflow" / "report"
    for q in parts.PARTS:
        assert callable(getattr(summarize, q.writer)), q.writer
        for o in q.outputs:
            assert o.caption is None or (report / f"{o.caption}.rst").exists(), o.caption
        for i in q.inputs:
            assert i.where in ("unit", "run", "summary")
            assert i.where != "summary" or i.optional or set(i.files) <= set(files), (q.name, i.files)
    assert set(parts.HTML_SECTIONS) <= set(files) and parts.HTML_SECTIONS[0] == "verdict.csv"
    assert parts.MIXTURE_FILES == {"protocols.csv", "protocol_rates.csv", "figures/protocols.png"}
    assert not set(parts.targets(mixtures=False)) & parts.MIXTURE_FILES


def test_bad_input_names_file_and_field(tmp_path):
    p = make_pre()
    del p["acquisition_step"]
    path = write(tmp_path, [p])[0]
    with pytest.raises(SummaryInputError, match=r"precursor\.json: lacks field\(s\) \['acquisition_step'\]"):
        load_precursors([path])
    bad = make_pre(task="rev")
    bad["difficulty"] = "medium"
    with pytest.raises(SummaryInputError, match="difficulty"):
        load_precursors(write(tmp_path, [bad]))
    dup = write(tmp_path, [make_pre(task="mod")])[0]
    with pytest.raises(SummaryInputError, match="appears twice"):
        load_precursors([dup, dup])
    from geoanatomy.cli.summarize import main
    assert main(["tables", "--precursors", str(tmp_path / "nothing.json"), "--out", str(tmp_path)]) == 2


def _mutate(d, path, value):
    """Set d[path] (dotted; a missing key is deleted with value DELETE)."""
    *head, last = path.split(".")
    for k in head:
        d = d[k]
    if value is DELETE:
        del d[last]
    else:
        d[last] = value


DELETE = object()


@pytest.mark.parametrize("path, value, message", [
    ("acquisition_step", -50, r"'acquisition_step' is -50, not a step"),
    ("acquisition_step", 29.7, r"'acquisition_step' is 29.7, not a step"),
    ("acquisition_step", 5000, r"'acquisition_step' is 5000, not a step .*1000"),
    ("acquired", "no", r"'acquired' is 'no', not true or false"),
    ("measures.rankme.floor", "low", r"'measures.rankme.floor' is 'low', not a finite number"),
    ("measures.rankme.floor_step", DELETE, r"measure 'rankme' lacks \['floor_step'\]"),
    ("task", "rev", r"'task' is 'rev' but the run name 'copy_L1_nano' says 'copy'"),
    ("size", "giant", r"'size' is 'giant'; allowed"),
    ("seed", 3, r"'seed' is 3 but the run name 'copy_L1_nano' says 0"),
    ("measures.rankme.per_layer.block0.floor_step", True, r"'measures.rankme.per_layer.block0.floor_step' is True"),
])
def test_a_bad_field_in_a_sealed_precursor_is_refused_by_name(tmp_path, path, value, message):
    """Each bad value is sealed as if a tool had written it: the field checks alone catch it."""
    d = make_pre("copy", acq=100, tr=40)
    _mutate(d, path, value)
    f = write(tmp_path, [d])[0]
    with pytest.raises(SummaryInputError, match=message) as e:
        load_precursors([f])
    assert "precursor.json" in str(e.value) and "snakemake" in str(e.value)


def test_nan_and_hand_edits_in_a_precursor_are_refused(tmp_path):
    f = Path(write(tmp_path, [make_pre("copy", acq=100, tr=40)])[0])
    load_precursors([f])                                           # as written: accepted
    text = f.read_text()
    f.write_text(text.replace('"floor": 2.0', '"floor": NaN'))    # json.loads alone accepts NaN
    with pytest.raises(SummaryInputError, match=r"not valid JSON \(NaN is not a JSON number"):
        load_precursors([f])
    f.write_text(text.replace('"acquisition_step": 100', '"acquisition_step": 90'))   # a plausible hand edit
    with pytest.raises(SummaryInputError, match=r"does not match its content_sha256 seal.*rm .*precursor.json"):
        load_precursors([f])
    d = json.loads(text)
    del d["content_sha256"]
    f.write_text(json.dumps(d))
    with pytest.raises(SummaryInputError, match="has no content_sha256 seal"):
        load_precursors([f])


def test_a_summary_refuses_to_pool_runs_of_different_settings_unless_allowed(tmp_path):
    from geoanatomy.cli.summarize import main
    a, b = make_pre("copy", acq=100, tr=40), make_pre("mod", acq=300, tr=100)
    a["events_settings"], b["events_settings"] = {"persist": 3}, {"persist": 4}
    write(tmp_path, [a, b])
    args = ["tables", "--results", str(tmp_path)]
    assert main(args) == 2
    with pytest.raises(SummaryInputError, match=r"event settings events_settings.persist differ: 3 in copy_L1_nano.*"
                                                r"4 in mod_L1_nano.*allow_mixed_settings"):
        summarize_run("tables", sorted(str(x) for x in tmp_path.glob("*/precursor.json")), tmp_path / "s", settings())
    # training settings are compared within a size: 600 vs 80 steps at nano
    a["events_settings"] = b["events_settings"] = {"persist": 3}
    a["train_settings"], b["train_settings"] = {"train": {"steps": 600}}, {"train": {"steps": 80}}
    c = make_pre("rev", size="micro", acq=100, tr=40)
    c["train_settings"], c["events_settings"] = {"train": {"steps": 80, "lr": 6e-4}}, {"persist": 3}
    write(tmp_path, [a, b, c])
    with pytest.raises(SummaryInputError, match=r"training settings train_settings.train.steps at size nano differ"):
        summarize_run("tables", sorted(str(x) for x in tmp_path.glob("*/precursor.json")), tmp_path / "s", settings())
    b["train_settings"] = {"train": {"steps": 600}}
    write(tmp_path, [b])
    summarize_run("tables", sorted(str(x) for x in tmp_path.glob("*/precursor.json")), tmp_path / "s", settings())
    # stated: allowed, and the headers say so
    b["train_settings"] = {"train": {"steps": 80}}
    write(tmp_path, [b])
    assert main(args + ["--settings", json.dumps({"allow_mixed_settings": True}), "--out", str(tmp_path /
                                                                                               "mixed")]) == 0
    assert any("settings: MIXED (training settings train_settings.train.steps at size nano differ" in ln
               for ln in header_lines(tmp_path / "mixed" / "transitions.csv"))


def test_the_clear_gap_travels_once_and_two_gaps_never_pool(tmp_path):
    """The precursor rule's f is one number of the summary, carried by the claims' views (not a
    column of every unit); runs with two f are refused before any work, even when a mix of
    settings is allowed, naming both values."""
    from geoanatomy.analysis import claims, rates
    from geoanatomy.analysis.units import unit_events
    a, b = make_pre("copy", acq=100, tr=40), make_pre("mod", acq=300, tr=100)
    a["events_settings"] = {"precursor_min_gap_frac": 0.3}
    b["events_settings"] = {"precursor_min_gap_frac": 0.3}
    rows = rates.measure_rows([a, b], 0.15)
    assert "min_gap_frac" not in unit_events(rows)
    views = claims.measure_views(rows, ST)
    assert views and {v.frac for v in views} == {0.3}
    assert claims.runs_views([a, b], ST)[0].frac == 0.3
    b["events_settings"] = {"precursor_min_gap_frac": 0.25}
    write(tmp_path, [a, b])
    files = sorted(str(x) for x in tmp_path.glob("*/precursor.json"))
    with pytest.raises(SummaryInputError, match=r"different events.precursor_min_gap_frac \(0.25, 0.3\)"):
        summarize_run("tables", files, tmp_path / "s", settings({"allow_mixed_settings": True}))
    assert not (tmp_path / "s").exists()


def test_nan_free_json_outputs(tmp_path):
    pres = [make_pre("copy", size="nano", acq=None), make_pre("copy", size="micro", acq=None, diverged=True)]
    res = scale.scale_invariance(pres, ST)
    json.dumps(res, allow_nan=False)          # raises on NaN/inf
    a = res["families"]["toy"]["acquisition_order"]["dropped"]["by_level"]["L1"]["pairs"][0]
    assert a["rho"] is None and a["n"] == 0 and a["n_missing"] == 1       # the diverged run is missing, not censored
    assert res["n_diverged_runs_left_out"] == 1


def test_probes_entry_in_the_probes_stage_format():
    entry = {"measure": "probe_accuracy_norm", "position": "first", "layer": "ln_final",
             "definition": "first probed checkpoint with ...", "acquisition_step": 10, "n_test": 100,
             "settings": {"C": 0.1, "test_frac": 0.5},
             "per_layer": {"embed": {"layer_index": 0, "acquisition_step": None, "before_behaviour": False,
                                     "constant_by_construction": True, "final_accuracy": 0.1},
                           "block0": {"layer_index": 1, "acquisition_step": 60, "before_behaviour": True,
                                      "constant_by_construction": False, "final_accuracy": 1.0},
                           "ln_final": {"layer_index": 2, "acquisition_step": 10, "before_behaviour": True,
                                        "constant_by_construction": False, "final_accuracy": 1.0}}}
    pb = behaviour.probes([make_pre("copy", acq=100, probes=entry)]).set_index("layer")
    assert pb.loc["block0", "lead_steps"] == 40 and pb.loc["ln_final", "lead_steps"] == 90
    assert bool(pb.loc["embed", "probe_constant_by_construction"]) and pd.isna(pb.loc["embed", "lead_steps"])
    st = json.loads(pb.loc["block0", "probe_settings"])
    assert st["position"] == "first" and st["C"] == 0.1 and "acquisition_step" not in st


def test_figures_need_every_metrics_table(tmp_path):
    from geoanatomy.analysis.figures_runs import load_metrics
    pres = [make_pre("copy"), make_pre("rev")]
    (tmp_path / "copy_L1_nano").mkdir()
    _write_metrics(tmp_path / "copy_L1_nano" / "metrics.csv", pres[0])
    with pytest.raises(SummaryInputError, match="rev_L1_nano"):
        load_metrics(pres, [tmp_path / "copy_L1_nano" / "metrics.csv"])


def test_rising_measures_use_their_peak():
    def hess(peak):
        return {"hessian_top": {"layer": "all_params", "position": "answer", "variant": "top_eigenvalue",
                                "direction": "rise", "init": 1.0, "floor": 0.5, "floor_step": 3, "peak": peak,
                                "peak_step": 20, "transition": "peak", "transition_step": 20, "precursor": True,
                                "gap_steps": 80, "n_flagged": 1}}
    pres = [make_pre(t, size=s, acq=100, extra_measures=hess(10.0 * (i + 1) + j))
            for i, t in enumerate(["copy", "rev", "cmp"]) for j, s in enumerate(["nano", "micro"])]
    fl = floors.collapse_floors(pres)
    h = fl[fl["measure"] == "hessian_top"]
    assert set(h["extreme"]) == {"peak"} and set(h["floor"]) == {0.5}
    assert list(h["extreme_value"]) == [10.0, 11.0, 20.0, 21.0, 30.0, 31.0]
    pair = scale.scale_invariance(pres, ST)["families"]["toy"]["floors"]["hessian_top"]["by_level"]["L1"]["pairs"][0]
    assert pair["rho"] == pytest.approx(1.0) and pair["n"] == 3


@pytest.mark.slow
def test_nothing_acquired_still_summarised(tmp_path):
    from geoanatomy.cli.summarize import main
    pres = [make_pre("mod", size="nano", acq=None), make_pre("mod", size="micro", acq=None, diverged=True)]
    write(tmp_path, pres)
    for p in pres:
        _write_metrics(tmp_path / p["run"] / "metrics.csv", p)
    assert main(["all", "--results", str(tmp_path)]) == 0
    out = tmp_path / "summary"
    pr = read_table(out / "precursor_rates.csv")
    cell = pr[(pr["measure"] == "rankme") & (pr["size"] == "all")].set_index("difficulty")
    assert (cell.loc["unlearned", "runs"], cell.loc["diverged", "runs"], cell.loc["easy", "runs"]) == (1, 1, 0)
    assert json.loads((out / "prediction.json").read_text())["n_acquired"] == 0
    assert (out / "figures" / "lead_lag.png").stat().st_size > 1000


# ------------------------------------------------------------------ statistics: one Spearman, Holm, sign test
def test_spearman_exact_to_10_bounded_memory_no_scipy_permutation_test(monkeypatch):
    """Exact up to n = 10 inclusive with bounded memory; the Monte Carlo branch is the project's own
    seeded loop (scipy.stats.permutation_test's rng= keyword needs scipy >= 1.15), and both branches use
    the same two-sided rule, so they agree at the boundary."""
    import tracemalloc

    from geoanatomy.analysis.stats import correlation as st_mod

    def boom(*a, **k):
        raise AssertionError("scipy.stats.permutation_test must not be used")
    monkeypatch.setattr(stats, "permutation_test", boom)
    rng = np.random.default_rng(5)
    x = rng.integers(0, 4, 10).astype(float)              # ties
    y = x + rng.normal(scale=1.5, size=10)
    st_mod._perm_table.cache_clear()
    tracemalloc.start()
    ex = spearman_exact(x, y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert ex.null.startswith("exact") and ex.n_permutations == 3628800
    assert peak < 50e6
    mc = spearman_exact(x, y, exact_max_n=9, n_resamples=20000, seed=3)
    assert "Monte Carlo" in mc.null and mc.statistic == pytest.approx(ex.statistic)
    assert mc.p == pytest.approx(ex.p, abs=0.012)
    assert 0.001 < ex.p < 0.5
    assert spearman_exact(np.arange(11.0), np.arange(11.0), exact_max_n=11).null.startswith("Monte Carlo")


def test_spearman_exact_matches_brute_force_with_ties_on_both_sides():
    x = np.array([1, 1, 2, 3, 3, 3, 5.0])
    y = np.array([2, 0, 2, 7, 1, 7, 3.0])
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    perms = np.array(list(itertools.permutations(range(7))))
    null = np.array([np.corrcoef(rx, ry[p])[0, 1] for p in perms])
    obs = np.corrcoef(rx, ry)[0, 1]
    r = spearman_exact(x, y)
    assert r.statistic == pytest.approx(obs) and r.p == pytest.approx(np.mean(np.abs(null) >= abs(obs) - 1e-12))


def test_holm_and_sign_test():
    from geoanatomy.analysis.stats import binomial_p as sign_test
    from geoanatomy.analysis.stats import holm
    assert holm([0.01, 0.04, None, 0.03]) == pytest.approx([0.03, 0.06, None, 0.06])
    assert holm([0.5, 0.2]) == pytest.approx([0.5, 0.4])
    assert sign_test(9, 9) == pytest.approx(2 / 512) and sign_test(0, 0) is None


# ------------------------------------------------------------------ floors: ANOVA with degrees of freedom
def _noise_floors(n_tables, rng, n_tasks=8, sizes=SIZE_NAMES) -> pd.DataFrame:
    tasks = ["copy", "rev", "cmp", "par", "add", "mod", "sort", "mul"][:n_tasks]
    m, t, s = (a.ravel() for a in np.meshgrid(np.arange(n_tables), np.arange(n_tasks), np.arange(len(sizes)),
                                               indexing="ij"))
    size = np.array(sizes)[s]
    return pd.DataFrame({"run": [f"{tasks[a]}_L1_{b}" for a, b in zip(t, size)], "task": np.array(tasks)[t],
                         "level": "L1", "size": size, "n_params": [N_PARAMS[z] for z in size], "diverged": False,
                         "measure": [f"m{i}" for i in m], "extreme": "floor",
                         "extreme_value": 10 ** rng.normal(size=len(m))})


@pytest.mark.slow
def test_task_specific_verdict_is_an_f_test_not_raw_shares():
    rng = np.random.default_rng(11)
    # end to end: floor_summary's verdict on 60 noise tables
    empty = pd.DataFrame(columns=["measure", "level", "n_sizes", "trend_with_capacity", "rho_floor_vs_log10_params"])
    summ = floors.floor_summary(_noise_floors(60, rng), empty)["measures"]
    assert np.mean([v["L1"]["task_specific"] for v in summ.values()]) <= 0.1
    share_rule, verdict = [], []
    for _ in range(500):                                   # 500 pure-noise 8 x 6 tables
        a = floors.two_way_anova(rng.normal(size=(8, 6)), 0.05)
        share_rule.append(a["task_share"] > a["size_share"])
        verdict.append(a["task_specific"])
    assert np.mean(share_rule) > 0.55                      # the old rule: "task-specific" in ~2/3 of noise tables
    assert np.mean(verdict) <= 0.07
    # the F test against an OLS fit of the additive model (with and without the task factor)
    y = rng.normal(size=(8, 6)) + np.arange(8)[:, None] * 0.3
    a = floors.two_way_anova(y, 0.05)
    T, S = np.repeat(np.eye(8), 6, axis=0), np.tile(np.eye(6), (8, 1))
    rss = lambda X: float(np.sum((y.ravel() - X @ np.linalg.lstsq(X, y.ravel(), rcond=None)[0]) ** 2))
    full, no_task = rss(np.hstack([T, S[:, 1:]])), rss(S)
    F = ((no_task - full) / 7) / (full / 35)
    assert a["F_task"] == pytest.approx(F) and a["p_task"] == pytest.approx(stats.f.sf(F, 7, 35))
    assert (a["df_task"], a["df_size"], a["df_residual"]) == (7, 5, 35)
    assert a["omega2_task"] == pytest.approx((a["ss_task"] - 7 * a["ms_residual"]) / (a["ss_total"] + a["ms_residual"]))


# ------------------------------------------------------------------ scale: within-level headline
@pytest.mark.slow
def test_scale_level_effect_alone_is_not_significant_within_level():
    """Floors and acquisition steps differ by level only (no task effect): the old pooled rho is ~0.8
    with p < 0.05 under an exchangeable permutation; per level and with a within-level permutation
    the correlation is not significant (~95% of simulations)."""
    rng = np.random.default_rng(2)
    st = {**ST, "n_resamples": 999}
    tasks = ["copy", "rev", "cmp", "par", "add", "mod", "sort", "mul"]
    n_sim, by_level_ns, pooled_ns, acq_ns, naive_sig, pooled_rho = 40, [], [], [], [], []
    for _ in range(n_sim):
        pres = [make_pre(task, lv, size, floor=10 ** (1.5 * li + rng.normal(scale=0.5)), tr=10, steps=10 ** 7,
                         acq=int(100 * 10 ** (1.5 * li + rng.normal(scale=0.5))))
                for li, lv in enumerate(["L1", "L2", "L3"]) for task in tasks for size in ["nano", "micro"]]
        toy = scale.scale_invariance(pres, st)["families"]["toy"]
        fl = toy["floors"]["rankme"]
        by_level_ns += [v["pairs"][0]["p"] > 0.05 for v in fl["by_level"].values()]
        assert all(v["pairs"][0]["n"] == 8 for v in fl["by_level"].values())
        pooled = fl["pooled_levels"]["pairs"][0]
        pooled_ns.append(pooled["p"] > 0.05)
        pooled_rho.append(pooled["rho"])
        acq_ns += [v["pairs"][0]["p"] > 0.05 for v in toy["acquisition_order"]["dropped"]["by_level"].values()]
        u = {(p["task"], p["level"], p["size"]): p["measures"]["rankme"]["floor"] for p in pres}
        a = [u[(t, lv, "nano")] for lv in ["L1", "L2", "L3"] for t in tasks]
        b = [u[(t, lv, "micro")] for lv in ["L1", "L2", "L3"] for t in tasks]
        naive_sig.append(spearman_exact(a, b, n_resamples=999).p < 0.05)   # units treated as exchangeable
    assert np.median(pooled_rho) > 0.7 and np.mean(naive_sig) > 0.9       # what the old pooled statistic said
    assert np.mean(by_level_ns) >= 0.88 and np.mean(pooled_ns) >= 0.85 and np.mean(acq_ns) >= 0.88


def test_scale_holm_over_levels_and_verdicts_use_adjusted_p():
    pres = [make_pre(t, lv, s, floor=1.0 + ti + 0.01 * si, acq=100 * (ti + 1), tr=10)
            for lv in ["L1", "L2", "L3"] for ti, t in enumerate(["copy", "rev", "cmp", "par", "add"])
            for si, s in enumerate(["nano", "micro"])]
    fl = scale.scale_invariance(pres, ST)["families"]["toy"]["floors"]["rankme"]
    for lv in ["L1", "L2", "L3"]:
        e = fl["by_level"][lv]["pairs"][0]
        assert e["p"] == pytest.approx(2 / 120) and e["p_holm"] == pytest.approx(3 * 2 / 120)
        assert e["verdict"] == "no significant correlation"        # raw 0.017 < 0.05, Holm 0.05 is not
        assert fl["by_level"][lv]["matrix"]["p_holm"][0][1] == pytest.approx(0.05)
    assert fl["pooled_levels"]["pairs"][0]["n"] == 15 and "within" in fl["pooled_levels"]["test"]


# ------------------------------------------------------------------ seeds nested in cells, controls left out
def test_seeds_are_nested_in_cells_and_controls_left_out(tmp_path):
    tasks = ["copy", "rev", "cmp", "par", "add", "mod"]
    pres = []
    for ti, t in enumerate(tasks):
        for si, s in enumerate(["nano", "micro"]):
            for seed, f in zip([0, 1, 2], [1.0, 0.3, 4.0]):      # median over seeds = the planted floor
                pres.append(make_pre(t, "L1", s, seed=seed, floor=(ti + 1) * f, acq=100 * (ti + 1) + seed, tr=10))
            pres.append(make_pre(t, "L1", s, control="shuffled", floor=10.0 - ti if si else 1.0 + ti,
                                 acq=None, tr=10))             # reversed at micro: would break rho = 1
    toy = scale.scale_invariance(pres, ST)["families"]["toy"]
    e = toy["floors"]["rankme"]["by_level"]["L1"]["pairs"][0]
    assert e["n"] == 6 and e["seeds_per_cell"] == "3" and e["rho"] == pytest.approx(1.0)
    assert toy["n_cells"] == 12 and toy["seeds_per_cell"] == "3" and toy["n_runs"] == 36
    assert scale.scale_invariance(pres, ST)["n_control_runs_left_out"] == 12
    fl = floors.collapse_floors(pres)
    assert len(fl) == 36 and not fl["run"].str.endswith("_shuffled").any()
    sp = floors.floor_spread(fl, ST)
    assert list(sp["n_sizes"]) == [2] * 6 and set(sp["n_seeds_per_size"]) == {"3 3"}
    assert sp.set_index("task").loc["rev", "floor_median"] == pytest.approx(2.0)
    summ = floors.floor_summary(fl, sp, ST)
    assert summ["measures"]["rankme"]["L1"]["seeds_per_cell"] == "3" and summ["n_cells_used"] == 12
    assert not topdown.top_down(pres)["run"].str.endswith("_shuffled").any()
    assert len(behaviour.emergence(pres)) == 36
    res = prediction.prediction(rates.measure_rows(pres, 0.1), ST)
    assert res["n_control_runs_left_out"] == 12 and res["n_cells"] == 12 and res["seeds_per_cell"] == "3"


# ------------------------------------------------------------------ prediction
def test_prediction_needs_a_transition_cross_scale_and_diverged_excluded():
    tasks = ["copy", "rev", "cmp", "par", "add", "mod"]
    pres = []
    for ti, t in enumerate(tasks):
        for s in ["nano", "micro"]:
            acq = 1000 * (ti + 1)
            collapsed = not (t == "copy" and s == "nano")
            # copy at nano never collapsed: the argmin of its flat curve is late noise (step 9000)
            pres.append(make_pre(t, "L1", s, acq=acq, tr=acq // 4 if collapsed else 9000, collapsed=collapsed,
                                 steps=10 ** 5))
    pres.append(make_pre("mul", "L1", "nano", acq=50, tr=10, steps=10 ** 5))
    dv = make_pre("mul", "L1", "micro", acq=None, tr=10, steps=10 ** 5, diverged=True)
    dv.update(acquired=True, acquisition_step=90000)         # acquired, then diverged: must not make reversals
    pres.append(dv)
    res = prediction.prediction(rates.measure_rows(pres, 0.1), ST)
    wc = res["within_class"]["rankme"]["acquired"]["pooled"]
    assert wc["concordance"] == 1.0 and wc["discordant"] == 0       # the non-collapsed run predicts nothing
    rv = res["reversals"]["pairs"][0]
    assert rv["reversed_pairs"] == 0 and rv["n_cells_acquired_at_both"] == 6
    assert res["n_diverged_runs_left_out"] == 1
    cs = res["cross_scale"][0]
    assert (cs["a"], cs["b"]) == ("nano", "micro")
    c = cs["by_measure"]["rankme"]["L1"]
    assert c["n"] == 5 and c["rho"] == pytest.approx(1.0) and c["p"] == pytest.approx(2 / 120)
    assert c["n_without_transition_or_unacquired"] == 1
    same = res["same_size"]["micro"]["rankme"]["L1"]
    assert same["n"] == 6 and same["rho"] == pytest.approx(1.0) and same["p"] == pytest.approx(2 / 720)


# ------------------------------------------------------------------ top-down: sign test, ties, diverged, recovery
def test_top_down_sign_test_ties_and_diverged_runs():
    down = layer_events({"embed": 0, "block0": 40, "block1": 30, "block2": 20, "ln_final": 10})
    tau0 = layer_events({"embed": 0, "block0": 20, "block1": 10, "block2": 20})        # tau = 0: neither way
    tasks = ["copy", "rev", "cmp", "par", "add", "mod", "sort", "mul", "copy"]
    pres = [make_pre(t, "L1" if i < 8 else "L2", "nano", per_layer=down) for i, t in enumerate(tasks)]
    pres += [make_pre("copy", "L3", "nano", per_layer=tau0)]
    pres += [make_pre(t, "L3", "nano", per_layer=down, diverged=True) for t in ["rev", "cmp"]]
    td = topdown.top_down(pres)
    assert td.set_index("task").loc["copy"].query("level == 'L3'")["status"].iloc[0].startswith("tied")
    s = topdown.top_down_summary(td, ST)["rankme"]
    a = s["all"]
    assert (a["top_down"], a["bottom_up"], a["tied_tau0"], a["runs"]) == ("9/9", "0/9", 1, 10)
    assert s["n_diverged_runs_excluded"] == 2
    assert a["sign_test_p"] == pytest.approx(2 / 512) and a["verdict"] == "top-down"
    assert s["cells_all"]["top_down"] == "9/9"
    assert s["by_task"]["copy"]["p_holm"] is not None and "recovery" in s


def test_top_down_recovery_order_and_ln_final_merged_with_last_block():
    pl = layer_events({"embed": 0, "block0": 40, "block1": 20, "ln_final": 30})
    r = topdown.run_order(pl)
    # block1 and ln_final are one residual stream: one unit, so ln_final's 30 > block1's 20 is no evidence
    assert r["units"] == "block0 block1+ln_final" and r["top_down"] is True and r["top_down_strict"] is True
    pl["block0"]["collapsed"] = False                       # only block1 and ln_final left: one unit
    assert topdown.run_order(pl)["status"].startswith("undetermined")
    rec = layer_events({"embed": 0, "block0": 10, "block1": 20, "block2": 30})
    for name, step in [("block0", 100), ("block1", 200), ("block2", 300)]:
        rec[name]["recovery_step"] = step
    r = topdown.run_order(rec)
    assert r["recovery_direction"] == "bottom-up" and r["recovery_kendall_tau_depth_vs_step"] == pytest.approx(1.0)


def test_paired_leads_compare_events_of_the_same_kind():
    """The onset row pairs the measure's onset with the loss's onset, the extreme row its
    extreme with the loss's extreme (hand-made rows: onsets lead by 10 steps in every run,
    extremes lag by 5), and a measure that did not transition has no event."""
    import pandas as pd
    from geoanatomy.analysis.rates import ROW_COLUMNS, paired_leads
    rows = []
    for i in range(6):
        rows.append({c: None for c in ROW_COLUMNS} | {
            "run": f"r{i}", "measure": "rankme", "kind": "geometric", "control": "", "acquired": True,
            "diverged": False, "difficulty": "hard", "transitioned": i < 5, "onset_step": 100 + i,
            "loss_onset_step": 110 + i, "extreme_step": 205 + i, "loss_extreme_step": 200 + i})
    out = paired_leads(pd.DataFrame(rows, columns=ROW_COLUMNS), {"n_bootstrap": 200, "seed": 0})
    hard = out[out["difficulty"] == "hard"].set_index("event")
    assert hard.loc["onset", "reference"] == "loss onset" and hard.loc["extreme", "reference"] == "loss extreme"
    assert hard.loc["onset", "n_pairs"] == 5 and hard.loc["onset", "wins"] == 5
    assert hard.loc["onset", "median_lead_steps"] == 10
    assert hard.loc["extreme", "losses"] == 5 and hard.loc["extreme", "median_lead_steps"] == -5


def test_a_summary_refuses_to_pool_one_task_level_made_with_different_task_parameters(tmp_path):
    """rev L1 with sequence length 4 in one seed and 6 in another are two tasks, not one cell:
    the summary stops, naming the parameter, both values and the runs."""
    a, b = make_pre("rev", acq=100, tr=40), make_pre("rev", acq=120, tr=50)
    b["run"], b["seed"] = "rev_L1_nano_s1", 1
    a["level_params"], b["level_params"] = {"length": 4}, {"length": 6}
    write(tmp_path, [a, b])
    with pytest.raises(SummaryInputError, match=r"task-level parameters level_params.length at task level rev L1"
                                                r" differ: 4 in rev_L1_nano.*6 in rev_L1_nano_s1"):
        summarize_run("tables", sorted(str(x) for x in tmp_path.glob("*/precursor.json")), tmp_path / "s", settings())
    b["level_params"] = {"length": 4}
    write(tmp_path, [a, b])
    summarize_run("tables", sorted(str(x) for x in tmp_path.glob("*/precursor.json")), tmp_path / "s", settings())
