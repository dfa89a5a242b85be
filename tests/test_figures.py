"""Figures draw exactly the table rows the statistics use, one panel per run present, and
event lines only for events that happened (synthetic per-run tables, no training)."""
from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest

from geoanatomy import detectors as ev
from geoanatomy.analysis import behaviour, figures_runs, figures_summary, floors, rates, scale
from geoanatomy.analysis.load import load_precursors
from geoanatomy.cli.summarize import make_settings
from geoanatomy.config import DEFAULTS
from geoanatomy.plots import draw_run
from geoanatomy.precursor.seal import seal
from geoanatomy.precursor import difficulty, probe_entry, rankme_entry
from geoanatomy.table import curve, read_table, write_table

E = dict(DEFAULTS["events"])
STEPS = [0, 1, 2, 3, 5, 8, 13, 20, 30, 50, 80, 120, 200, 300, 500, 800, 1000]
N_PARAMS = {"nano": 409088, "micro": 1353408}
TASKS = ["copy", "rev", "cmp", "par", "mod"]
LAYERS = ["embed", "block0", "ln_final"]
# run: (task, level, size, seed, control, step accuracy rises at (None: never), RankMe dip step (None: flat))
RUNS = [("copy", "L1", "nano", 0, "", 40, 10), ("copy", "L1", "micro", 0, "", 30, 8),
        ("mod", "L1", "nano", 0, "shuffled", None, 20),
        ("par", "L3", "nano", 0, "", 300, 50), ("par", "L3", "nano", 1, "", 500, 80),
        ("par", "L3", "nano", 2, "", 200, None)]
OTHER_EVENTS = {"par_L3_nano": {"logprob_emergence_step": 200, "loss_plateau_exit_step": 120},
                "copy_L1_nano": {"logprob_emergence_step": 30}}
PROBED = "par_L3_nano_s1"


def _name(task, level, size, seed, control):
    return f"{task}_{level}_{size}" + (f"_{control}" if control else "") + (f"_s{seed}" if seed else "")


def _rows(run, task, size, rise, dip, probes=False):
    """Metrics rows of one synthetic run; first-token accuracy zig-zags and the other RankMe
    position/variant differ, so a curve read without its position or variant would not match."""
    x = np.log(np.asarray(STEPS, float) + 1)
    acc = 1 / (1 + np.exp(-8 * (x - np.log(rise + 1)))) if rise else np.full(len(x), 0.02)
    first = np.where(np.arange(len(x)) % 2, 0.7, 0.0)               # zig-zag, then learned half-way to rise
    if rise:
        first = np.where(np.asarray(STEPS) >= rise / 2, 0.95, first)
    base = 10.0 + 2 * TASKS.index(task) + list(N_PARAMS).index(size)
    shape = (1 - 0.7 * np.exp(-(x - np.log(dip + 1)) ** 2 / 0.5)) if dip else 1 + 0.01 * np.sin(np.arange(len(x)))
    out = []

    def add(step, measure, value, layer="output", li=-1, position="answer", variant="", settings=""):
        out.append({"run": run, "step": step, "measure": measure, "layer": layer, "layer_index": li,
                    "position": position, "variant": variant, "n_samples": 200, "value": float(value),
                    "settings": settings})
    for k, s in enumerate(STEPS):
        add(s, "accuracy", acc[k])
        add(s, "accuracy", first[k], position="first")
        add(s, "accuracy_norm", (acc[k] - 0.1) / 0.9)
        add(s, "accuracy_norm", (first[k] - 0.2) / 0.8, position="first")
        add(s, "token_accuracy", (acc[k] + first[k]) / 2)
        add(s, "loss", 3.0 * (1 - acc[k]) + 0.1, variant="train")
        add(s, "loss", 3.1 * (1 - acc[k]) + 0.2, variant="heldout")
        for li, layer in enumerate(LAYERS):
            v = 1.0 if layer == "embed" else base * (1 + 0.3 * li) * shape[k]
            add(s, "rankme", v, layer, li, "first", "uncentred")
            add(s, "rankme", 1.5 * v + 1, layer, li, "first", "centred")
            add(s, "rankme", 0.5 * v + 3, layer, li, "answer_mean", "uncentred")
            add(s, "mean_share", 0.5 + 0.01 * li, layer, li, "first")
    probe_rows = []
    if probes:
        for k, s in enumerate(STEPS):
            for li, layer in enumerate(LAYERS[1:], start=1):
                pa = 1 / (1 + np.exp(-8 * (x[k] - np.log(rise / (2 * li) + 1))))
                for m, v in (("probe_accuracy_norm", pa), ("probe_accuracy", 0.5 + pa / 2), ("probe_chance", 0.5)):
                    probe_rows.append({"run": run, "step": s, "measure": m, "layer": layer, "layer_index": li,
                                       "position": "first", "variant": "", "n_samples": 100, "value": float(v),
                                       "settings": {"constant_by_construction": False}})
    return out, probe_rows


def _precursor(run, task, level, size, seed, control, df, pdf=None) -> dict:
    """A precursor.json dict from the table by the events code (acquisition, RankMe entries)."""
    s, an = curve(df, "accuracy_norm", position="answer")
    t_acq = ev.acquisition_step(s, an, E["acquisition_threshold"], E["persist"])
    s1, a1 = curve(df, "accuracy_norm", position="first")
    t_first = ev.acquisition_step(s1, a1, E["acquisition_threshold"], E["persist"])
    pre = {"schema_version": 2, "run": run, "task": task, "level": level, "size": size, "seed": seed,
           "control": control, "n_params": N_PARAMS[size], "steps": STEPS[-1], "n_checkpoints": len(STEPS),
           "diverged": False, "acquired": t_acq is not None, "acquisition_step": t_acq,
           "first_token_acquisition_step": t_first, "logprob_emergence_step": None, "loss_plateau_exit_step": None,
           "difficulty": difficulty(t_acq, E["easy_max_step"]), "final_accuracy": 1.0,
           "chance_accuracy": 0.1, "events_settings": E,
           "measures": {n: rankme_entry(df, v, t_acq, E, 200, 1e-7)
                        for n, v in (("rankme", "uncentred"), ("rankme_centred", "centred"))},
           "loss_events": {"onset_step": STEPS[2], "half_step": STEPS[4], "extreme_step": None}}
    pre.update(OTHER_EVENTS.get(run, {}))
    if pdf is not None:
        pre["probes"] = probe_entry(pdf, t_acq, E, "ln_final", t_first)
    return json.loads(json.dumps(pre))


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """(pres, metrics) of RUNS written as real per-run files and read back by the summary code."""
    root = tmp_path_factory.mktemp("results")
    paths, metric_paths = [], []
    for task, level, size, seed, control, rise, dip in RUNS:
        run = _name(task, level, size, seed, control)
        d = root / run
        d.mkdir()
        rows, prows = _rows(run, task, size, rise, dip, probes=run == PROBED)
        write_table(d / "metrics.csv", rows)
        pdf = None
        if prows:
            write_table(d / "probes.csv", prows)
            pdf = read_table(d / "probes.csv")
        pre = _precursor(run, task, level, size, seed, control, read_table(d / "metrics.csv"), pdf)
        (d / "precursor.json").write_text(json.dumps(seal(pre)))
        paths.append(d / "precursor.json")
        metric_paths.append(d / "metrics.csv")
    pres = load_precursors(paths)
    return pres, figures_runs.load_metrics(pres, metric_paths)


def _xy(artist):
    x, y = artist.get_data()
    return np.asarray(x, float), np.asarray(y, float)


def _line(ax, gid):
    found = [ln for ln in ax.get_lines() if ln.get_gid() == gid]
    assert len(found) == 1, f"{gid}: {[ln.get_gid() for ln in ax.get_lines()]}"
    return found[0]


def _same_curve(artist, steps, values):
    x, y = _xy(artist)
    np.testing.assert_array_equal(x, np.asarray(steps, float) + 1)
    np.testing.assert_allclose(y, values, rtol=0, atol=0)


def _twin(fig, ax):
    """The twinx of ``ax``: the other axes at the same place."""
    twins = [a for a in fig.axes if a is not ax and np.allclose(a.get_position().bounds, ax.get_position().bounds)]
    assert len(twins) == 1
    return twins[0]


def _events_drawn(ax) -> set:
    return {str(ln.get_gid())[len("event:"):] for ln in ax.get_lines() if str(ln.get_gid()).startswith("event:")}


def _happened(pre, keys) -> set:
    """Events that happened, read from the precursor dict independently of the figure code."""
    rm = pre["measures"]["rankme"]
    out = {k for k in ("acquisition_step", "logprob_emergence_step", "loss_plateau_exit_step")
           if k in keys and pre.get(k) is not None}
    return out | {k for k in ("collapse_step", "floor_step", "recovery_step")
                  if k in keys and rm["collapsed"] and rm.get(k) is not None}


def _plain_ticks(fig, ax, which="x"):
    fig.canvas.draw()
    labels = [t.get_text() for t in (ax.get_xticklabels() if which == "x" else ax.get_yticklabels()) if t.get_text()]
    assert labels and all(re.fullmatch(r"\d+(\.\d+)?", t) for t in labels), labels
    return labels


def test_synthetic_grid_has_what_the_checks_need(grid):
    pres, _ = grid
    by = {p["run"]: p for p in pres}
    assert not by["par_L3_nano_s2"]["measures"]["rankme"]["collapsed"]          # flat: an unchanged curve
    assert by["par_L3_nano_s2"]["acquired"] and by["par_L3_nano_s2"]["measures"]["rankme"]["gap_steps"] is not None
    assert all(by[r]["measures"]["rankme"]["collapsed"] for r in by if r != "par_L3_nano_s2")
    assert not by["mod_L1_nano_shuffled"]["acquired"] and by["copy_L1_nano"]["acquired"]


@pytest.mark.parametrize("level", ["L1", "L3"])
def test_trajectories_one_panel_per_run_with_the_rows_the_events_read(grid, level):
    pres, metrics = grid
    runs = [p for p in pres if p["level"] == level]
    fig = figures_runs.draw_trajectories(pres, metrics, level)
    panels = [a for a in fig.axes if a.get_title()]
    assert len(panels) == len(runs)
    titles = [a.get_title().split("\n")[0] for a in panels]
    assert len(set(titles)) == len(titles)
    if level == "L3":
        assert [t.split(" (")[0] for t in titles] == ["par L3 nano s0", "par L3 nano s1", "par L3 nano s2"]
    else:
        assert any(t.startswith("mod L1 nano shuffled control") and "unlearned" not in t for t in titles)
    assert not any("no result" in t.get_text() for a in fig.axes for t in a.texts)
    for ax, pre in zip(panels, runs):
        df, rm = metrics[pre["run"]], pre["measures"]["rankme"]
        _same_curve(_line(ax, "accuracy_norm:answer"), *curve(df, "accuracy_norm", position="answer"))
        _same_curve(_line(_twin(fig, ax), f"rankme:{rm['layer']}:{rm['position']}:{rm['variant']}"),
                    *curve(df, "rankme", layer=rm["layer"], position=rm["position"], variant=rm["variant"]))
        want = _happened(pre, ("acquisition_step", "floor_step", "logprob_emergence_step", "loss_plateau_exit_step"))
        assert _events_drawn(ax) == want
        for key in want:
            step = pre.get(key, rm.get(key))
            assert _xy(_line(ax, f"event:{key}"))[0][0] == step + 1
    _plain_ticks(fig, panels[-1])


def test_heatmaps_one_panel_per_run_with_the_headline_rows(grid):
    pres, metrics = grid
    runs = [p for p in pres if p["level"] == "L3"]
    fig = figures_runs.draw_heatmaps(pres, metrics, "L3")
    panels = [a for a in fig.axes if a.get_title()]
    assert len(panels) == len(runs)
    for ax, pre in zip(panels, runs):
        rm = pre["measures"]["rankme"]
        mesh = [c for c in ax.collections if c.get_gid() == f"heatmap:{pre['run']}"][0]
        z = np.ma.getdata(mesh.get_array()).reshape(len(LAYERS), len(STEPS))
        mask = np.ma.getmaskarray(mesh.get_array()).reshape(len(LAYERS), len(STEPS))
        for li, layer in enumerate(LAYERS):
            s, v = curve(metrics[pre["run"]], "rankme", layer=layer, position=rm["position"], variant=rm["variant"])
            if rm["per_layer"][layer]["constant_by_construction"]:
                assert mask[li].all()
            else:
                np.testing.assert_allclose(z[li], np.log2(v / v[0]))


def test_probe_curves_read_the_probe_position_and_first_token_behaviour(grid):
    pres, metrics = grid
    fig = figures_runs.draw_probe_curves(pres, metrics, behaviour.probes(pres))
    panels = [a for a in fig.axes if a.get_title()]
    assert len(panels) == 1 and panels[0].get_title().startswith("par L3 nano s1")
    ax, pre = panels[0], next(p for p in pres if p["run"] == PROBED)
    df = metrics[PROBED]
    for layer in LAYERS[1:]:
        _same_curve(_line(ax, f"probe_accuracy_norm:first:{layer}"),
                    *curve(df, "probe_accuracy_norm", position="first", layer=layer))
    _same_curve(_line(ax, "accuracy_norm:first"), *curve(df, "accuracy_norm", position="first"))
    t = pre["probes"]["behaviour_acquisition_step"]
    assert t == pre["first_token_acquisition_step"] and t is not None
    assert _xy(_line(ax, "event:behaviour_acquisition_step"))[0][0] == t + 1


def test_floors_by_task_draws_the_cells_floor_spread_uses(grid):
    pres, _ = grid
    fl = floors.collapse_floors(pres)
    fig = figures_summary.draw_floors_by_task(fl)
    cells = floors.cell_floors(fl[fl["measure"] == "rankme"])
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.get_lines() if str(ln.get_gid()).startswith("cells:")}
    assert set(lines) == {f"cells:{r.level}:{r.task}" for r in cells.itertuples()}
    for gid, ln in lines.items():
        _, lv, task = gid.split(":")
        c = cells[(cells["level"] == lv) & (cells["task"] == task)].sort_values("n_params")
        x, y = _xy(ln)
        np.testing.assert_array_equal(x, c["n_params"].astype(float))
        np.testing.assert_allclose(y, c["floor"].astype(float))
    assert cells[cells["task"] == "par"]["n_seeds"].tolist() == [3]
    pts = np.concatenate([c.get_offsets() for ax in fig.axes for c in ax.collections
                          if str(c.get_gid()).startswith("runs:")])
    study = [p for p in pres if not p["control"]]
    assert sorted(pts[:, 1].tolist()) == pytest.approx(sorted(p["measures"]["rankme"]["floor"] for p in study))


def test_lead_lag_only_transitions_the_precursor_rule_counts(grid):
    pres, _ = grid
    fig = figures_summary.draw_lead_lag(rates.measure_rows(pres, 0.1))
    ax = fig.axes[0]
    pts = {c.get_gid(): c.get_offsets()[:, 1] for c in ax.collections if str(c.get_gid()).startswith("lead:")}
    want = [p["acquisition_step"] - p["measures"]["rankme"]["transition_step"] for p in pres
            if p["acquired"] and not p["control"] and p["measures"]["rankme"]["collapsed"]]
    assert sorted(pts["lead:steps:rankme"].tolist()) == sorted(want)
    lp = [p["acquisition_step"] - p["logprob_emergence_step"] for p in pres
          if p["acquired"] and p["logprob_emergence_step"] is not None]
    assert sorted(pts["lead:steps:logprob_emergence"].tolist()) == sorted(lp)


def _rho_pres(tmp_path, levels_tasks: dict) -> list[dict]:
    """Precursor dicts of a grid: every task of a level at both sizes, floors and acquisition
    steps ordered by task at each size."""
    out = []
    for level, tasks in levels_tasks.items():
        for (ti, task), size in itertools.product(enumerate(tasks), N_PARAMS):
            run = _name(task, level, size, 0, "")
            rows, _ = _rows(run, task, size, 30 + 20 * ti, 10 + ti)
            write_table(tmp_path / f"{run}.csv", rows)
            out.append(_precursor(run, task, level, size, 0, "", read_table(tmp_path / f"{run}.csv")))
    return out


def test_rho_matrix_draws_only_cells_with_a_rho(tmp_path):
    st = make_settings()
    sc = scale.scale_invariance(_rho_pres(tmp_path, {"L1": TASKS[:4], "L3": TASKS[:2], "L2": TASKS[:3]}), st)
    fig = figures_summary.draw_rho_matrix(sc)
    panels = [a for a in fig.axes if a.get_title()]
    toy = sc["families"]["toy"]
    # (floors, acquisition order) x (L1, L2): L3's matrices (n = 2) have no rho, so no panel of
    # their own, named in the title instead
    assert len(panels) == 4 and not any("level L3" in a.get_title() for a in panels)
    assert "level L3" in fig._suptitle.get_text() and "not drawn" in fig._suptitle.get_text()
    for ax in panels:
        title = ax.get_title()
        lv = re.search(r"level (L\d)", title).group(1)
        src = toy["floors"]["rankme"] if "floors" in title else toy["acquisition_order"]["censored_last"]
        m = src["by_level"][lv]["matrix"]
        im = [i for i in ax.get_images() if i.get_gid() == "rho"][0]
        arr = im.get_array()
        for i, j in itertools.product(range(2), range(2)):
            drawn = not np.ma.getmaskarray(arr)[i, j]
            assert drawn == (i != j and m["rho"][i][j] is not None and m["n"][i][j] >= figures_summary.RHO_MIN_N)
            if drawn:
                assert arr[i, j] == pytest.approx(m["rho"][i][j])
        texts = [t.get_text() for t in ax.texts if t.get_gid() == "not drawn"]
        assert texts == [] and m["n"][0][1] == {"L1": 4, "L2": 3}[lv]
    only_two = scale.scale_invariance(_rho_pres(tmp_path, {"L3": TASKS[:2]}), st)
    fig = figures_summary.draw_rho_matrix(only_two)
    assert not [a for a in fig.axes if a.get_images()]
    note = [t.get_text() for a in fig.axes for t in a.texts if t.get_gid() == "placeholder"]
    assert len(note) == 1 and "no size pair with n >= 3" in note[0] and "n = 2" in note[0]


@pytest.mark.slow
@pytest.mark.parametrize("run", ["par_L3_nano_s1", "par_L3_nano_s2", "mod_L1_nano_shuffled", "par_L3_nano"])
def test_run_figure_draws_table_rows_and_only_events_that_happened(grid, run):
    pres, metrics = grid
    pre, df = next(p for p in pres if p["run"] == run), metrics[run]
    fig = draw_run(df, pre)
    ax1, axl, axv, ax3 = fig.axes[:4]                # the four panels, in order; twin axes come after
    rm = pre["measures"]["rankme"]
    # the loss curve the verdict asks geometry to beat, with its events that happened
    for variant in ("train", "heldout"):
        steps, vals = curve(df, "loss", position="answer", variant=variant)
        if len(steps):
            _same_curve(_line(axl, f"loss:{variant}"), steps, vals)
        else:
            assert not [ln for ln in axl.get_lines() if ln.get_gid() == f"loss:{variant}"]
    le = pre.get("loss_events") or {}
    assert {ln.get_gid() for ln in axl.get_lines() if str(ln.get_gid()).startswith("loss_event:")} == {
        f"loss_event:{k}" for k in ("onset_step", "half_step", "extreme_step") if le.get(k) is not None}
    _same_curve(_line(ax1, "accuracy:answer"), *curve(df, "accuracy", position="answer"))
    _same_curve(_line(ax1, "accuracy:first"), *curve(df, "accuracy", position="first"))
    _same_curve(_line(_twin(fig, ax1), "rankme:uncentred"),
                *curve(df, "rankme", layer=rm["layer"], position=rm["position"], variant="uncentred"))
    _same_curve(_line(axv, "rankme:centred"),
                *curve(df, "rankme", layer=rm["layer"], position=rm["position"], variant="centred"))
    for layer in LAYERS:
        _same_curve(_line(ax3, f"rankme:{layer}"),
                    *curve(df, "rankme", layer=layer, position=rm["position"], variant=rm["variant"]))
    keys = ("acquisition_step", "logprob_emergence_step", "loss_plateau_exit_step", "collapse_step", "floor_step",
            "recovery_step")
    assert _events_drawn(ax1) == _happened(pre, keys)
    floors_drawn = {g for g in _events_drawn(axv) if g.endswith("floor_step")}
    assert floors_drawn == {f"{n}:floor_step" for n in ("rankme", "rankme_centred") if pre["measures"][n]["collapsed"]}
    title = ax1.get_title()
    # the class with the rule that gave it (post-hoc here: the run's own step against easy_max_step)
    emax = pre["events_settings"]["easy_max_step"]
    assert {"easy": f"easy: acquired by step {emax}", "hard": f"hard: acquired after step {emax}",
            "unlearned": "unlearned: never acquired"}[pre["difficulty"]] in title
    if not rm["collapsed"]:
        assert "uncentred: no collapse" in title and "gap" not in title.split(";")[0]
    if not pre["acquired"]:
        assert "gap" not in title
    assert {"1", "10", "100", "1000"} <= set(_plain_ticks(fig, ax3, "x"))
    _plain_ticks(fig, ax3, "y")
    tags = [t for t in ax1.texts if str(t.get_gid()).startswith("event_tag:")]
    assert len(tags) == len(_happened(pre, keys))
    boxes = [t.get_window_extent() for t in tags]
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b)


def _verdict_frame():
    """verdict.csv-shaped rows: a timing row (drawn: its gain), an equivalence row, per-size
    rows sharing one label, a row with no estimate, a mixture-protocol row."""
    import pandas as pd
    from geoanatomy.analysis.verdict import VERDICT_COLUMNS
    base = {c: None for c in VERDICT_COLUMNS}
    rows = [
        dict(base, claim="timing beyond the loss curve", measure="rankme_centred", variant="centred", event="onset",
             protocol="single-task", statistic="partial Spearman", value=-0.17, ci_lo=None, ci_hi=None,
             second_statistic="leave-one-cell-out gain", second_value=-0.10, second_ci_lo=-0.41, second_ci_hi=-0.02,
             n_units=12, n_runs=18, null_value=0.0, rule="greater", verdict="not reproduced", power=0.25, stable=True),
        dict(base, claim="timing beyond the loss curve", measure="llc", variant="sgld", event="extreme",
             protocol="single-task", statistic="partial Spearman", value=None, second_value=None,
             n_units=2, n_runs=2, null_value=0.0, rule="greater", verdict="inconclusive"),
        dict(base, claim="easy cells: transition simultaneous with acquisition", measure="rankme", variant="uncentred",
             event="transition", protocol="single-task", statistic="mean lag (decades)", value=-0.57, ci_lo=-0.65,
             ci_hi=-0.50, n_units=8, n_runs=8, null_value=0.1, rule="equivalence", verdict="not reproduced",
             power=1.0, stable=False),
        dict(base, claim="MOD floor near 2.0", measure="rankme", variant="uncentred", protocol="single-task",
             statistic="mean over MOD cells at nano of log10(floor / 2.0)", value=-0.27, ci_lo=-0.3, ci_hi=-0.2,
             n_units=1, n_runs=3, null_value=0.1, rule="equivalence", verdict="inconclusive"),
        dict(base, claim="MOD floor near 2.0", measure="rankme", variant="uncentred", protocol="single-task",
             statistic="mean over MOD cells at micro of log10(floor / 2.0)", value=-0.26, ci_lo=-0.28, ci_hi=-0.25,
             n_units=1, n_runs=1, null_value=0.1, rule="equivalence", verdict="inconclusive"),
        dict(base, claim="top-down propagation", measure="rankme", variant="uncentred", protocol="mixture",
             statistic="share top-down", value=1.0, ci_lo=0.59, ci_hi=1.0, n_units=7, n_runs=21, null_value=0.5,
             rule="greater", verdict="reproduced", power=0.63),
    ]
    return pd.DataFrame(rows)


def test_verdict_figures_draw_each_row_of_verdict_csv_and_no_row_without_an_estimate():
    from geoanatomy.analysis import figures_verdict as fv
    v = _verdict_frame()
    drawn_all = set()
    for fam in fv.FAMILIES:
        fig = fv.draw_family(v, fam)
        for ax in fig.axes:
            for ln in ax.get_lines():
                gid = ln.get_gid() or ""
                if not gid.startswith(("row:", "ci:")):
                    continue
                kind, rest = gid.split(":", 1)
                claim, i = rest.rsplit(":", 1)
                r = v.iloc[int(i)].to_dict()
                assert r["claim"] == claim == ax.get_gid()
                _, x, lo, hi = fv.row_estimate(r)
                if kind == "row":
                    assert list(ln.get_xdata()) == [x]
                    drawn_all.add(int(i))
                else:
                    assert list(ln.get_xdata()) == [lo, hi]
    # every row with an estimate is drawn once; the one without is not
    assert drawn_all == {0, 2, 3, 4, 5}
    assert fv.row_estimate(v.iloc[0].to_dict())[1:] == (-0.17, None, None)   # the partial r, no interval
    assert fv.panel_labels(v.iloc[3:5].to_dict("records")) == ["rankme (uncentred) [nano]", "rankme (uncentred) "
                                                                                            "[micro]"]
    assert fv.row_label(v.iloc[5].to_dict()) == "rankme (uncentred) [mixture]"


def test_verdict_figure_families_cover_every_claim_once_and_match_the_registry():
    from geoanatomy.analysis import figures_verdict as fv
    from geoanatomy.analysis import claims, parts
    named = [c for cs in fv.FAMILIES.values() for c in cs]
    assert len(named) == len(set(named))
    assert {c.name for c in claims.CLAIMS} <= set(named), {c.name for c in claims.CLAIMS} - set(named)
    assert parts.BY_NAME["claims"].files() == [f"figures/verdict_{f}.png" for f in fv.FAMILIES]


def test_a_lead_row_draws_its_relative_lead_against_the_clear_gap_that_decides_its_colour():
    """Rule lead reads 'not reproduced' when the relative lead's interval lies below f even
    though the lead in steps is significantly above 0: the figure must draw what decided it
    (the relative lead, a dotted line at f), not the step lead against 0."""
    import pandas as pd
    from geoanatomy.analysis import figures_verdict as fv
    from geoanatomy.analysis.verdict import VERDICT_COLUMNS, Evidence
    from geoanatomy.analysis.verdict import word as _word

    def word(*a, **kw):
        return _word(Evidence(*a, **kw))
    base = {c: None for c in VERDICT_COLUMNS}
    lead = dict(base, claim="log-prob before accuracy", measure="accuracy", protocol="single-task",
                statistic="median lead (steps)", value=12.0, ci_lo=2.0, ci_hi=60.0, p_holm=0.01,
                second_statistic="median relative lead", second_value=0.04, second_ci_lo=0.01, second_ci_hi=0.12,
                effect_of_interest=0.25, n_units=30, n_runs=59, null_value=0.0, rule="lead")
    lead["verdict"] = word(0.01, 2.0, 12.0, 30, 0.0, rule="lead", ci_hi=60.0, second_lo=0.01, second_hi=0.12,
                           effect_of_interest=0.25, bound=0.11)
    assert lead["verdict"] == "not reproduced"      # the sign test alone would have said reproduced
    probe = dict(lead, claim="probes before behaviour", rule="greater", effect_of_interest=None,
                 verdict="reproduced", value=30.0, ci_lo=15.0, ci_hi=39.0)
    v = pd.DataFrame([lead, probe])
    fig = fv.draw_family(v, "lags")
    axes = {ax.get_gid(): ax for ax in fig.axes if ax.get_gid()}
    lines = {ln.get_gid(): ln for ax in axes.values() for ln in ax.get_lines() if ln.get_gid()}
    assert list(lines["row:log-prob before accuracy:0"].get_xdata()) == [0.04]
    assert list(lines["ci:log-prob before accuracy:0"].get_xdata()) == [0.01, 0.12]
    assert list(lines["effect:log-prob before accuracy"].get_xdata()) == [0.25, 0.25]
    assert list(lines["row:probes before behaviour:1"].get_xdata()) == [30.0]     # rule greater: the steps
    assert "effect:probes before behaviour" not in lines
    assert any("lead 12 steps" in t.get_text() for t in axes["log-prob before accuracy"].texts)
