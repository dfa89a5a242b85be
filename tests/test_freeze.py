"""Frozen rules (geoanatomy.analysis.freeze): the file pins every claim, the verdict's rule, the
benchmark and the settings; the same rules pass, a changed claim or setting is refused by name
before any summary work, and allow_unfrozen runs with every verdict row saying so."""
import dataclasses
import json

import pytest

from geoanatomy.analysis import claims as claims_pkg
from geoanatomy.analysis import freeze as fz
from geoanatomy.cli import main
from geoanatomy.config import DEFAULTS


def _cfg(**summary):
    return {"summary": {**DEFAULTS["summary"], **summary}, "events": dict(DEFAULTS["events"])}


def test_same_rules_pass_changed_ones_are_named(tmp_path, monkeypatch):
    out = tmp_path / "frozen.json"
    rec = fz.freeze(_cfg(), out)
    assert set(fz.FROZEN_KEYS) <= set(rec) and len(rec["claims"]) == len(claims_pkg.CLAIMS) and rec["date"]
    assert fz.check(_cfg(frozen_rules=str(out))).startswith("rules as frozen")
    # a changed setting that decides a word
    with pytest.raises(ValueError, match="summary_settings changed"):
        fz.check(_cfg(frozen_rules=str(out), alpha=0.1))
    # a claim whose smallest effect of interest moved after the freeze
    c0 = claims_pkg.CLAIMS[0]
    monkeypatch.setattr(claims_pkg, "CLAIMS", [dataclasses.replace(c0, effect_of_interest=0.123)]
                        + claims_pkg.CLAIMS[1:])
    with pytest.raises(ValueError, match=f"claim '{c0.name}' changed"):
        fz.check(_cfg(frozen_rules=str(out)))
    note = fz.check(_cfg(frozen_rules=str(out), allow_unfrozen=True))
    assert note.startswith("NOT the frozen rules") and c0.name in note
    with pytest.raises(ValueError, match="does not exist"):
        fz.check(_cfg(frozen_rules=str(tmp_path / "none.json")))


def test_cli_freeze_and_check(tmp_path, repo, capsys):
    out = tmp_path / "f.json"
    assert main(["freeze", "--config", str(repo / "config.yaml"), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["config"].endswith("config.yaml")
    assert main(["freeze", "--config", str(repo / "config.yaml"), "--out", str(out), "--check"]) == 0
    d = json.loads(out.read_text())
    d["verdict_rule"] = "0" * 64
    out.write_text(json.dumps(d))
    assert main(["freeze", "--config", str(repo / "config.yaml"), "--out", str(out), "--check"]) == 1
    assert "verdict_rule changed" in capsys.readouterr().out


def test_the_summary_refuses_before_any_work_and_marks_rows_when_allowed(tmp_path, repo):
    from geoanatomy.analysis.settings import summary_settings
    from geoanatomy.analysis.summarize import run as summarize_part
    data = repo / "docs" / "validation" / "data"
    pres = sorted(str(p) for p in data.glob("*/precursor.json"))
    events = json.loads((data / "mod_L3_nano" / "precursor.json").read_text())["events_settings"]
    frozen = tmp_path / "frozen.json"
    fz.freeze({"summary": summary_settings(), "events": events}, frozen)
    d = json.loads(frozen.read_text())
    d["benchmark"] = "f" * 64                    # the benchmark's rules changed after the freeze
    frozen.write_text(json.dumps(d))
    out = tmp_path / "summary"
    out.mkdir()
    with pytest.raises(ValueError, match="benchmark changed"):
        summarize_part("verdict", pres, out, summary_settings({"frozen_rules": str(frozen)}), log=lambda *a: None)
    assert not (out / "verdict.csv").exists()
    for f in ("floor_summary.json", "top_down_summary.json", "scale_invariance.json", "prediction.json",
              "verdict_power.csv", "verdict_power.csv-metadata.json"):
        (out / f).write_bytes((data / "summary" / f).read_bytes())
    summarize_part("verdict", pres, out, summary_settings({"frozen_rules": str(frozen), "allow_unfrozen": True}),
                   log=lambda *a: None)
    import pandas as pd
    v = pd.read_csv(out / "verdict.csv")
    assert v["frozen"].str.startswith("NOT the frozen rules").all() and v["frozen"].str.contains("benchmark").all()


def test_a_code_only_change_is_re_fingerprinted_keeping_the_freeze_and_saying_what_moved(tmp_path, monkeypatch):
    out = tmp_path / "frozen.json"
    first = fz.freeze(_cfg(), out)
    with pytest.raises(ValueError, match="nothing to re-fingerprint"):
        fz.refrozen(_cfg(), out, "no change")
    c0 = claims_pkg.CLAIMS[0]                   # a rows function whose source moved
    monkeypatch.setattr(claims_pkg, "CLAIMS", [dataclasses.replace(c0, rows=lambda v: c0.rows(v))]
                        + claims_pkg.CLAIMS[1:])
    with pytest.raises(ValueError, match=f"claim '{c0.name}' changed"):
        fz.check(_cfg(frozen_rules=str(out)))
    with pytest.raises(ValueError, match="summary_settings differ"):   # a setting is a rule, never code
        fz.refrozen(_cfg(alpha=0.1), out, "not code")
    with pytest.raises(ValueError, match="needs the reason"):
        fz.refrozen(_cfg(), out, " ")
    rec = fz.refrozen(_cfg(), out, "moved the rows function")
    out.write_text(json.dumps(rec))
    assert (rec["date"], rec["commit"]) == (first["date"], first["commit"])
    assert rec["code_changes"][-1]["changed"] == [f"claim '{c0.name}' changed"]
    assert rec["code_changes"][-1]["reason"] == "moved the rows function"
    assert fz.check(_cfg(frozen_rules=str(out))) == f"rules as frozen in frozen.json on {first['date']}"


def test_freeze_onto_an_existing_file_is_refused_unless_replace_and_keeps_history(tmp_path):
    out = tmp_path / "frozen.json"
    first = fz.freeze(_cfg(), out)
    with pytest.raises(ValueError, match="holds rules frozen on"):
        fz.freeze(_cfg(), out)
    assert json.loads(out.read_text()) == first
    again = fz.freeze(_cfg(), out, replace=True)
    assert again["previous_freezes"] == [first]
    out.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a frozen-rules file"):
        fz.check(_cfg(frozen_rules=str(out)))


@pytest.mark.slow
def test_code_only_is_shown_on_the_snapshots_not_declared(tmp_path, monkeypatch, repo):
    """A re-freeze as code only summarises a committed snapshot again under the new rules: a
    refactoring of the verdict's rule (same words) is written, with where it was shown; a change
    that moves words (every row reproduced) is refused and the frozen file is left as it was."""
    from geoanatomy.analysis import verdict
    from geoanatomy.report.recheck import refreeze_shown
    monkeypatch.chdir(repo)
    data = repo / "docs" / "validation" / "data"
    out = tmp_path / "frozen.json"
    fz.freeze(_cfg(), out)
    before = out.read_text()
    orig = verdict.word
    monkeypatch.setattr(verdict, "word", lambda e, alpha=0.05, n_min=5: "reproduced")
    with pytest.raises(ValueError, match="not a code-only change"):
        refreeze_shown(_cfg(), out, "a refactor (so it is said)", [data])
    assert out.read_text() == before
    monkeypatch.setattr(verdict, "word", lambda e, alpha=0.05, n_min=5: orig(e, alpha, n_min))
    rec = refreeze_shown(_cfg(), out, "word wrapped", [data])
    assert rec["code_changes"][-1]["shown_on"] == [str(data)]
    assert rec["code_changes"][-1]["changed"] == ["verdict_rule changed"]
    with pytest.raises(ValueError, match="must be shown"):
        refreeze_shown(_cfg(), out, "x", [])


def test_the_code_a_word_depends_on_is_fingerprinted_helpers_included():
    """The freeze covers the verdict's whole import closure, not only the rows functions: the
    helpers whose edits moved words without the freeze noticing (the bound's variance in
    analysis.stats, the design covariates in the timing claims, the power simulation's nulls
    that gate every word) each have a fingerprint; a docstring or comment changes none, a
    constant changes one."""
    code = fz.fingerprints({"summary": dict(DEFAULTS["summary"]), "events": dict(DEFAULTS["events"])})["code"]
    for m in ("geoanatomy.analysis.verdict", "geoanatomy.analysis.power", "geoanatomy.analysis.stats.timing",
              "geoanatomy.analysis.stats.resample", "geoanatomy.analysis.claims.timing", "geoanatomy.analysis.units",
              "geoanatomy.detectors", "geoanatomy.precursor.rules"):
        assert m in code, m
    assert not any(m.startswith(("geoanatomy.analysis.figures", "geoanatomy.model")) for m in code)
    src = 'def bound(x):\n    """The bound."""\n    return x * 1.06  # variance\n'
    same = 'def bound(x):\n    """Another docstring,\n    two lines."""\n\n    return x * 1.06  # another comment\n'
    assert fz.code_hash(src) == fz.code_hash(same)
    assert fz.code_hash(src) != fz.code_hash(src.replace("1.06", "0.25"))


def test_a_changed_helper_and_a_file_frozen_before_the_coverage_are_named():
    now = fz.fingerprints({"summary": dict(DEFAULTS["summary"]), "events": dict(DEFAULTS["events"])})
    old = json.loads(json.dumps(now))
    old["code"]["geoanatomy.analysis.stats.timing"] = "0" * 64
    assert fz.differences(old, now) == ["module 'geoanatomy.analysis.stats.timing' changed"]
    del old["code"]
    assert fz.differences(old, now) == ["code: not fingerprinted in this file (frozen before the helpers were covered)"]
