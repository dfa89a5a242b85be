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
        fz.refreeze(_cfg(), out, "no change")
    c0 = claims_pkg.CLAIMS[0]                   # a rows function whose source moved
    monkeypatch.setattr(claims_pkg, "CLAIMS", [dataclasses.replace(c0, rows=lambda v: c0.rows(v))]
                        + claims_pkg.CLAIMS[1:])
    with pytest.raises(ValueError, match=f"claim '{c0.name}' changed"):
        fz.check(_cfg(frozen_rules=str(out)))
    with pytest.raises(ValueError, match="summary_settings differ"):   # a setting is a rule, never code
        fz.refreeze(_cfg(alpha=0.1), out, "not code")
    with pytest.raises(ValueError, match="needs the reason"):
        fz.refreeze(_cfg(), out, " ")
    rec = fz.refreeze(_cfg(), out, "moved the rows function")
    assert (rec["date"], rec["commit"]) == (first["date"], first["commit"])
    assert rec["code_changes"][-1]["changed"] == [f"claim '{c0.name}' changed"]
    assert rec["code_changes"][-1]["reason"] == "moved the rows function"
    assert fz.check(_cfg(frozen_rules=str(out))) == f"rules as frozen in frozen.json on {first['date']}"
