"""One conformance test over every registered expensive measure (the idea of scikit-learn's
``check_estimator``): a measure added to geoanatomy.measures.registry runs through these
checks unasked. Each check reads only the registry entry, never a list of names."""
import json
import math

import pytest
import torch

from geoanatomy.config import DEFAULTS, load_schema
from geoanatomy.config.schema import validate_block
from geoanatomy.measures import MEASURES, TABLE_MEASURES
from geoanatomy.model import GPT, ModelConfig
from geoanatomy.sizes import SIZES
from geoanatomy.stages.measures import measure_checkpoint

ENTRIES = list(MEASURES.values())


def _tiny_model():
    torch.manual_seed(0)
    return GPT(ModelConfig(n_layer=1, d_model=16, n_head=2, vocab_size=12, block_size=10, attn_impl="math"))


def _pools(seed: int = 0) -> dict:
    """Each measure's seeded sample, sized by its own pool setting at its tiny settings."""
    g = torch.Generator().manual_seed(seed)
    return {m.config_key: torch.randint(0, 12, (int(m.tiny_settings()[m.pool_size_key]), 8), generator=g)
            for m in ENTRIES}


def _measure(entry, seed: int = 1) -> list[dict]:
    """Rows of ``entry`` at a tiny model, after the kinds it declares it uses (their rows first)."""
    kinds = [m.name for m in ENTRIES if any(t.name in entry.uses for t in m.writes)] + [entry.name]
    cfg = {m.config_key: m.tiny_settings() for m in ENTRIES}
    rows = measure_checkpoint(_tiny_model(), _pools(), 2, cfg, {m.name: seed for m in ENTRIES}, kinds)
    return [r for r in rows if r["measure"] in {t.name for t in entry.writes}]


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda m: m.name)
def test_settings_are_one_home_and_validate(entry):
    assert DEFAULTS["measures"][entry.config_key] == entry.defaults          # defaults.py is filled from it
    assert entry.name in DEFAULTS["measures"]["which"]
    block = load_schema()["properties"]["measures"]["properties"][entry.config_key]
    assert block == entry.settings_block_schema()                           # so is the schema
    assert set(entry.settings_schema) == set(entry.defaults), "every setting has a schema, every schema a default"
    assert entry.pool_size_key in entry.defaults
    assert set(entry.tiny) <= set(entry.defaults)
    for settings in (entry.defaults, entry.tiny_settings()):
        validate_block("measures", {entry.config_key: settings})
    bad = {**entry.defaults, "no_such_setting": 1}
    with pytest.raises(Exception, match="no_such_setting"):
        validate_block("measures", {entry.config_key: bad})


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda m: m.name)
def test_rows_are_its_table_measures_finite_and_labelled(entry):
    rows = _measure(entry)
    assert {r["measure"] for r in rows} == {t.name for t in entry.writes}
    for t in entry.writes:
        assert t.direction in ("collapse", "rise")
        assert t.headline_variant in {r["variant"] for r in rows if r["measure"] == t.name}, t.name
        assert TABLE_MEASURES[t.name] is t
    for r in rows:
        assert math.isfinite(r["value"]), r
        assert r["n_samples"] > 0 and r["layer"] and r["position"]
        json.dumps(r["settings"])                                            # the table stores it as JSON


@pytest.mark.parametrize("entry", [m for m in ENTRIES if m.seeded], ids=lambda m: m.name)
def test_same_seed_same_rows(entry):
    a, b = _measure(entry, seed=3), _measure(entry, seed=3)
    assert [r["value"] for r in a] == [r["value"] for r in b]


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda m: m.name)
def test_declared_inputs_come_from_earlier_kinds_and_nothing_else_is_passed(entry):
    order = [m.name for m in ENTRIES]
    for name in entry.uses:
        owner = next(m for m in ENTRIES if any(t.name == name for t in m.writes))
        assert order.index(owner.name) < order.index(entry.name), (entry.name, name)
    seen = {}

    def spy(model, pool, n_answer, settings, seed, given):
        seen.update(given)
        return []
    probe = type(entry)(**{**entry.__dict__, "compute": spy})
    probe.rows(None, None, 2, entry.tiny_settings(), 0, {"not_declared": 1.0, **{n: 2.0 for n in entry.uses}})
    assert set(seen) == set(entry.uses)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda m: m.name)
def test_cost_per_checkpoint_is_positive_and_grows_with_size(entry):
    costs = [entry.seconds_per_checkpoint(entry.defaults, s, 8, "cpu") for s in SIZES]
    assert all(c > 0 for c in costs) and costs == sorted(costs), costs
