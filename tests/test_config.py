"""Bad input is rejected before any job runs, with a message naming the field and the
allowed values. BAD_INPUTS is the table quoted in docs/bad-input.md."""
import copy

import pytest
import yaml

from conftest import REPO
from geoanatomy.config import ConfigError, load_config, resolve, run_names

BASE = {"grid": [{"tasks": ["add"], "levels": ["L1"], "sizes": ["nano"]}]}


def with_(path: str, value, base=None):
    """Copy of BASE with the dotted ``path`` set to ``value`` (list indices allowed)."""
    cfg = copy.deepcopy(base or BASE)
    keys = path.split(".")
    node = cfg
    for k in keys[:-1]:
        k = int(k) if k.isdigit() else k
        if isinstance(node, dict) and k not in node:
            node[k] = {}
        node = node[k]
    last = keys[-1]
    node[int(last) if last.isdigit() else last] = value
    return cfg


# (kind of bad input, config, substrings the message must contain)
BAD_INPUTS = [
    ("unknown task", with_("grid.0.tasks", ["divide"]), ["grid.0.tasks.0", "'divide'", "copy", "mul"]),
    ("unknown level", with_("grid.0.levels", ["L4"]), ["grid.0.levels.0", "L1", "L3"]),
    ("unknown size", with_("grid.0.sizes", ["huge"]), ["grid.0.sizes.0", "nano", "xlarge"]),
    ("wrong type for steps", with_("train.steps", "many"), ["train.steps", "'many'"]),
    ("zero steps", with_("train.steps", 0), ["train.steps", "minimum"]),
    ("negative batch size", with_("train.batch_size", -8), ["train.batch_size"]),
    ("zero learning rate", with_("train.lr", 0), ["train.lr"]),
    ("negative learning rate", with_("train.lr", -1e-3), ["train.lr"]),
    ("warmup not below steps", with_("train.steps", 100, with_("train.warmup", 100)), ["train.warmup", "steps"]),
    ("more uniform checkpoints than steps", with_("train.steps", 10, with_("train.warmup", 2,
        with_("train.checkpoints", {"n_log": 2, "log_end": 0.1, "n_uniform": 50}))),
     ["train.checkpoints.n_uniform", "steps=10"]),
    ("too few checkpoints for event detection", with_("train.checkpoints", {"n_log": 0, "log_end": 0.1, "n_uniform": 2}),
     ["train.checkpoints", "persist"]),
    ("log_end outside (0, 1]", with_("train.checkpoints", {"n_log": 5, "log_end": 1.5, "n_uniform": 5}),
     ["train.checkpoints.log_end"]),
    ("eval samples exceed the held-out set", with_("grid.0.tasks", ["mul"], with_("eval", {"n_samples": 300})),
     ["eval.n_samples", "mul L1", "250"]),
    ("L3 not harder than L2", with_("tasks", {"add": {"L2": {"digits": 3}, "L3": {"digits": 3}}}),
     ["tasks.add", "L3 must be harder than L2", "digits"]),
    ("wrong parameter for a task", with_("tasks", {"copy": {"L1": {"digits": 4}}}), ["tasks.copy.L1", "length"]),
    ("mul digits not a pair", with_("tasks", {"mul": {"L1": {"digits": 2}}}), ["tasks.mul.L1.digits", "[digits_a, digits_b]"]),
    ("unknown top-level key", with_("trian", {"steps": 5}), ["trian", "allowed keys", "train"]),
    ("unknown nested key (typo)", with_("train.warmpu", 5), ["train", "warmpu", "warmup"]),
    ("bad device", with_("device", "gpu"), ["device", "'gpu'"]),
    ("events layer missing in a size", with_("events.layer", "block5"), ["events.layer", "block5", "ln_final"]),
    ("unknown transition", with_("events.transition", "peak"), ["events.transition", "floor", "recovery"]),
    ("context too short for the task", with_("model.block_size", 4), ["model.block_size", "add L1"]),
    ("empty grid", {"grid": []}, ["grid", "non-empty"]),
    ("grid block without sizes", {"grid": [{"tasks": ["add"], "levels": ["L1"]}]}, ["grid.0", "sizes"]),
    ("held-out fraction zero", with_("data.heldout_frac", 0), ["data.heldout_frac"]),
    ("negative seed", with_("seed", -1), ["seed"]),
    ("zero threads", with_("threads.train", 0), ["threads.train"]),
    ("persist zero", with_("events.persist", 0), ["events.persist"]),
    ("size override for an unknown size", with_("size_overrides", {"giant": {"steps": 5}}), ["size_overrides", "giant", "nano"]),
    ("acquisition threshold above 1", with_("events.acquisition_threshold", 1.5), ["events.acquisition_threshold"]),
]


@pytest.mark.parametrize("kind,cfg,needles", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_rejected_with_named_field(kind, cfg, needles):
    with pytest.raises(ConfigError) as e:
        resolve(cfg)
    msg = str(e.value)
    for n in needles:
        assert n in msg, f"{kind}: {n!r} not in {msg!r}"


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot be read"):
        load_config(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("grid: [\n  unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(tmp_path / "list.yaml")


def test_shipped_configs_are_valid():
    default = load_config(REPO / "config.yaml")
    assert len(run_names(default)) >= 16
    sizes = {r.rsplit("_", 1)[1] for r in run_names(default)}
    tasks = {r.split("_")[0] for r in run_names(default)}
    assert len(sizes) >= 2 and len(tasks) == 8
    paper = load_config(REPO / "config" / "paper.yaml")
    assert len(run_names(paper)) == 144
    from geoanatomy.schedule import checkpoint_steps
    ck = paper["train"]["checkpoints"]
    assert 206 <= len(checkpoint_steps(paper["train"]["steps"], ck["n_log"], ck["log_end"], ck["n_uniform"])) <= 256


def test_config_yaml_level_table_matches_library_defaults():
    from geoanatomy.tasks import DEFAULT_LEVELS
    assert yaml.safe_load((REPO / "config.yaml").read_text())["tasks"] == DEFAULT_LEVELS
