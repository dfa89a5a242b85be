"""The recheck's promise (geoanatomy.report.recheck): last-digit float noise passes, an edited
word, count or number beyond relative 1e-9 fails, a manifest is compared without its digest."""
import json

from geoanatomy.report.recheck import differences, text_differences


def test_last_digit_noise_passes_and_a_real_change_fails():
    a = "claim,word,n,rho\nrankme,reproduced,30,0.04553204540378021\n"
    assert text_differences(a, a.replace("021", "018")) == []                  # the AVX2 / AVX-512 case
    assert text_differences(a, a.replace("0.04553204540378021", "0.0455320454")) == []   # 11 digits agree
    assert text_differences(a, a.replace("0.04553204540378021", "0.04553204")) != []     # 7 digits only
    assert text_differences(a, a.replace("reproduced", "inconclusive")) != []             # a word
    assert text_differences(a, a.replace(",30,", ",31,")) != []                           # a count
    assert text_differences(a, a + "x,y,1,2\n") != []                                     # a row
    assert text_differences("p=nan", "p=nan") == [] and text_differences("p=nan", "p=0.5") != []
    assert text_differences("d=0.0", "d=-1e-17") == []                                    # zero's rounding
    assert text_differences("L3_nano", "L2_nano") != []                                   # digits in a name


def test_a_manifest_is_compared_without_its_digest(tmp_path):
    m = {"url": "t.csv", "rows": 3, "sha256": "a" * 64, "notes": ["n = 30 cells"]}
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "t.csv-metadata.json").write_text(json.dumps(m))
    (b / "t.csv-metadata.json").write_text(json.dumps({**m, "sha256": "b" * 64}))
    assert differences(a / "t.csv-metadata.json", b / "t.csv-metadata.json") == []
    (b / "t.csv-metadata.json").write_text(json.dumps({**m, "sha256": "b" * 64, "rows": 4}))
    assert differences(a / "t.csv-metadata.json", b / "t.csv-metadata.json") != []


def test_report_compare_says_when_the_machines_differ(tmp_path):
    import shutil

    from geoanatomy.report.compare import compare_verdicts, machines
    from pathlib import Path
    src = Path(__file__).resolve().parents[1] / "docs" / "study" / "data" / "summary" / "verdict.csv"
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        shutil.copy2(src, d / "verdict.csv")
        shutil.copy2(str(src) + "-metadata.json", d / "verdict.csv-metadata.json")
    assert machines(a / "verdict.csv").startswith("machine: 10ec1db459d9 (")
    assert "machines differ" not in compare_verdicts(a / "verdict.csv", b / "verdict.csv")
    meta = b / "verdict.csv-metadata.json"
    meta.write_text(meta.read_text().replace("10ec1db459d9 (Intel(R) Xeon(R) Processor, AVX512",
                                             "0123456789ab (AMD EPYC, AVX2"))
    text = compare_verdicts(a / "verdict.csv", b / "verdict.csv")
    assert text.startswith("machines differ: A machine: 10ec1db459d9") and "B machine: 0123456789ab" in text
    assert "words differ: 0" in text
