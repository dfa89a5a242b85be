"""Commands never remove or overwrite what they cannot prove they wrote: a snapshot's DEST that
holds other files, or is the grid itself, is refused (nothing deleted); a docs page's generated
block is never replaced by a placeholder because an input is missing (refused, the page left
as it was)."""
import shutil
from pathlib import Path

import pytest

from geoanatomy.report.data import snapshot, write_pages

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "docs" / "validation" / "data"


def _grid(tmp_path) -> Path:
    """A results folder: the validation snapshot's runs and summary, plus a checkpoint."""
    res = tmp_path / "results"
    shutil.copytree(DATA, res)
    run = next(p.parent for p in res.glob("*/precursor.json"))
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "step_000000.safetensors").write_bytes(b"weights")
    return res


def test_snapshot_refuses_a_destination_it_did_not_write(tmp_path):
    res = _grid(tmp_path)
    dest = tmp_path / "notes"
    dest.mkdir()
    (dest / "my_notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="holds my_notes.txt, which no snapshot writes"):
        snapshot(res, dest)
    assert (dest / "my_notes.txt").read_text() == "keep me"
    with pytest.raises(ValueError, match="must be outside the grid"):
        snapshot(res, res)                                   # DEST = RESULTS once emptied a results folder
    with pytest.raises(ValueError, match="must be outside the grid"):
        snapshot(res, res / "snap")
    assert next(res.glob("*/checkpoints/step_000000.safetensors")).read_bytes() == b"weights"
    ok = tmp_path / "snap"
    snapshot(res, ok)
    snapshot(res, ok)                                         # its own snapshot: replaced
    (ok / "summary" / "extra.png").write_bytes(b"x")
    with pytest.raises(ValueError, match="extra.png"):
        snapshot(res, ok)


def test_pages_refuse_instead_of_writing_a_placeholder(tmp_path):
    page = tmp_path / "benchmark.md"
    shutil.copy2(REPO / "docs" / "benchmark.md", page)
    before = page.read_text()
    with pytest.raises(ValueError, match="no such file; the page's benchmark block is left as it is"):
        write_pages(page, tmp_path / "mistyped")
    assert page.read_text() == before
    study = tmp_path / "docs" / "study.md"
    study.parent.mkdir()
    shutil.copy2(REPO / "docs" / "study.md", study)
    alone = tmp_path / "docs" / "study" / "data"
    shutil.copytree(REPO / "docs" / "study" / "data", alone)            # no confirm_data beside it
    before = study.read_text()
    with pytest.raises(ValueError, match="no such file beside the exploratory snapshot"):
        write_pages(study, alone)
    assert study.read_text() == before


@pytest.mark.parametrize("saved,claimed,needle", [(3, 2, "no place for"), (2, 3, "do not hold")])
def test_weights_that_do_not_match_their_config_are_refused_by_name(tmp_path, saved, claimed, needle):
    """A checkpoint of 3 layers under a config of 2 once lost its third layer in silence; one of
    2 under a config of 3 got a random third layer, measured as a curve point."""
    import json

    import transformers

    from geoanatomy.hf import ScanLoadError
    from geoanatomy.hf.loading import load_causal_lm
    cfg = transformers.GPT2Config(n_layer=saved, n_embd=16, n_head=2, vocab_size=32, n_positions=16)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(tmp_path / "ck")
    c = json.loads((tmp_path / "ck" / "config.json").read_text())
    assert load_causal_lm(tmp_path, "ck").config.n_layer == saved          # as saved: it loads
    (tmp_path / "ck" / "config.json").write_text(json.dumps({**c, "n_layer": claimed}))
    with pytest.raises(ScanLoadError, match=rf"ck: the .*{needle}.*h\.{min(saved, claimed)}\."):
        load_causal_lm(tmp_path, "ck")


def test_reports_read_through_the_checked_readers(tmp_path):
    """A hand-edited verdict.csv (words forged, manifest stale) once went into docs/study.md
    through report findings, confirm and pages; an edited precursor.json (seal broken) into
    report grid and pages --check ("up to date"). Now each refuses, naming the file."""
    from geoanatomy.manifest import ManifestError
    from geoanatomy.analysis.load import SummaryInputError
    from geoanatomy.report.confirm import confirmation_table
    from geoanatomy.report.findings import findings
    from geoanatomy.report.grid import grid_tables
    data = tmp_path / "data"
    shutil.copytree(REPO / "docs" / "study" / "data", data)
    v = data / "summary" / "verdict.csv"
    v.write_text(v.read_text().replace("not reproduced", "reproduced", 5))
    with pytest.raises(ManifestError, match="verdict.csv"):
        findings(data / "summary")
    with pytest.raises(ManifestError, match="verdict.csv"):
        confirmation_table(data, REPO / "docs" / "study" / "confirm_data")
    pre = next(data.glob("*/precursor.json"))
    pre.write_text(pre.read_text().replace('"acquisition_step": ', '"acquisition_step": 9', 1))
    with pytest.raises(SummaryInputError, match="precursor.json"):
        grid_tables(data)
    with pytest.raises(ValueError, match="no RUN/precursor.json"):
        grid_tables(tmp_path / "nowhere")


def test_a_precursor_record_that_is_missing_a_fifo_or_too_large_is_refused_without_reading(tmp_path):
    """A missing record is not told to be deleted; a FIFO (which would block the read forever)
    and an oversized file are refused before any read."""
    import os
    from geoanatomy.analysis.load import MAX_RECORD_BYTES, SummaryInputError, load_precursor
    with pytest.raises(SummaryInputError, match="does not exist: run snakemake") as e:
        load_precursor(tmp_path / "nope" / "precursor.json")
    assert "rm " not in str(e.value)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(SummaryInputError, match="not a regular file"):
        load_precursor(fifo)
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(MAX_RECORD_BYTES + 1)             # sparse: no disk used
    with pytest.raises(SummaryInputError, match="more than a run's record can be"):
        load_precursor(big)


def test_a_killed_summary_writes_temporary_file_is_removed_by_the_next_run_and_nothing_else(tmp_path):
    """A summary part killed mid-write leaves .NAME.XXXX.tmp beside its output; the part's next
    run removes that file (its own writer's name for its own output) and leaves a file of the
    same shape for another name, and any other file, alone."""
    from geoanatomy.analysis.summarize import run
    from geoanatomy.cli.summarize import make_settings
    res = _grid(tmp_path)
    out = tmp_path / "summary"
    out.mkdir()
    stale = out / ".scale_invariance.json.k3j2.tmp"
    other = out / ".notes.txt.k3j2.tmp"
    mine = out / "notes.txt"
    for f in (stale, other, mine):
        f.write_text("x")
    run("scale", sorted(str(p) for p in res.glob("*/precursor.json")), out, make_settings(None), log=lambda m: None)
    assert (out / "scale_invariance.json").exists() and not stale.exists()
    assert other.exists() and mine.exists()
