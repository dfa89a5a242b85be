"""geoanatomy.report.findings: the findings of docs/study.md printed from verdict.csv, as a
table and claim by claim. Checked against a hand-made verdict.csv: every row appears once with
its own numbers and word, and the page's generated block is replaced without touching the rest."""
from pathlib import Path

import pandas as pd

from geoanatomy.analysis.tables import write_csv
import pytest

REPO = Path(__file__).resolve().parents[1]
from geoanatomy.report import findings as ft  # noqa: E402

ROWS = [
    dict(claim="timing beyond the loss curve", measure="rankme", variant="uncentred", event="onset",
         statistic="partial Spearman", value=-0.16, ci_lo=None, ci_hi=None, ci_level=None,
         second_statistic="gain over the loss curve", second_value=-0.031, second_ci_lo=-0.22, second_ci_hi=0.104,
         effect_of_interest=None, n_units=28, n_runs=56, null="Freedman-Lane", p_holm=1.0, rule="greater",
         verdict="not reproduced", power=0.97, underpowered=False, stable=True),
    dict(claim="log-prob before accuracy", measure="accuracy", variant="", event="",
         statistic="median lead (steps)", value=12.0, ci_lo=0.0, ci_hi=60.75, ci_level=0.95,
         second_statistic="relative lead", second_value=0.08, second_ci_lo=0.0, second_ci_hi=0.2,
         effect_of_interest=0.25, bound=0.17, n_units=30, n_runs=59, null="sign test", p_holm=0.023, rule="lead",
         verdict="not reproduced", power=1.0, underpowered=False, stable=False),
    dict(claim="top-down propagation", measure="rankme_centred", variant="centred", event="",
         statistic="share top-down", value=0.75, ci_lo=0.48, ci_hi=0.93, ci_level=0.95,
         second_statistic="", second_value=None, second_ci_lo=None, second_ci_hi=None,
         effect_of_interest=None, n_units=16, n_runs=64, null="1/2", p_holm=0.038, rule="greater",
         verdict="inconclusive", power=None, underpowered=None, stable=None),
]


@pytest.fixture
def summary(tmp_path):
    write_csv(pd.DataFrame(ROWS), tmp_path / "verdict.csv", "verdict", [])     # with its manifest, as the summary
    return tmp_path


def test_by_claim_has_every_row_once_with_its_numbers(summary):
    text = ft.by_claim(summary)
    bullets = [line for line in text.splitlines() if line.startswith("* ")]
    assert len(bullets) == len(ROWS)
    timing, lead, topdown = (next(b for b in bullets if b.startswith(p))
                             for p in ("* rankme (uncentred), onset", "* accuracy:", "* rankme_centred (centred)"))
    assert "**not reproduced**" in timing and "-0.03 [-0.22, 0.10]" in timing and "28 cells (56 runs)" in timing
    assert "power 0.97" in timing and timing.endswith("seed halves agree.")
    assert "12.00 [0.00, 60.75] (0.95 interval)" in lead and "**seed halves disagree**" in lead
    assert "one-sided 95% bound vs smallest effect of interest 0.17 < 0.25" in lead
    assert "power not simulated" in topdown and "not testable" in topdown and "**inconclusive**" in topdown
    # each claim once, with the study's statement, in its figure family's section
    assert text.count("**timing beyond the loss curve.** The study:") == 1
    assert text.index("(figure verdict_timing.png)") < text.index("* rankme (uncentred), onset")
    assert text.index("(figure verdict_lags.png)") < text.index("* accuracy:") < text.index("(figure "
                                                                                            "verdict_topdown.png)")
    assert "(figure verdict_floors.png)" not in text        # no row of that family: no section


def test_write_block_replaces_only_the_generated_part(summary, tmp_path):
    page = tmp_path / "study.md"
    page.write_text(f"# head\n\n{ft.BY_CLAIM_BEGIN}\nold text\n{ft.BY_CLAIM_END}\n\n## tail\n")
    assert ft.write_block(page, ft.by_claim(summary))
    s = page.read_text()
    assert s.startswith("# head\n") and s.endswith("## tail\n") and "old text" not in s
    assert s.count("* rankme (uncentred), onset") == 1
    assert not ft.write_block(page, ft.by_claim(summary))     # second time: nothing to change
    (tmp_path / "bare.md").write_text("no markers\n")
    with pytest.raises(ValueError, match="bare.md: no block"):
        ft.write_block(tmp_path / "bare.md", "x")
