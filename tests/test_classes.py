"""The class file: classes fixed by calibration runs, refused when edited or overlapping."""
import pytest

from geoanatomy.classes import (RULE, ClassFileError, build_rows, check_against_grid, class_from_calibration,
                                file_sha256, read_class_file, render)


def _cal(task, seed, acq, size="nano", level="L3", steps=1500, **kw):
    return {"task": task, "level": level, "size": size, "seed": seed, "steps": steps, "acquisition_step": acq,
            "control": kw.get("control"), "diverged": kw.get("diverged", False)}


def test_rule_easy_only_when_every_calibration_seed_is_early():
    assert class_from_calibration([40, 150], 150) == "easy"
    assert class_from_calibration([40, 151], 150) == "hard"
    assert class_from_calibration([40, None], 150) == "hard"
    assert class_from_calibration([None, None], 150) == "hard"
    with pytest.raises(ValueError):
        class_from_calibration([], 150)


def test_build_and_read_round_trip(tmp_path):
    cal = [_cal("mod", 101, None), _cal("mod", 100, 900), _cal("copy", 100, 60), _cal("copy", 101, 80),
           _cal("mod", 100, None, level="L1", control="shuffled"), _cal("par", 100, 40, diverged=True)]
    rows = build_rows(cal, 150)
    assert [(r["task"], r["class"]) for r in rows] == [("copy", "easy"), ("mod", "hard"), ("par", "hard")]
    assert rows[1]["calibration_seeds"] == "100;101" and rows[1]["calibration_acquisition_steps"] == "900;never"
    assert rows[2]["calibration_acquisition_steps"] == "never"  # diverged = not acquired
    p = tmp_path / "classes.csv"
    p.write_text(render(rows))
    got = read_class_file(p, file_sha256(p))
    assert got[("mod", "L3", "nano")]["calibration_acquisition_steps"] == [900, None]
    assert got[("copy", "L3", "nano")]["class"] == "easy"
    import pandas as pd
    assert len(pd.read_csv(p)) == 3  # plain CSV, read without options


def test_a_mismatched_hash_is_refused_by_name(tmp_path):
    p = tmp_path / "classes.csv"
    p.write_text(render(build_rows([_cal("mod", 100, 900)], 150)))
    h = file_sha256(p)
    p.write_text(p.read_text().replace(",hard,", ",easy,"))
    with pytest.raises(ClassFileError, match=r"classes\.csv has sha256 .* but the config says"):
        read_class_file(p, h)


@pytest.mark.parametrize("edit, match", [
    (lambda t: t.replace(",hard,", ",easy,"), "does not follow from its calibration steps"),
    (lambda t: t.replace(",hard,", ",medium,"), "class 'medium' must be one of"),
    (lambda t: t.replace("100;101", "100;100"), "pair distinct seeds"),
    (lambda t: t.replace("900;never", "900"), "pair distinct seeds"),
    (lambda t: t.replace("900;", "x;"), "'x' is not an integer"),
    (lambda t: t + t.splitlines()[1] + "\n", "appears twice"),
    (lambda t: t.replace(RULE, "acquired late"), "is not this version's rule"),
    (lambda t: t.replace("900;", "9000;"), "exceeds steps"),
    (lambda t: t.replace("task,", "tsk,"), "columns"),
])
def test_malformed_class_files_name_line_and_field(tmp_path, edit, match):
    p = tmp_path / "classes.csv"
    p.write_text(edit(render(build_rows([_cal("mod", 100, 900), _cal("mod", 101, None)], 150))))
    with pytest.raises(ClassFileError, match=match):
        read_class_file(p)


def test_analysed_seeds_must_be_disjoint_and_covered(tmp_path):
    p = tmp_path / "classes.csv"
    p.write_text(render(build_rows([_cal("mod", 100, 900), _cal("mod", 101, None)], 150)))
    cl = read_class_file(p)
    run = {"name": "mod_L3_nano", "task": "mod", "level": "L3", "size": "nano", "seed": 0, "steps": 1500}
    check_against_grid(cl, [run], p)
    with pytest.raises(ClassFileError, match="mod_L3_nano_s100 uses seed 100, a calibration seed"):
        check_against_grid(cl, [dict(run, name="mod_L3_nano_s100", seed=100)], p)
    with pytest.raises(ClassFileError, match="no class for run copy_L3_nano"):
        check_against_grid(cl, [dict(run, name="copy_L3_nano", task="copy")], p)
    with pytest.raises(ClassFileError, match="calibrated at 1500 steps"):
        check_against_grid(cl, [dict(run, steps=600)], p)
    check_against_grid(cl, [dict(run, name="copy_L1_nano_shuffled", task="copy", control="shuffled")], p)


def test_cli_builds_the_class_file_from_finished_calibration_runs(tmp_path, capsys):
    import json

    import yaml

    from geoanatomy.cli import main
    cfg = {"results_dir": str(tmp_path / "res"), "allow_results_outside_workdir": True,
           "grid": [{"tasks": ["mod"], "levels": ["L3"], "sizes": ["nano"], "seeds": [100, 101]}],
           "train": {"steps": 1500}}
    cfg_path = tmp_path / "cal.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "classes.csv"
    assert main(["classes", "build", "--config", str(cfg_path), "--out", str(out)]) == 2   # nothing trained yet
    assert "not finished" in capsys.readouterr().err and not out.exists()
    for seed, acq in ((100, 120), (101, 900)):
        d = tmp_path / "res" / f"mod_L3_nano_s{seed}"
        d.mkdir(parents=True)
        d.joinpath("precursor.json").write_text(json.dumps(_cal("mod", seed, acq)))
    assert main(["classes", "build", "--config", str(cfg_path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "1 cells (0 easy, 1 hard)" in printed and file_sha256(out) in printed
    assert read_class_file(out)[("mod", "L3", "nano")]["calibration_acquisition_steps"] == [120, 900]


def test_config_with_a_class_file_of_another_hash_is_refused_before_any_job(tmp_path):
    """load_config checks events.classes_file against events.classes_sha256 (and that the
    hash is given at all), naming the file and the field."""
    from geoanatomy.config import load_config
    from geoanatomy.errors import ConfigError
    p = tmp_path / "classes.csv"
    p.write_text(render(build_rows([_cal("mod", 100, 900), _cal("mod", 101, 1200)], 150)))
    good = file_sha256(p)
    base = {"grid": [{"tasks": ["mod"], "levels": ["L3"], "sizes": ["nano"], "seeds": [0]}],
            "train": {"steps": 1500}, "results_dir": str(tmp_path / "r"), "allow_results_outside_workdir": True}
    cfg = load_config(None, overrides={**base, "events": {"classes_file": str(p), "classes_sha256": good}},
                      workdir=None)
    assert cfg["events"]["classes_sha256"] == good
    with pytest.raises(ConfigError, match=r"classes\.csv has sha256 .*events\.classes_sha256"):
        load_config(None, overrides={**base, "events": {"classes_file": str(p), "classes_sha256": "0" * 64}},
                    workdir=None)
    with pytest.raises(ConfigError, match=r"events\.classes_sha256"):
        load_config(None, overrides={**base, "events": {"classes_file": str(p)}}, workdir=None)
    with pytest.raises(ConfigError, match="seed 100, a calibration seed"):
        load_config(None, overrides={**base, "grid": [{"tasks": ["mod"], "levels": ["L3"], "sizes": ["nano"],
                                                         "seeds": [100]}],
                                     "events": {"classes_file": str(p), "classes_sha256": good}}, workdir=None)
