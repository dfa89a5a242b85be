"""geoanatomy report confirm: each verdict row's word on fresh seeds beside its exploratory word,
checked on hand-made verdict.csv pairs whose answer is known."""
import json

import pandas as pd
import pytest

from geoanatomy.analysis.tables import write_csv
from geoanatomy.report.confirm import compare_rows, confirmation_block, confirmation_table

COLS = ["claim", "measure", "variant", "event", "statistic", "value", "ci_lo", "ci_hi", "verdict", "n_units"]


def _snapshot(root, rows, machine, commit):
    (root / "summary").mkdir(parents=True)
    write_csv(pd.DataFrame(rows, columns=COLS), root / "summary" / "verdict.csv", "verdict", [])
    (root / "snapshot.json").write_text(json.dumps({"runs": 4, "machines": {machine: 4}, "commits": {commit: 4}}))
    return root


def test_words_held_changed_and_estimates_in_the_interval(tmp_path):
    explo = _snapshot(tmp_path / "data", [
        ["a", "rankme", "uncentred", "onset", "r", 0.5, 0.2, 0.8, "reproduced", 10],
        ["b", "rankme", "", "", "share", 0.9, 0.7, 1.0, "reproduced", 10],
        ["c", "llc", "", "floor", "rho", 0.1, None, None, "inconclusive", 8],
        ["d", "rankme", "", "", "median", 3.0, 1.0, 5.0, "descriptive", 8]], "aaaa", "1" * 40)
    confirm = _snapshot(tmp_path / "confirm_data", [
        ["b", "rankme", "", "", "share", 0.4, 0.2, 0.6, "not reproduced", 10],      # changed, outside
        ["a", "rankme", "uncentred", "onset", "r", 0.7, 0.4, 0.9, "reproduced", 10],  # held, inside
        ["d", "rankme", "", "", "median", 9.0, 8.0, 10.0, "descriptive", 8]], "bbbb", "2" * 40)
    t = compare_rows(explo, confirm)
    assert list(t["claim"]) == ["a", "b", "c", "d"]                      # the exploratory order
    assert list(t["held"]) == ["yes", "no", "no", "-"]
    assert list(t["confirmed"]) == ["reproduced", "not reproduced", "missing", "descriptive"]
    assert list(t["in_interval"]) == ["yes", "no", "-", "no"]
    text = confirmation_table(explo, confirm)
    assert "**1 of 3 exploratory words held on the fresh seeds** (1 descriptive rows carry no word)" in text
    assert "in 1 of 3 rows with both" in text
    assert "inconclusive -> missing: 1; reproduced -> not reproduced: 1" in text
    assert "aaaa (4 runs)" in text and "bbbb (4 runs)" in text and "1111111 (4 runs)" in text
    assert "| 2 | b | rankme | - | reproduced, 0.90 [0.70, 1.00] | **not reproduced**, 0.40 [0.20, 0.60] | no | no |" \
        in text
    # the page block reads the sibling folder; without it, it says the grid has not run
    assert confirmation_block(explo) == text
    (confirm / "summary" / "verdict.csv").unlink()
    with pytest.raises(ValueError, match="no such file beside the exploratory snapshot"):
        confirmation_block(explo)


def test_words_the_design_fixes_and_estimates_that_differ(tmp_path):
    """A row forced by the design or with fewer cells than a word needs is left out of the
    'words the data decide'; two estimates are said to differ by a z test whose standard
    errors come from each row's interval (known answer: intervals of +-1.645 se at 90%)."""
    cols = COLS + ["ci_level", "forced_by"]

    def snap(root, rows):
        (root / "summary").mkdir(parents=True)
        write_csv(pd.DataFrame(rows, columns=cols), root / "summary" / "verdict.csv", "verdict", [])
        return root
    z = 1.6448536269514722
    explo = snap(tmp_path / "data", [
        ["a", "m", "", "", "r", 0.0, -z * 0.1, z * 0.1, "inconclusive", 10, 0.9, ""],          # se 0.1
        ["b", "m", "", "", "r", 0.5, 0.3, 0.7, "inconclusive", 3, 0.9, ""],                    # 3 cells: fixed
        ["c", "m", "", "", "r", 0.5, 0.3, 0.7, "inconclusive", 10, 0.9, "the floor window"]])  # forced: fixed
    confirm = snap(tmp_path / "confirm_data", [
        ["a", "m", "", "", "r", 0.3, 0.3 - z * 0.1, 0.3 + z * 0.1, "inconclusive", 10, 0.9, ""],
        ["b", "m", "", "", "r", 0.5, 0.3, 0.7, "inconclusive", 3, 0.9, ""],
        ["c", "m", "", "", "r", 0.5, 0.3, 0.7, "reproduced", 10, 0.9, ""]])
    t = compare_rows(explo, confirm)
    assert list(t["fixed_by_design"]) == ["no", "yes", "yes"]
    from scipy.stats import norm
    assert t["differ_p"].iloc[0] == pytest.approx(2 * norm.sf(0.3 / (2 * 0.01) ** 0.5), rel=1e-4)   # z 2.12: p 0.034
    assert t["differ_p"].iloc[1] == pytest.approx(1.0)
    text = confirmation_table(explo, confirm)
    assert "(2 of the 3 are fixed by the design" in text and "**1 of 1 held**" in text
    assert "p < 0.05): 1 of 3 (rows 1)." in text


def test_the_second_confirmation_has_its_own_block_and_sibling(tmp_path):
    """The block between BEGIN2 and END2 reads the sibling confirm2_data (rules version 2 on
    seeds 4 and 5), not confirm_data; a page holds a block only where it holds its markers."""
    from geoanatomy.report.confirm import BEGIN, BEGIN2, CONFIRM2_DATA, END, END2
    from geoanatomy.report.data import page_blocks
    rows = [["a", "rankme", "uncentred", "onset", "r", 0.5, 0.2, 0.8, "reproduced", 10]]
    explo = _snapshot(tmp_path / "data", rows, "aaaa", "1" * 40)
    _snapshot(tmp_path / "confirm_data", [[*rows[0][:5], 0.6, 0.3, 0.9, "reproduced", 10]], "bbbb", "2" * 40)
    _snapshot(tmp_path / CONFIRM2_DATA, [[*rows[0][:5], 0.1, -0.2, 0.4, "not reproduced", 10]], "cccc", "3" * 40)
    first, second = confirmation_block(explo), confirmation_block(explo, CONFIRM2_DATA)
    assert "**1 of 1 exploratory words held" in first and "bbbb (4 runs)" in first
    assert "**0 of 1 exploratory words held" in second and "cccc (4 runs)" in second
    page = tmp_path / "page.md"
    page.write_text(f"{BEGIN2}\nold\n{END2}\n")
    assert page_blocks(page, explo) == {(BEGIN2, END2): second}
    page.write_text(f"{BEGIN}\nold\n{END}\n{BEGIN2}\nold\n{END2}\n")
    assert set(page_blocks(page, explo)) == {(BEGIN, END), (BEGIN2, END2)}
