"""Every table the project writes is read by the readers researchers use (pandas, pyarrow,
polars, duckdb) with each column of the type its manifest records: polars infers a column's
type from its first rows, so a float column written 0, 1, ..., 0.96 (whole numbers first) or a
NaN written ``nan`` broke it (issue: polars read metrics.csv's value as text and failed on
verdict_power.csv)."""
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from geoanatomy.analysis.settings import summary_settings
from geoanatomy.analysis.summarize import run as summarize_part
from geoanatomy.analysis.tables import write_csv
from geoanatomy.table import write_table

pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")
REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "docs" / "validation" / "data"
POLARS = {"integer": ("Int64",), "number": ("Float64",), "boolean": ("Boolean",), "string": ("String", "Null")}
DUCK = {"integer": ("BIGINT", "INTEGER"), "number": ("DOUBLE",), "boolean": ("BOOLEAN",), "string": ("VARCHAR",)}


def check_readers(path: Path):
    meta = json.loads(Path(str(path) + "-metadata.json").read_text())
    want = {c["name"]: c.get("datatype") for c in meta["tableSchema"]["columns"]}
    assert all(want.values()), f"{path.name}: the manifest records no type for {[k for k, v in want.items() if not v]}"
    got_pl = pl.read_csv(path).schema
    rel = duckdb.sql(f"select * from read_csv_auto('{path}')")
    got_duck = dict(zip(rel.columns, (str(t) for t in rel.types)))
    for col, kind in want.items():
        if pl.read_csv(path)[col].null_count() == pl.read_csv(path).height:
            continue                                  # an all-empty column has no type to agree on
        assert str(got_pl[col]) in POLARS[kind], f"{path.name}.{col}: polars {got_pl[col]}, manifest {kind}"
        assert got_duck[col] in DUCK[kind], f"{path.name}.{col}: duckdb {got_duck[col]}, manifest {kind}"
    return pl.read_csv(path)


def test_a_float_column_whose_first_rows_are_whole_reads_as_floats(tmp_path):
    df = pd.DataFrame({"claim": ["a"] * 163 + ["b"], "reproduced": [0.0, 1.0] * 81 + [1.0, 0.96],
                       "n": list(range(164)), "stable": [True, False] * 82, "p": [math.nan] * 163 + [0.5]})
    write_csv(df, tmp_path / "verdict_power.csv", "t", [])
    got = check_readers(tmp_path / "verdict_power.csv")
    assert got["reproduced"][-1] == 0.96 and got["p"].is_nan().sum() == 163


def test_a_per_run_table_with_nan_values_reads_as_floats(tmp_path):
    rows = [{"run": "r", "step": s, "measure": "rankme", "layer": "embed", "layer_index": 0, "position": "first",
             "variant": "", "n_samples": 8, "value": v, "settings": {"eps": 1e-7}, "checkpoint": ""}
            for s, v in enumerate([math.nan, 1.0, 2.0, 0.5])]
    write_table(tmp_path / "metrics.csv", rows)
    got = check_readers(tmp_path / "metrics.csv")
    assert math.isnan(got["value"][0]) and got["value"][3] == 0.5
    from geoanatomy.table import read_table
    assert math.isnan(read_table(tmp_path / "metrics.csv")["value"].iloc[0])


@pytest.mark.skipif(not DATA.is_dir(), reason="no committed default-grid data")
def test_every_summary_table_reads_with_polars_and_duckdb_as_its_manifest_says(tmp_path):
    pres = sorted(str(p) for p in DATA.glob("*/precursor.json"))
    summarize_part("tables", pres, tmp_path, summary_settings({}))
    tables = sorted(tmp_path.glob("*.csv"))
    assert len(tables) >= 8
    for t in tables:
        check_readers(t)
