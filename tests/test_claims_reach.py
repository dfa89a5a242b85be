"""Every claim's smallest effect of interest is within reach of its own alternative on the
study's design: simulated under the claim's alternative (analysis.power, the real row
functions and verdict.finish on the committed runs' design), the test reads "not reproduced"
in at most alpha of populations (plus two Monte Carlo standard errors). A claim whose bound
could refute the alternative itself says "not reproduced" about a real effect. The check runs
over every simulated claim of CLAIMS, read off the committed snapshots' verdict_power.csv
(recomputed with the code by the docs-data test), and it can fail: the rules frozen on
2026-12-05 (docs/study/frozen_v1) fail it on two claims (specificity 0.625, within-cell 0.14)."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geoanatomy.analysis import verdict
from geoanatomy.analysis.claims import CLAIMS

REPO = Path(__file__).resolve().parents[1]
POWER = {"study": REPO / "docs" / "study" / "data" / "summary" / "verdict_power.csv",
         "confirmation": REPO / "docs" / "study" / "confirm_data" / "summary" / "verdict_power.csv"}
FROZEN_V1 = REPO / "docs" / "study" / "frozen_v1" / "study_verdict_power.csv"
ALPHA = 0.05


def unreachable(table: pd.DataFrame) -> dict:
    """(claim, event) -> (alternative, rate) where the rate of "not reproduced" under the
    claim's own alternative at the grid's design exceeds alpha beyond Monte Carlo error."""
    n = table[(table["role"] == verdict.ROLE_ALT) & (table["design"] == "grid")]["n_populations"].max()
    slack = 2 * np.sqrt(ALPHA * (1 - ALPHA) / max(int(n), 1))
    return {k: v for k, v in verdict.refutation_rates(table).items() if k[1] and v[1] > ALPHA + slack}


@pytest.mark.parametrize("name", list(POWER))
def test_no_claim_refutes_its_own_alternative_on_the_studys_design(name):
    path = POWER[name]
    if not path.is_file():
        pytest.skip("no committed snapshot")
    table = pd.read_csv(path)
    alt = table[(table["role"] == verdict.ROLE_ALT) & (table["design"] == "grid")]
    simulated = {c.name for c in CLAIMS if c.design.kind != "not simulated"}
    assert simulated <= set(alt["claim"]), simulated - set(alt["claim"])     # every claim was put to it
    assert not unreachable(table), unreachable(table)


def test_the_check_fails_on_the_rules_frozen_before_this_change():
    if not FROZEN_V1.is_file():
        pytest.skip("no frozen_v1 record")
    bad = unreachable(pd.read_csv(FROZEN_V1))
    assert bad[("precursor specific to hard cells", "transition")][1] == pytest.approx(0.625)
    assert {c for c, _ in bad} == {"precursor specific to hard cells", "timing across seeds within cells"}


def test_a_refuted_alternative_closes_the_not_reproduced_word():
    """verdict.finish's gate: a row that reads "not reproduced" is inconclusive when its claim's
    own alternative reads "not reproduced" in more than alpha of the simulated populations, and
    keeps its word when that rate is within alpha."""
    from geoanatomy.analysis.claims import ClaimRow
    from geoanatomy.analysis.settings import summary_settings
    st = summary_settings({})
    row = ClaimRow("timing beyond the loss curve", "rankme_centred", "centred", "partial r", 0.05, (-0.2, 0.2), 30,
                   60, "null", 0.0, 0.4, "timing beyond the loss curve (primary)", rule="greater+gain",
                   event="extreme", bound=0.2).as_dict()

    def power(rate):
        return pd.DataFrame([{"claim": row["claim"], "event": "extreme", "scenario": "proportional-noisy",
                              "role": verdict.ROLE_ALT, "design": "grid", "n_cells": 30, "n_units": 30,
                              "n_populations": 200, "reproduced": 0.5, "not_reproduced": rate,
                              "inconclusive": 0.5 - rate}])
    finish = verdict.finish
    assert finish([row], st)["verdict"].iloc[0] == "not reproduced"
    assert finish([row], st, power(0.02))["verdict"].iloc[0] == "not reproduced"
    got = finish([row], st, power(0.3))
    assert got["verdict"].iloc[0] == "inconclusive"
    assert "out of this design's reach" in got["detail"].iloc[0] and "30%" in got["detail"].iloc[0]


@pytest.mark.slow
def test_each_claims_alternative_simulated_afresh_on_the_studys_design():
    """The same check through the power simulation itself, not its committed file: every
    simulated claim's alternatives on the study's committed runs (their cells, seeds,
    acquisition steps, loss events and checkpoint grids), 40 populations each."""
    from geoanatomy.analysis import power, rates
    from geoanatomy.analysis.load import load_precursors
    from geoanatomy.analysis.settings import summary_settings
    data = REPO / "docs" / "study" / "data"
    if not data.is_dir():
        pytest.skip("no committed study data")
    pres = load_precursors(sorted(data.glob("*/precursor.json")))
    st = summary_settings({})
    rows = rates.measure_rows(pres, st["coincide_log10_tol"])
    table = power.verdict_power(rows, st, n_populations=40, multiples=(1,), grids=power.event_grids(pres),
                                progress=lambda *a: None, workers=2, nulls=False)
    assert not ((table["role"] == verdict.ROLE_NULL) & (table["scenario"] != "share 1/2")).any()   # no event null
    assert not unreachable(table), unreachable(table)
