"""The notebook API (geoanatomy.open_run, open_summary): the page docs/python-api.md runs as
written on a trained run and the committed default-grid summary; what it returns equals the
files; a tampered file is refused with the stage's message."""
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import geoanatomy
from conftest import quiet

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run_with_events(trained_run, tmp_path_factory):
    from geoanatomy.config import job_spec
    from geoanatomy.stages.events import run as events_run
    cfg, spec, run_dir = trained_run
    d = tmp_path_factory.mktemp("api") / run_dir.name
    shutil.copytree(run_dir, d)
    events_run(job_spec(cfg, spec.name, "events").run, d, cfg["events"], log=quiet)
    return d


def test_the_page_runs_as_written(run_with_events):
    page = (REPO / "docs" / "python-api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 3
    code = "\n".join(blocks[:2]).replace('"results/mod_L3_nano"', repr(str(run_with_events))).replace(
        '"results/summary"', repr(str(REPO / "docs" / "validation" / "data" / "summary"))).replace(
        'events_table("results")', f'events_table({str(run_with_events.parent)!r})')
    ns: dict = {}
    exec(compile(code, "docs/python-api.md", "exec"), ns)
    assert ns["rm"].direction == "down" and len(ns["headline"]) >= 1
    assert ns["batch"].first == ns["batch"].answer_positions[0] and len(ns["floors"]) == 1
    assert "precursor_benchmark" in ns["summary"].tables and list(ns["bench"].columns)[:2] == ["signal", "event"]


def test_objects_equal_the_files(run_with_events):
    import json
    run = geoanatomy.open_run(run_with_events)
    pre = json.loads((run_with_events / "precursor.json").read_text())
    assert run.events.acquisition_step == pre["acquisition_step"]
    assert run.events.curves["rankme"].extreme_step == pre["measures"]["rankme"]["floor_step"]
    s, v = run.curve("rankme", layer="ln_final", position="first", variant="uncentred")
    df = run.metrics
    want = df[(df.measure == "rankme") & (df.layer == "ln_final") & (df.position == "first")
              & (df.variant == "uncentred")].sort_values("step")
    assert np.array_equal(v, want["value"].to_numpy()) and list(s) == run.steps
    with pytest.raises(ValueError, match="unknown measure 'rankmee' in metrics.csv \\(did you mean 'rankme'\\?\\)"):
        run.curve("rankmee")
    m, hf = run.model(run.steps[-1]), run.model(run.steps[-1], hf=True)
    x = torch.randint(0, m.cfg.vocab_size, (2, 8))
    with torch.no_grad():
        assert torch.allclose(m(x), hf(x).logits, atol=1e-5)


def test_a_tampered_table_or_unknown_step_is_refused(run_with_events, tmp_path):
    from geoanatomy.errors import CheckpointError
    from geoanatomy.table import TableError
    d = tmp_path / run_with_events.name
    shutil.copytree(run_with_events, d)
    p = d / "metrics.csv"
    p.write_text(p.read_text().replace(",rankme,", ",rankmx,", 1))
    run = geoanatomy.open_run(d)
    with pytest.raises(TableError, match="metrics.csv"):
        run.metrics
    with pytest.raises(CheckpointError, match="no checkpoint at step 7777"):
        run.model(7777)
    with pytest.raises(FileNotFoundError, match="no verdict.csv"):
        geoanatomy.open_summary(tmp_path)


def test_the_eval_batch_is_the_metrics_stages_set(trained_run, run_with_events):
    """run.eval_batch() gives the sequences the metrics stage measured, in its order (built here
    the stage's way from the run's spec), at the size metrics.csv records, and the positions: the
    first answer-predicting position and the answer's; RankMe of the project's model at
    ``first`` equals the table's."""
    from geoanatomy.measures.rankme import rankme
    from geoanatomy.stages.common import task_data
    spec = trained_run[1]
    run = geoanatomy.open_run(run_with_events)
    b = run.eval_batch()
    m = run.metrics
    n = int(m[m.measure == "rankme"]["n_samples"].iloc[0])
    want = task_data(spec).eval_set(n)
    assert b.n_samples == n and np.array_equal(b.sequences, want)
    assert b.n_answer == task_data(spec).spec.n_answer and b.first == want.shape[1] - 1 - b.n_answer
    assert np.array_equal(b.answers, want[:, -b.n_answer:]) and b.inputs.shape == (n, want.shape[1] - 1)
    assert np.array_equal(run.eval_batch(7).sequences, want[:7])
    step = run.steps[-1]
    model = run.model(step)
    with torch.no_grad():
        _, hidden = model(torch.as_tensor(b.inputs), return_hidden=True)
    row = m[(m.measure == "rankme") & (m.step == step) & (m.layer == "ln_final") & (m.position == "first")
            & (m.variant == "uncentred")].iloc[0]
    assert rankme(hidden[-1][:, b.first, :], eps=1e-7) == pytest.approx(row["value"], rel=1e-4)


def test_events_table_is_every_runs_precursor_json(run_with_events):
    """One row per run and curve, the numbers of open_run(...).events; the committed study
    snapshot: 73 runs, each with both RankMe variants."""
    df = geoanatomy.events_table(run_with_events.parent)
    ev = geoanatomy.open_run(run_with_events).events
    rm = df[df["curve"] == "rankme_centred"].iloc[0]
    assert rm["extreme_step"] == ev.curves["rankme_centred"].floor_step
    same = lambda a, b: (a is pd.NA and b is None) or a == b  # noqa: E731  (a missing step: NA in an Int64 column)
    assert same(rm["acquisition_step"], ev.acquisition_step) and same(rm["loss_onset_step"], ev.loss_onset_step)
    study = geoanatomy.events_table(REPO / "docs" / "study" / "data")
    assert study["run"].nunique() == 73
    assert (study.groupby("run")["curve"].apply(lambda c: {"rankme", "rankme_centred"} <= set(c))).all()
    with pytest.raises(FileNotFoundError, match="no run folder"):
        geoanatomy.events_table(REPO / "docs")


def test_layers_join_a_transformer_lens_cache(trained_run, run_with_events, tmp_path):
    """The page's recipe (docs/python-api.md, third block): RankMe computed from a TransformerLens 4
    cache of the exported run on ``run.eval_batch()``, at the hook the table's ``hook`` column
    names, equals the table's value for every residual layer."""
    pytest.importorskip("transformer_lens")
    from transformer_lens.model_bridge import TransformerBridge

    from geoanatomy.export import export_run
    from geoanatomy.measures.rankme import rankme
    run = geoanatomy.open_run(run_with_events)
    step = run.steps[-1]
    export_run(run_with_events, tmp_path / "hf", steps=[step], log=quiet)
    bridge = TransformerBridge.boot_transformers(str(tmp_path / "hf" / f"checkpoint-{step}"), device="cpu")
    df = run.metrics
    rows = df[(df.measure == "rankme") & (df.step == step) & (df.position == "first") & (df.variant == "uncentred")
              & (df.hook != "")]
    assert set(rows["layer"]) >= {"embed", "block0", "ln_final"}
    batch = run.eval_batch()
    first = batch.first
    with torch.no_grad():
        _, cache = bridge.run_with_cache(torch.as_tensor(batch.inputs))
    checked = 0
    for _, r in rows.iterrows():
        if r["layer"] == "embed":
            continue                        # the same token at the same position in every row: rank one
        got = rankme(cache[r["hook"]][:, first, :].detach(), eps=1e-7)
        assert got == pytest.approx(r["value"], rel=1e-4), r["layer"]
        checked += 1
    assert checked >= 2
