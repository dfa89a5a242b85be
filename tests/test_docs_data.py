"""The pages that quote a grid's findings are generated from data committed beside them
(docs/study/data/, docs/validation/data/; geoanatomy report snapshot), so they cannot drift:

* every generated block of the page (findings table, findings claim by claim, per-run grid
  tables) equals what ``geoanatomy report pages`` makes from the committed data;
* the committed summary (the study's, the confirmation's, the validation grid's and the
  known-transition grids') is what the summary code makes of the committed runs today: every
  table and statistics file recomputed from the runs' precursor.json (the power simulation's
  verdict_power.csv taken as committed: it alone takes minutes) keeps the recheck's promise
  (``geoanatomy.report.recheck``): every word, count and piece of text identical, every number
  equal to relative 1e-9. Byte equality would hold on the machine that made the snapshot only:
  another CPU's float path changes last digits (an AVX2 machine against the AVX-512 one).

A changed statistic fails the second test until the data are regenerated; an edited number on
the page fails the first."""
from pathlib import Path

import pytest

from geoanatomy.analysis.settings import summary_settings
from geoanatomy.analysis.summarize import run as summarize_part
from geoanatomy.report.data import FINDINGS_BEGIN, page_blocks, write_pages
from geoanatomy.report.findings import block
from geoanatomy.report.recheck import REL, recheck

REPO = Path(__file__).resolve().parents[1]
PAGES = [(REPO / "docs" / "study.md", REPO / "docs" / "study" / "data"),
         (REPO / "docs" / "validation.md", REPO / "docs" / "validation" / "data")]
BLOCK_PAGES = PAGES + [(REPO / "docs" / "benchmark.md", REPO / "docs" / "study" / "data")]
PAGES = [(p, d) for p, d in PAGES if d.is_dir()]
# every committed grid snapshot whose summary is recomputed: the pages' and the confirmations'
# (config/study_confirm.yaml and study_confirm2.yaml, fresh seeds; their page blocks are the
# study page's two confirmation tables)
SNAPSHOTS = [d for _, d in PAGES] + [d for d in [REPO / "docs" / "study" / c for c in ("confirm_data", "confirm2_data")]
                                     if d.is_dir()]
# the known-transition grids' snapshots (docs/known-transitions.md; about 7 s each)
SNAPSHOTS += sorted(d for d in (REPO / "docs" / "known" / "data").glob("known_*") if (d / "summary").is_dir())


@pytest.mark.parametrize("page,data", BLOCK_PAGES, ids=lambda x: x.name)
def test_page_blocks_are_generated_from_the_committed_data(page, data):
    blocks = page_blocks(page, data)
    assert blocks, f"{page.name} has no generated block"
    if page.name != "benchmark.md":
        assert (FINDINGS_BEGIN, "<!-- end of findings table -->") in blocks, f"{page.name} has no findings table"
    text = page.read_text()
    for (begin, end), new in blocks.items():
        assert block(text, begin, end, page.name) == new.strip("\n"), (
            f"{page.name}: the block {begin!r} is not what the data say; regenerate it: "
            f"geoanatomy report pages {page.relative_to(REPO)} {data.relative_to(REPO)}")


def test_an_edited_number_on_a_page_is_caught(tmp_path):
    page, data = PAGES[0]
    copy = tmp_path / page.name
    text = page.read_text()
    start = text.index(FINDINGS_BEGIN)
    row = text.index("| 1 |", start)
    cell = text.index("0.", row)                    # the first decimal number of row 1
    copy.write_text(text[:cell] + ("9" if text[cell + 2] != "9" else "8") + text[cell + 1:])
    assert write_pages(copy, data, check=True) == [FINDINGS_BEGIN]
    assert write_pages(page, data, check=True) == []


@pytest.mark.slow
@pytest.mark.parametrize("data", SNAPSHOTS, ids=lambda x: f"{x.parent.name}/{x.name}")
def test_the_committed_summary_is_recomputed_from_the_committed_runs(data, monkeypatch):
    # the summary settings the grid was summarised with, as its summary records them (the
    # confirmation's name the frozen rules: checked again here, from the repository root)
    monkeypatch.chdir(REPO)
    bad = recheck(data)
    assert not bad, (f"{data.relative_to(REPO)}/summary differs from what the summary code makes of the committed "
                     f"runs beyond the recheck's promise (words identical, numbers to relative {REL:g}):\n"
                     + "\n".join(bad[:20]))


@pytest.mark.slow
def test_summarize_figures_of_a_snapshot_draw_what_precursor_json_alone_gives(tmp_path):
    """A snapshot has no metrics.csv: the figures part draws the figures of precursor.json
    alone and leaves the per-run curves out, instead of refusing."""
    page, data = PAGES[-1]
    pres = sorted(str(p) for p in data.glob("*/precursor.json"))
    files = summarize_part("figures", pres, tmp_path, summary_settings(), log=lambda *a: None)
    names = {Path(f).name for f in files}
    assert {"floors_by_task.png", "lead_lag.png", "rho_matrix.png"} <= names
    assert not any(n.startswith(("trajectories_", "rankme_heatmap_", "probes")) for n in names)
