"""Run-level expensive measures and probes on a tiny trained run: checkpoint subset, table
format, CLI with --spec, precursor.json entries."""
import json

import numpy as np
import pytest

from geoanatomy.cli import main as cli_main
from geoanatomy import detectors as ev
from geoanatomy.config import job_spec
from geoanatomy.measures import MEASURES, TABLE_MEASURES
from geoanatomy.schedule import measure_steps
from geoanatomy.stages.measures import train_sample
from geoanatomy.table import COLUMNS, read_table
from geoanatomy.stages.events import precursor_of_run
from geoanatomy.stages.common import build

@pytest.mark.slow
def test_train_sample_excludes_heldout_and_is_fixed(trained_run):
    _, spec, _ = trained_run
    _, data = build(spec)
    a, b = train_sample(data, 50, "llc"), train_sample(data, 50, "llc")
    assert np.array_equal(a, b) and not np.array_equal(a, train_sample(data, 50, "grad_rank"))
    inputs = a[:, 1:1 + data.spec.n_in]                                  # copy: [COPY] digits = digits
    assert not data.is_heldout(inputs).any()


@pytest.mark.slow
def test_measures_and_probes_via_cli(copy_of_trained_run):
    cfg, spec, rd = copy_of_trained_run
    assert cli_main(["measures", "--spec", job_spec(cfg, spec.name, "measures").to_json(),
                     "--threads", "1", "--device", "cpu"]) == 0
    assert cli_main(["probes", "--spec", job_spec(cfg, spec.name, "probes").to_json(),
                     "--threads", "1", "--device", "cpu"]) == 0
    m = read_table(rd / "measures.csv")
    assert list(m.columns) == COLUMNS
    steps = sorted(set(m["step"]))
    ck = json.loads((rd / "train.json").read_text())["checkpoint_steps"]
    # the fixed schedule: n_points checkpoints evenly spaced by index, first and last included
    assert steps == measure_steps(ck, cfg["measures"]["n_points"]) and steps[0] == ck[0] and steps[-1] == ck[-1]
    assert len(steps) == cfg["measures"]["n_points"] < len(ck)
    assert set(m["measure"]) == set(TABLE_MEASURES)
    assert set(m.loc[m["measure"] == "grad_erank", "variant"]) == {"roy_vetterli", "rankme", "eig"}
    g = m[(m["measure"] == "grad_erank") & (m["variant"] == "roy_vetterli")]
    assert ((g["value"] >= 1) & (g["value"] <= 6 + 1e-9)).all() and (g["n_samples"] == 6).all()
    llc = m[m["measure"] == "llc"]
    st = json.loads(llc["settings"].iloc[0])
    for k in ("eps", "gamma", "n_beta", "chains", "draws", "burnin", "batch_size", "flags", "clean", "per_chain",
              "schedule", "eps_nbeta_lambda"):
        assert k in st, k
    tiny = MEASURES["llc"].tiny_settings()
    assert st["chains"] == tiny["chains"] and st["draws"] == tiny["draws"] and len(st["per_chain"]) == tiny["chains"]
    h = json.loads(m.loc[m["measure"] == "hessian_top", "settings"].iloc[0])
    tiny = MEASURES["hessian"].tiny_settings()
    assert h["max_iter"] == tiny["max_iter"] and 1 <= h["iterations"] <= tiny["max_iter"]
    assert h["batch_size"] == tiny["batch_size"]
    # probes: at every checkpoint behaviour is scored at (metrics.csv's), every layer,
    # per answer position + mean
    p = read_table(rd / "probes.csv")
    assert list(p.columns) == COLUMNS
    assert sorted(set(p["step"])) == sorted(set(read_table(rd / "metrics.csv")["step"])) == ck
    assert set(p["layer"]) == {"embed", "block0", "block1", "ln_final"}
    assert {"first", "answer_1", "answer_3", "answer_mean"} <= set(p["position"])
    assert (p.loc[p["measure"] == "probe_accuracy", "n_samples"] == 20).all()
    # same config and seed -> the same numbers; and the schedule does not read the outcome:
    # a run whose metrics say it learned at another step (here: no metrics.csv at all, then
    # one whose accuracy is overwritten) is measured at the same checkpoints
    before = (rd / "measures.csv").read_text()
    metrics = (rd / "metrics.csv").read_text()
    (rd / "metrics.csv").unlink()
    cli_main(["measures", "--spec", job_spec(cfg, spec.name, "measures").to_json(),
              "--threads", "1", "--device", "cpu"])
    assert (rd / "measures.csv").read_text() == before
    (rd / "metrics.csv").write_text(metrics)

    # precursor.json gains the four measures and the probes entry
    pre = precursor_of_run(spec, rd, cfg["events"])[0]
    for name in TABLE_MEASURES:
        e = pre["measures"][name]
        keys = (("floor", "floor_step", "collapse_step", "recovery_step", "collapsed") if e["direction"] == "collapse"
                else ("peak", "peak_step", "rise_step", "settle_step", "risen"))
        for k in ("layer", "init", "precursor", "gap_steps", "transition", "settings", "n_flagged", *keys):
            assert k in e, (name, k)
        assert e["layer"] == "all_params"
    assert pre["measures"]["llc"]["direction"] == "rise" and "peak_step" in pre["measures"]["llc"]
    assert pre["measures"]["llc"]["transition"] in ("rise", "peak", "settle")
    assert pre["measures"]["llc"]["settings"]["eps"] == cfg["measures"]["llc"]["eps"]
    pr = pre["probes"]
    assert set(pr["per_layer"]) == {"embed", "block0", "block1", "ln_final"}
    assert pr["per_layer"]["embed"]["constant_by_construction"] is True
    json.dumps(pre, allow_nan=False)


def test_rise_events():
    steps = [0, 10, 20, 30, 40, 50, 60]
    r = ev.rise_events(steps, [1, 1, 2, 6, 10, 4, 3], persist=2)
    assert r["risen"] and r["peak"] == 10 and r["peak_step"] == 40
    assert r["rise_step"] == 30                                          # first value >= 1 + 0.5 * (10 - 1)
    assert r["settle_step"] == 50                                       # <= 10 / 1.25 = 8 for 2 points
    flat = ev.rise_events(steps, [5, 5, 5.5, 6, 6, 6, 6])
    assert not flat["risen"] and flat["rise_step"] is None


@pytest.mark.slow
def test_llc_traces_and_the_calibration_sweep(copy_of_trained_run, tmp_path):
    """llc_traces.csv holds every chain's loss at every SGLD step of each measured checkpoint,
    and its draws give back measures.csv's estimate (n_beta * (mean draw loss - init_loss));
    the traces are out of measures.csv's settings. llc-calibrate at the stage's own (eps,
    n_beta) runs the stage's chains: the same estimate at that checkpoint; its figure draws its
    traces table; a bad step size is refused in one line."""
    import pandas as pd

    from geoanatomy.analysis.tables import read_table as read_checked
    from geoanatomy.stages.measures import TRACE_KEY
    cfg, spec, rd = copy_of_trained_run
    cfg = {**cfg, "measures": {**cfg["measures"], "which": ["hessian", "llc"]}}
    assert cli_main(["measures", "--spec", job_spec(cfg, spec.name, "measures").to_json(), "--threads", "1",
                     "--device", "cpu"]) == 0
    m = read_table(rd / "measures.csv")
    llc = m[m["measure"] == "llc"].reset_index(drop=True)
    tr = read_checked(rd / "llc_traces.csv")
    st0 = json.loads(llc["settings"].iloc[0])
    assert TRACE_KEY not in st0
    assert sorted(set(tr["step"])) == sorted(llc["step"])
    assert len(tr) == len(llc) * st0["chains"] * (st0["burnin"] + st0["draws"])
    for r in llc.itertuples():
        st = json.loads(r.settings)
        t = tr[(tr["step"] == r.step) & (tr["phase"] == "draw")]
        want = st["n_beta"] * (t["loss"].mean() - st["init_loss"])
        assert r.value == pytest.approx(want, rel=1e-5, abs=1e-9), r.step      # measures.csv keeps 7 digits
        assert (tr.loc[tr["step"] == r.step, "phase"] == "burnin").sum() == st["chains"] * st["burnin"]
    # the sweep: the stage's own setting gives the stage's number at that checkpoint
    from geoanatomy.cli.llc import main as llc_main
    step = int(llc["step"].iloc[-1])
    out = tmp_path / "cal"
    assert llc_main([str(rd), "--step", str(step), "--eps", str(st0["eps"]), "1e-6", "--n-beta", str(st0["n_beta"]),
                     "--out", str(out)]) == 0
    s = read_checked(out / "llc_calibration.csv")
    assert len(s) == 2 and set(s["eps"]) == {st0["eps"], 1e-6}
    own = s[s["eps"] == st0["eps"]].iloc[0]
    assert own["llc"] == pytest.approx(float(llc["value"].iloc[-1]), rel=1e-5, abs=1e-9)
    t = read_checked(out / "llc_calibration_traces.csv")
    assert len(t) == 2 * st0["chains"] * (st0["burnin"] + st0["draws"])
    assert (out / "llc_calibration.png").stat().st_size > 5000
    from geoanatomy.stages.llc_calibration import draw
    fig = draw(s, [list(x) for x in t.itertuples(index=False)])
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.lines if ln.get_gid()}
    sel = t[(t["eps"] == st0["eps"]) & (t["chain"] == 0)]
    assert list(lines[f"trace:{st0['eps']:g}:{st0['n_beta']:g}:0"].get_ydata()) == pytest.approx(list(sel["loss"]))
    with pytest.raises(SystemExit):
        llc_main([str(rd), "--eps", "-1"])
    assert llc_main([str(rd), "--step", "999999"]) == 2                  # one line naming the step, no traceback
    pd.testing.assert_frame_equal(read_checked(out / "llc_calibration.csv"), s)
