"""headline.png / headline.csv: the table is what the runs' precursor.json files say, computed
here by hand from the committed study snapshot; the figure draws that table and the verdict's
timing rows, point for point; its answer is in words taken from the primary row; the runs'
and machines' line is in the PNG's metadata, not on the figure; the page's copy is today's."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geoanatomy.analysis import figstyle
from geoanatomy.analysis import figures_headline as fh
from geoanatomy.analysis.load import load_precursors
from geoanatomy.analysis.settings import summary_settings
from geoanatomy.analysis.summarize import run as summarize_part
from geoanatomy.analysis.tables import read_table

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "docs" / "study" / "data"


@pytest.fixture(scope="module")
def study():
    pres = load_precursors(sorted(str(p) for p in DATA.glob("*/precursor.json")))
    st = summary_settings(json.loads((DATA / "summary" / "floor_summary.json").read_text())["settings"])
    return pres, st, read_table(DATA / "summary" / "verdict.csv")


def _by_hand(pres, measure):
    """Per study cell: median floor step over the acquired seeds whose RankMe collapsed and whose
    loss curve has an extreme (NaN when fewer than half of the acquired seeds have both)."""
    cells = {}
    for p in pres:
        if p.get("control") or p.get("diverged"):
            continue
        cells.setdefault((p["task"], p["level"], p["size"]), []).append(p)
    out = {}
    for k, runs in cells.items():
        acq = [p for p in runs if p["acquired"]]
        fl = [p["measures"][measure]["floor_step"] for p in acq if p["measures"][measure].get("collapsed")
              and p["measures"][measure].get("floor_step") is not None
              and (p.get("loss_events") or {}).get("extreme_step") is not None]
        t_acq = float(np.median([p["acquisition_step"] if p["acquired"] else np.inf for p in runs]))
        out[k] = (t_acq, float(np.median(fl)) if acq and 2 * len(fl) >= len(acq) else np.nan)
    return out


def test_the_table_is_what_the_runs_say(study):
    pres, st, _ = study
    t = fh.headline_table(pres, st)
    hand = _by_hand(pres, fh.headline_measure(st))
    cells = t[t["control"] == ""]
    assert len(cells) == len(hand) == 32
    for r in cells.itertuples():
        t_acq, floor = hand[(r.task, r.level, r.size)]
        assert r.t_acq == t_acq
        assert (np.isnan(r.t_floor) and np.isnan(floor)) or r.t_floor == floor, (r.task, r.level, r.size)
    ctrl = t[t["control"] != ""]
    assert len(ctrl) == sum(bool(p.get("control")) for p in pres) and (ctrl["runs"] == 1).all()
    for r in ctrl.itertuples():
        p = next(p for p in pres if p.get("control") and (p["task"], p["level"], p["size"]) == (r.task, r.level,
                                                                                               r.size))
        m = p["measures"][fh.headline_measure(st)]
        assert (r.t_floor == m["floor_step"]) if m.get("collapsed") else np.isnan(r.t_floor)


def _points(fig, gid):
    arts = [c for ax in fig.axes for c in ax.collections if c.get_gid() == gid]
    assert len(arts) == 1, gid
    return np.asarray(arts[0].get_offsets(), dtype=float)


def test_the_figure_draws_the_table_and_the_timing_rows(study):
    pres, st, v = study
    t = fh.headline_table(pres, st)
    fig = fh.draw_headline(t, v, st, fh.verdict_counts(v))
    acquired = t[(t["control"] == "") & np.isfinite(t["t_acq"])]
    for col in fh.EVENTS:
        d = acquired[np.isfinite(acquired[col])]
        xy = _points(fig, f"cells:{col}")
        assert np.allclose(xy[:, 0], d["t_acq"] + 1) and np.allclose(xy[:, 1], d[col] + 1)
    never = t[(t["control"] == "") & ~np.isfinite(t["t_acq"]) & np.isfinite(t["t_floor"])]
    assert np.allclose(_points(fig, "never:cells")[:, 1], never["t_floor"] + 1)
    ctrl = t[(t["control"] != "") & np.isfinite(t["t_floor"])]
    assert np.allclose(np.sort(_points(fig, "never:controls")[:, 1]), np.sort(ctrl["t_floor"] + 1))
    rows = fh.timing_rows(v)
    assert str(rows.iloc[0]["family"]).endswith("(primary)") and len(rows) == 4
    assert set(zip(rows["variant"], rows["event"])) == {(a, b) for a in ("uncentred", "centred")
                                                        for b in ("onset", "extreme")}
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.lines if ln.get_gid()}
    for i, r in rows.iterrows():
        assert lines[f"row:{i}"].get_xdata()[0] == pytest.approx(r["value"])
        assert list(lines[f"ci:{i}"].get_xdata()) == pytest.approx([r["ci_lo"], r["ci_hi"]])
    assert lines["effect"].get_xdata()[0] == pytest.approx(float(rows.iloc[0]["effect_of_interest"]))
    texts = " ".join(t.get_text() for t in fig.texts)
    # the answer in words, from the primary row, and no provenance header on the figure
    p = rows.iloc[0]
    assert {"not reproduced": "No.", "reproduced": "Yes.", "inconclusive": "Not decided."}[p["verdict"]] in texts
    assert f"{p['value']:.2f}" in texts and f"over {int(p['n_units'])} cells" in texts
    assert "sha256" not in texts and "machine" not in texts
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_the_answer_follows_the_primary_word():
    row = {"verdict": "reproduced", "value": 0.5, "ci_lo": 0.35, "ci_hi": 0.7, "ci_level": 0.9, "n_units": 40,
           "n_runs": 80, "effect_of_interest": 0.3, "bound": 0.35}
    q, ev = fh.answer(row, "centred")
    assert q.endswith("Yes.") and "over 40 cells (80 runs)" in ev and "excludes" not in ev
    q, ev = fh.answer({**row, "verdict": "not reproduced", "value": 0.0, "bound": 0.2}, "centred")
    assert q.endswith("No.") and "bound 0.20 excludes r >= 0.3" in ev
    q, ev = fh.answer({**row, "verdict": "inconclusive"}, "uncentred")
    assert q.endswith("Not decided.") and "(uncentred floor)" in q


def test_the_part_writes_the_table_and_keeps_provenance_in_the_metadata(study, tmp_path):
    out = tmp_path / "summary"
    out.mkdir()
    for f in ("verdict.csv", "verdict.csv-metadata.json"):
        (out / f).write_bytes((DATA / "summary" / f).read_bytes())
    pres, st, v = study
    files = summarize_part("headline", sorted(str(p) for p in DATA.glob("*/precursor.json")), out, st,
                           log=lambda *a: None)
    assert {Path(f).name for f in files} == {"headline.csv", "headline.png"}
    t = read_table(out / "headline.csv")
    want = fh.headline_table(pres, st)
    pd.testing.assert_frame_equal(t[["task", "level", "size", "control"]].fillna("").astype(str),
                                  want[["task", "level", "size", "control"]].astype(str))
    assert np.allclose(t["t_floor"].astype(float), want["t_floor"], equal_nan=True)
    meta = figstyle.figure_metadata(out / "headline.png")
    assert meta["Title"] == fh.answer(fh.timing_rows(v).iloc[0].to_dict(), st["headline_variant"])[0]
    assert "73 runs" in meta["Description"] and "machine" in meta["Description"]
    # the page's copy (docs/study/headline.png) says what today's code makes of the snapshot
    page = figstyle.figure_metadata(REPO / "docs" / "study" / "headline.png")
    assert page["Title"] == meta["Title"] and page["Description"] == meta["Description"], (
        "docs/study/headline.png is stale: geoanatomy summarize headline --precursors docs/study/data/*/precursor.json"
        " --out <a copy of docs/study/data/summary>, then copy headline.png to docs/study/")


def test_tables_html_opens_with_the_verdict_at_a_glance(study, tmp_path):
    """tables.html: the headline figure embedded, then verdict.csv's compact view (one row per
    verdict row, its word, estimate and interval, n, bound vs effect; power only beside the words
    it qualifies), sortable, with every column folded below; long text cells folded."""
    import re

    from geoanatomy.analysis.tables import FOLD_CHARS, compact_verdict, tables_html
    _, _, v = study
    c = compact_verdict(v)
    assert len(c) == len(v) and list(c["word"]) == list(v["verdict"]) and list(c["row"]) == list(range(1, len(v) + 1))
    for (_, r), (_, g) in zip(v.iterrows(), c.iterrows()):
        if r["verdict"] == "not reproduced" and np.isfinite(r["effect_of_interest"]):
            assert g["bound vs smallest effect"] == f"{r['bound']:.3g} vs {r['effect_of_interest']:g}"
        if r["verdict"] in ("reproduced", "descriptive"):
            assert g["power (where it qualifies the word)"] == ""
        if np.isfinite(r["value"]):
            assert g["estimate [interval]"].startswith(f"{r['value']:.3g}")
    png = (REPO / "docs" / "study" / "headline.png").read_bytes()
    page = tables_html([("verdict.csv", ["a note"], v), ("other.csv", [], pd.DataFrame({"x": ["y" * 300]}))],
                       "t", png)
    assert page.index("data:image/png;base64,") < page.index("<h2 id='verdict.csv'>")
    first = re.search(r"<table class='sortable'><thead><tr>(.*?)</tr></thead><tbody>(.*?)</tbody>", page, re.S)
    assert re.findall(r"<th>(.*?)</th>", first.group(1))[:4] == ["row", "claim", "measure", "word"]
    assert first.group(2).count("<tr>") == len(v)
    assert "every column of verdict.csv (35)" in page and "addEventListener('click'" in page
    assert "<details><summary>" + "y" * (FOLD_CHARS - 31) in page or "(more)</summary>" in page
