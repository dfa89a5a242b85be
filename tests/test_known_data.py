"""The committed known-transition data (docs/known/data: snapshots of config/known_grok.yaml,
known_grok_nowd.yaml and known_ind.yaml): the claims table, the runs table and the figure of
docs/known-transitions.md are what ``geoanatomy report known`` computes from them, and the
figure draws exactly its rows."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geoanatomy.analysis.known import EVENT_STYLE, draw_runs, figure_rows, read_grid, scaled
from geoanatomy.analysis.tables import read_table
from geoanatomy.report.known import figure_run, known_report, runs_markdown

DOCS = Path(__file__).resolve().parents[1] / "docs" / "known"
GRIDS = [DOCS / "data" / g for g in ("known_grok", "known_grok_nowd", "known_ind")]


@pytest.fixture(scope="module")
def recomputed(tmp_path_factory):
    out = tmp_path_factory.mktemp("known")
    table = known_report(GRIDS, out)
    return out, table


@pytest.mark.parametrize("name", ["known_claims.csv", "known_runs.csv"])
def test_the_committed_tables_are_recomputed_from_the_snapshots(recomputed, name):
    out, _ = recomputed
    got, want = read_table(out / name), read_table(DOCS / name)
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-9)


def test_the_docs_page_shows_the_recomputed_claims(recomputed):
    _, table = recomputed
    page = (DOCS.parent / "known-transitions.md").read_text()
    assert table in page
    assert runs_markdown(read_table(DOCS / "known_runs.csv")) in page


@pytest.mark.parametrize("grid", [0, 2])
def test_the_figure_draws_each_signals_scaled_curve_and_the_behavioural_events(grid):
    g = read_grid(GRIDS[grid])
    run = figure_run(g)
    fig = draw_runs([(g, run)])
    ax = fig.axes[0]
    curves, ev, beh = figure_rows(g, run)
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert names == [s for s in ev["signal"] if s in curves] and len(names) >= 10
    for i, s in enumerate(names):                       # row i: the signal's measured checkpoints, scaled
        v = curves[s].to_numpy(float)
        drawn = np.ma.filled(ax.collections[i].get_array().ravel().astype(float), np.nan)
        np.testing.assert_allclose(drawn, scaled(v[np.isfinite(v)]), equal_nan=True)
    vlines = sorted(ln.get_xdata()[0] for ln in ax.get_lines() if ln.get_linestyle() in ("--", "-", ":"))
    assert vlines == sorted(float(beh[k]) + 1 for k in EVENT_STYLE if beh.get(k) is not None)   # step + 1
