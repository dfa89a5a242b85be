"""The expensive-measure registry (geoanatomy.measures.registry) against the config, the
tables and the cost model."""
import subprocess
import sys

import pytest
import torch

from geoanatomy import cost
from geoanatomy.config import DEFAULTS, load_schema
from geoanatomy.measures import DIRECTIONS, HEADLINE_VARIANT, MEASURES, TABLE_MEASURES, measure
from geoanatomy.model import GPT, ModelConfig
from geoanatomy.stages.measures import measure_checkpoint


def test_registry_names_are_the_config_schema_enum():
    schema = load_schema()
    assert schema["properties"]["measures"]["properties"]["which"]["items"]["enum"] == list(MEASURES)
    assert DEFAULTS["measures"]["which"] == list(MEASURES)


def test_registry_defaults_are_the_config_defaults():
    blocks = {k for k, v in DEFAULTS["measures"].items() if isinstance(v, dict)}
    assert blocks == {m.config_key for m in MEASURES.values()}
    for m in MEASURES.values():
        assert m.defaults == DEFAULTS["measures"][m.config_key], m.name
        assert m.pool_size_key in m.defaults


def test_the_study_measures_keep_their_directions_and_headline_variants():
    """The study's four table measures as the paper reads them (a new measure adds its own
    entry; this pins the known ones, not the list)."""
    known = {"grad_erank": ("grad_rank", "collapse", "roy_vetterli"),
             "grad_cov_erank": ("grad_rank", "collapse", "roy_vetterli"),
             "hessian_top": ("hessian", "rise", "top_eigenvalue"), "llc": ("llc", "rise", "sgld")}
    for name, (kind, direction, variant) in known.items():
        assert name in {t.name for t in MEASURES[kind].writes}
        assert (DIRECTIONS[name], HEADLINE_VARIANT[name]) == (direction, variant)
    assert list(TABLE_MEASURES) == list(DIRECTIONS)             # the order of precursor.json's entries
    with pytest.raises(ValueError, match="unknown expensive measure 'fisher'"):
        measure("fisher")


def test_llc_reads_the_hessians_value_only_when_measured_first():
    """The LLC declares the Hessian's top eigenvalue as an input (Measure.uses): measured after
    it at one checkpoint it records eps * n_beta * lambda; alone it does not."""
    torch.manual_seed(0)
    model = GPT(ModelConfig(n_layer=1, d_model=16, n_head=2, vocab_size=12, block_size=10, attn_impl="math"))
    g = torch.Generator().manual_seed(0)
    cfg = {m.config_key: m.tiny_settings() for m in MEASURES.values()}
    pools = {m.config_key: torch.randint(0, 12, (int(cfg[m.config_key][m.pool_size_key]), 8), generator=g)
             for m in MEASURES.values()}
    seeds = {k: 1 for k in MEASURES}
    timings = {}
    rows = measure_checkpoint(model, pools, 2, cfg, seeds, list(MEASURES), timings)
    assert set(timings) == set(MEASURES)
    assert [r["measure"] for r in rows] == [r["measure"] for k in MEASURES
                                            for r in measure_checkpoint(model, pools, 2, cfg, seeds, [k])]
    hess = next(r for r in rows if r["measure"] == "hessian_top")
    llc = next(r for r in rows if r["measure"] == "llc")["settings"]
    assert llc["eps_nbeta_lambda"] == pytest.approx(llc["eps"] * llc["n_beta"] * hess["value"])
    alone = measure_checkpoint(model, pools, 2, cfg, seeds, ["llc"])[0]["settings"]
    assert "eps_nbeta_lambda" not in alone


def test_cost_is_the_sum_of_the_registry_entries(repo):
    from geoanatomy.config import load_config
    cfg = load_config(repo / "config.yaml", workdir=None)
    run = "cmp_L1_nano"
    s = cost.run_shape(cfg, run)
    m = cfg["measures"]
    full = cost.work_seconds(cfg, "measures", run, "cpu")
    for entry in MEASURES.values():
        per_ck = entry.seconds_per_checkpoint(m[entry.config_key], "nano", s["positions"], "cpu")
        assert per_ck > 0
        without = {**cfg, "measures": {**m, "which": [k for k in m["which"] if k != entry.name]}}
        n_sel = min(int(m["n_points"]), s["checkpoints"])              # the fixed schedule
        assert full - cost.work_seconds(without, "measures", run, "cpu") == pytest.approx(n_sel * per_ck)


def test_registry_cost_and_events_stage_import_without_torch():
    code = ("import sys; import geoanatomy.measures, geoanatomy.cost, geoanatomy.stages.events, "
            "geoanatomy.precursor; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr
