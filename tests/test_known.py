"""The known-transition claims (analysis.known) on hand-made events: shares, leads and false
alarms against hand computation; the claims each name a registered signal."""
import numpy as np
import pandas as pd
import pytest

from geoanatomy.analysis.known import CLAIMS, claim_row, scaled
from geoanatomy.measures.signal_registry import SIGNAL_BY_NAME


def _events():
    pos = pd.DataFrame({"run": ["a", "b", "c", "d"], "signal": "ildr", "onset": [50, 150, np.nan, 400],
                        "extreme": np.nan, "acquisition_step": [200, 200, 300, 300],
                        "train_acquisition_step": [100, 100, 100, 100], "positive": True, "negative": False})
    neg = pd.DataFrame({"run": ["n1", "n2"], "signal": "ildr", "onset": [np.nan, 30], "extreme": np.nan,
                        "acquisition_step": np.nan, "train_acquisition_step": [100, np.nan], "positive": False,
                        "negative": True})
    other = pos.assign(signal="llc", onset=1.0)       # another signal's rows are not read
    return pd.concat([pos, neg, other], ignore_index=True)


def test_a_claim_reads_its_signal_against_hand_computed_leads():
    c = next(c for c in CLAIMS if c.key == "ildr_grok")
    bench = pd.DataFrame({"signal": ["ildr"], "event": ["onset"], "reading": ["not shown"], "gain_r": [0.1],
                          "gain_p_holm": [0.9], "n_cells": [3], "auroc": [0.6]})
    r = claim_row(c, _events(), bench)
    assert (r["n_runs"], r["n_with_event"]) == (4, 3)
    assert r["share_before"] == pytest.approx(2 / 3)              # 50 < 200, 150 < 200; 400 > 300
    assert r["n_resolved_delay"] == 3                             # 200 - 100 >= 0.25 x 200, 300 - 100 too
    assert r["share_in_delay"] == pytest.approx(1 / 3)            # only 150 lies in (100, 200)
    short = _events().assign(train_acquisition_step=180.0)       # 200 - 180 < 50: a delay not resolved
    assert claim_row(c, short, bench)["n_resolved_delay"] == 1   # only d: 300 - 180 >= 75
    leads = [(200 - 50) / 200, (200 - 150) / 200, (300 - 400) / 300]
    assert r["lead_median"] == pytest.approx(np.median(leads))
    assert (r["lead_min"], r["lead_max"]) == (pytest.approx(min(leads)), pytest.approx(max(leads)))
    assert (r["false_alarms"], r["n_negatives"]) == (1, 2)
    assert (r["benchmark_word"], r["n_cells"]) == ("not shown", 3)
    assert claim_row(c, _events(), None)["benchmark_word"] == "no benchmark"


def test_every_claim_names_a_registered_signal_and_an_event_it_has():
    for c in CLAIMS:
        assert c.signal in SIGNAL_BY_NAME, c.key
        assert c.event in ("onset", "extreme") and c.family in ("grok", "ind")
        assert c.before in ("acquisition_step", "induction_head_step")


def test_scaled_maps_a_curve_onto_the_unit_interval():
    assert scaled(np.array([2.0, 4.0, np.nan, 3.0])) == pytest.approx(np.array([0.0, 1.0, np.nan, 0.5]),
                                                                       nan_ok=True)
    assert np.isnan(scaled(np.array([1.0, 1.0]))).all()
