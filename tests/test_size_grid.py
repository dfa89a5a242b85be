"""tools/size_grid.py: the verdict's power simulation on a committed snapshot with its design
repeated, the alternatives only. Bad input stops before any simulation; on the induction
grid the repeated design's timing rows have no residual to read (two loss events before
acquisition fit three copied cells exactly), which the tool reports as power 0."""
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("size_grid", REPO / "tools" / "size_grid.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bad_input_is_named_before_any_simulation(tmp_path, capsys):
    tool = _tool()
    with pytest.raises(SystemExit):
        tool.main([str(tmp_path)])
    assert "no */precursor.json" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tool.main([str(REPO / "docs/known/data/known_ind"), "--repeats", "0"])
    assert "--repeats: 0" in capsys.readouterr().err


@pytest.mark.slow
def test_the_induction_copies_have_no_timing_residual(tmp_path, capsys):
    data = REPO / "docs/known/data/known_ind"
    if not data.is_dir():
        pytest.skip("no committed known_ind snapshot")
    out = tmp_path / "power.csv"
    table = _tool().main([str(data), "--repeats", "2", "--populations", "4", "--out", str(out)])
    assert out.is_file() and {"grid", "grid x 2"} <= set(table["design"])
    six = table[(table["design"] == "grid x 2") & table["role"].astype(str).str.startswith("H1")]
    assert set(six["n_cells"]) == {6}
    timing = six[six["claim"] == "timing beyond the loss curve"]
    assert len(timing) and (timing["reproduced"] == 0).all() and (timing["inconclusive"] == 1).all()
    lp = six[six["claim"] == "log-prob before accuracy"]
    assert (lp["reproduced"] > 0).any()                       # a row the copies can size does get power
    printed = capsys.readouterr().out
    assert "power 0 at every design" in printed and "timing beyond the loss curve" in printed
