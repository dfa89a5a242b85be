"""Bad input is rejected before any job runs, with a message naming the field and the
allowed values (or the bound). BAD_INPUTS is the table quoted in docs/bad-input.md;
careless and hostile files (encodings, repeated keys, JSON, alias bombs), the
validate/snakemake agreement and a fuzz test follow it."""
import copy
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO, smk
from geoanatomy.config import ConfigError, load_config, resolve, run_names, run_spec
# the study's eight tasks, named: the study grid and the pinned data digest are about these
STUDY_TASKS = ["copy", "rev", "cmp", "par", "add", "mod", "sort", "mul"]

NAN, INF = float("nan"), float("inf")

# Guards against work that explodes (alias bombs, unbounded redraws): a check must finish in
# this many seconds. Far above the milliseconds they take, so load on a shared machine does
# not fail them, and far below what an expanding or unbounded implementation needs.
BLOWUP_S = 10.0


def _nested(depth: int):
    v = 1
    for _ in range(depth):
        v = [v]
    return v

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
    ("too few checkpoints for event detection", with_("train.checkpoints", {"n_log": 0, "log_end": 0.1, "n_uniform":
                                                                            2}),
     ["train.checkpoints", "persist"]),
    ("log_end outside (0, 1]", with_("train.checkpoints", {"n_log": 5, "log_end": 1.5, "n_uniform": 5}),
     ["train.checkpoints.log_end"]),
    ("eval samples exceed the held-out pool", with_("grid.0.tasks", ["mul"], with_("eval", {"n_samples": 2000})),
     ["eval.n_samples", "mul L1", "data.n_heldout = 1024"]),
    ("L3 not harder than L2", with_("tasks", {"add": {"L2": {"digits": 3}, "L3": {"digits": 3}}}),
     ["tasks.add", "L3 must be harder than L2", "digits"]),
    ("wrong parameter for a task", with_("tasks", {"copy": {"L1": {"digits": 4}}}), ["tasks.copy.L1", "length"]),
    ("mul digits not a pair", with_("tasks", {"mul": {"L1": {"digits": 2}}}), ["tasks.mul.L1.digits", "[digits_a, "
                                                                                                      "digits_b]"]),
    ("unknown top-level key", with_("trian", {"steps": 5}), ["trian", "did you mean 'train' for 'trian'?",
                                                             "allowed keys"]),
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
    ("size override for an unknown size", with_("size_overrides", {"giant": {"steps": 5}}), ["size_overrides", "giant",
                                                                                             "nano"]),
    ("acquisition threshold above 1", with_("events.acquisition_threshold", 1.5), ["events.acquisition_threshold"]),
    # results_dir: quoting-free sub-folder of the working directory (REPO here)
    ("results_dir empty", with_("results_dir", ""), ["results_dir", "empty"]),
    ("results_dir the filesystem root", with_("results_dir", "/"), ["results_dir", "filesystem root"]),
    ("results_dir outside the working directory", with_("results_dir", "../../etc"),
     ["results_dir", "outside the working directory", "allow_results_outside_workdir"]),
    ("results_dir absolute elsewhere", with_("results_dir", str(REPO.parent / "elsewhere")),
     ["results_dir", str(REPO.parent / "elsewhere"), "outside"]),
    ("results_dir the working directory itself", with_("results_dir", "."), ["results_dir", "working directory "
                                                                                            "itself"]),
    ("results_dir shell injection", with_("results_dir", "r$(touch INJECTED)"),
     ["results_dir", "'$'", "no quoting"]),
    ("results_dir with a space", with_("results_dir", "my results"), ["results_dir", "' '", "no quoting"]),
    ("results_dir with a name over 255 bytes", with_("results_dir", "r/" + "x" * 300),
     ["results_dir", "300 bytes", "at most 255 per name"]),
    ("results_dir with a wildcard brace", with_("results_dir", "out{run}"), ["results_dir", "'{'"]),
    ("results_dir component like an option", with_("results_dir", "out/-rf"), ["results_dir", "'-'"]),
    # held-out set must leave at least half of each input space for training
    ("every input held out", with_("data.heldout_frac", 1.0, with_("grid.0.tasks", ["mul"])),
     ["data.heldout_frac", "1.0", "more than 1/2"]),
    ("too few inputs held out to draw from", with_("data.heldout_frac", 0.01, with_("grid.0.tasks", ["mul"])),
     ["data.heldout_frac", "mul L1", "1000 inputs", "at least 20"]),
    # the known transitions' tasks (grok: a fixed training set; ind: a segment repeated in context)
    ("grok training fraction 1", with_("tasks", {"grok": {"L1": {"train_frac": 1.0}}}, with_("grid.0.tasks", ["grok"])),
     ["tasks.grok.L1.train_frac", "maximum of 1"]),
    ("grok training fraction 0", with_("tasks", {"grok": {"L1": {"train_frac": 0}}}, with_("grid.0.tasks", ["grok"])),
     ["tasks.grok.L1.train_frac", "minimum of 0"]),
    ("grok training set too small to hold every answer",
     with_("tasks", {"grok": {"L1": {"train_frac": 0.05}, "L2": {"train_frac": 0.04}, "L3": {"train_frac": 0.03}}},
           with_("grid.0.tasks", ["grok"])),
     ["tasks.grok.L1.train_frac", "holds no pair with answer", "raise it"]),
    ("grok modulus beyond the vocabulary", with_("tasks", {"grok": {"L1": {"train_frac": 0.7, "modulus": 31}}},
                                                  with_("grid.0.tasks", ["grok"])),
     ["tasks.grok.L1.modulus", "between 2 and 30"]),
    ("ind repeat that does not fit the context", with_("model.block_size", 12, with_("grid.0.tasks", ["ind"])),
     ["tasks.ind.L1.length", "needs 16 positions", "model.block_size", "12"]),
    ("ind repeat too long at L3", with_("tasks", {"ind": {"L3": {"length": 24, "segment": 30}}},
                                        with_("grid.0", {"tasks": ["ind"], "levels": ["L3"], "sizes": ["nano"]})),
     ["tasks.ind.L3.length", "needs 86 positions", "is 64"]),
    ("negative weight decay", with_("train.weight_decay", -0.1), ["train.weight_decay", "minimum of 0"]),
    # non-finite numbers, anywhere, by dotted path
    ("lr NaN", with_("train.lr", NAN), ["train.lr", "nan", "not a finite number"]),
    ("lr infinite", with_("train.lr", INF), ["train.lr", "inf", "not a finite number"]),
    ("weight_decay NaN", with_("train.weight_decay", NAN), ["train.weight_decay", "not a finite"]),
    ("min_lr_frac -inf", with_("train.min_lr_frac", -INF), ["train.min_lr_frac", "-inf"]),
    ("rankme_eps NaN", with_("eval.rankme_eps", NAN), ["eval.rankme_eps", "not a finite"]),
    ("events threshold NaN", with_("events.acquisition_threshold", NAN), ["events.acquisition_threshold", "nan"]),
    ("NaN in a size override", with_("size_overrides", {"nano": {"lr": NAN}}), ["size_overrides.nano.lr", "nan"]),
    ("NaN in a list", with_("grid.0.levels", ["L1", NAN]), ["grid.0.levels.1", "nan"]),
    # integers that arrive as floats: exact ones are converted, others rejected by name
    ("non-integral steps", with_("train.steps", 60.5), ["train.steps", "60.5", "integer"]),
    ("non-integral digits", with_("tasks", {"add": {"L1": {"digits": 2.5}}}), ["tasks.add.L1.digits", "2.5"]),
    # size bounds (the schema's maximum; the message quotes it)
    ("steps above the bound", with_("train.steps", 10 ** 8), ["train.steps", "maximum of 10000000"]),
    ("float steps above the bound", with_("train.steps", 1e300), ["train.steps", "maximum of 10000000"]),
    ("too many log checkpoints", with_("train.checkpoints.n_log", 10 ** 6), ["train.checkpoints.n_log", "100000"]),
    ("too many uniform checkpoints", with_("train.checkpoints.n_uniform", 10 ** 6),
     ["train.checkpoints.n_uniform", "100000"]),
    ("block_size above the bound", with_("model.block_size", 100_000), ["model.block_size", "maximum of 8192"]),
    ("batch_size above the bound", with_("train.batch_size", 10 ** 6), ["train.batch_size", "maximum of 8192"]),
    ("eval samples above the bound", with_("eval.n_samples", 10 ** 6), ["eval.n_samples", "maximum of 100000"]),
    ("probe samples above the bound", with_("probes.n_samples", 10 ** 6), ["probes.n_samples", "maximum of 100000"]),
    ("held-out count above the bound", with_("data.n_heldout", 10 ** 7), ["data.n_heldout", "maximum of 100000"]),
    ("gradient samples above the bound", with_("measures.grad_rank.n_samples", 10 ** 5),
     ["measures.grad_rank.n_samples", "maximum of 4096"]),
    ("LLC data pool above the bound", with_("measures.llc.n_data", 10 ** 7), ["measures.llc.n_data", "maximum of "
                                                                                                     "100000"]),
    ("threads above the bound", with_("threads.train", 10 ** 6), ["threads.train", "maximum of 1024"]),
    ("seed above the bound", with_("seed", 2 ** 40), ["seed", "maximum of 4294967295"]),
    ("integer beyond int64", with_("seed", 10 ** 40), ["seed", "out of range"]),
    ("copy L3 of 400 digits", with_("model.block_size", 1024, with_(
        "tasks", {"copy": {"L1": {"length": 4}, "L2": {"length": 8}, "L3": {"length": 400}}},
        with_("grid.0", {"tasks": ["copy"], "levels": ["L3"], "sizes": ["nano"]}))),
     ["tasks.copy.L3.length", "400 input digits", "62-bit", "at most 18"]),
    ("modulus too large for the input key", with_(
        "tasks", {"mod": {"L1": {"modulus": 37}, "L2": {"modulus": 61}, "L3": {"modulus": 10 ** 11}}},
        with_("grid.0", {"tasks": ["mod"], "levels": ["L3"], "sizes": ["nano"]})),
     ["tasks.mod.L3.modulus", "22 input digits", "at most 18"]),
    ("parity longer than the input key", with_(
        "tasks", {"par": {"L1": {"length": 10}, "L2": {"length": 16}, "L3": {"length": 63}}},
        with_("grid.0", {"tasks": ["par"], "levels": ["L3"], "sizes": ["nano"]})),
     ["tasks.par.L3.length", "63 input bits", "at most 62"]),
    ("parity support longer than its length", with_(
        "tasks", {"par": {"L1": {"length": 8, "support": 1}, "L2": {"length": 8, "support": 2},
                          "L3": {"length": 8, "support": 9}}}),
     ["tasks.par.L3.support", "9", "between 1 and length (8)"]),
    ("parity support not growing", with_(
        "tasks", {"par": {"L1": {"length": 8, "support": 2}, "L2": {"length": 8, "support": 2},
                          "L3": {"length": 8, "support": 3}}}),
     ["tasks.par", "L2 must be harder than L1"]),
    ("support for a task without it", with_(
        "tasks", {"copy": {"L1": {"length": 4, "support": 2}, "L2": {"length": 8}, "L3": {"length": 16}}}),
     ["tasks.copy.L1", "'length'", "['length', 'support']"]),
    ("max_unpruned_runs without pruning", with_("max_unpruned_runs", 4),
     ["max_unpruned_runs", "keep_checkpoints: final", "'all'"]),
    ("unknown keep_checkpoints", with_("keep_checkpoints", "some"), ["keep_checkpoints", "'some'", "final"]),
    ("too many grid blocks", {"grid": [BASE["grid"][0]] * 1001}, ["grid", "1001 entries", "at most 1000"]),
    ("grid list too long", with_("grid.0.tasks", ["add"] * 101), ["grid.0.tasks", "101 entries", "at most 100"]),
    ("too many values", with_("pythia.models", ["a/b"] * 30_000), ["pythia.models", "at most 20000"]),
    ("nested too deep", with_("train.checkpoints", _nested(30)),
     ["train.checkpoints", "nested more than 24"]),
    # YAML 1.1 reads 1e-3 as a string: the message says how to write it
    ("lr written 1e-3", with_("train.lr", "1e-3"), ["train.lr", "write 1.0e-3 (YAML reads 1e-3 as a string)"]),
    ("steps written 1e4", with_("train.steps", "1e4"), ["train.steps", "write 10000"]),
    ("n_beta written 2e1", with_("measures.llc.n_beta", "2e1"), ["measures.llc.n_beta", "write 2.0e1"]),
    # values YAML can build that a config has no use for
    ("Snakemake YTE template", with_("__use_yte__", True), ["__use_yte__", "not supported", "geoanatomy validate"]),
    ("non-string key", with_("tasks", {1: {"L1": {"length": 4}}}), ["tasks.1", "keys must be strings"]),
    ("a set value", with_("seed", {1, 2}), ["seed", "set value"]),
    ("control character", with_("events.layer", "ln_final\x00"), ["events.layer", "U+0000"]),
    ("very long string", with_("events.layer", "x" * 5000), ["events.layer", "at most 4096"]),
]


@pytest.mark.parametrize("kind,cfg,needles", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_rejected_with_named_field(kind, cfg, needles):
    with pytest.raises(ConfigError) as e:
        resolve(cfg, workdir=REPO)
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


def test_study_grid_is_the_documented_design_with_classes_fixed_on_disjoint_seeds():
    """config/study.yaml: every task at every level at nano, every task at L3 at micro, two
    seeds per cell, the shuffled controls; its class file (checked by load_config against its
    sha256) comes from config/study_calibration.yaml, whose seeds are disjoint from the study's
    and whose cells are the study's."""
    from geoanatomy.spec import parse_run_name
    TASKS = STUDY_TASKS                     # the study's tasks by name (a newly registered task is not the study's)
    study = load_config(REPO / "config" / "study.yaml", workdir=REPO)
    cal = load_config(REPO / "config" / "study_calibration.yaml", workdir=REPO)
    runs = [parse_run_name(r) for r in run_names(study)]
    cells = {}
    for r in runs:
        if not r["control"]:
            cells.setdefault((r["task"], r["level"], r["size"]), set()).add(r["seed"])
    assert len(cells) == 32 and all(s == {0, 1} for s in cells.values())
    assert {(t, lv) for t, lv, z in cells if z == "nano"} == {(t, lv) for t in TASKS for lv in ("L1", "L2", "L3")}
    assert {t for t, lv, z in cells if z == "micro" and lv == "L3"} == set(TASKS)
    # one shuffled-answer control per task at nano (the benchmark's negatives) and mod L1 at micro
    ctrl = sorted((r["task"], r["level"], r["size"]) for r in runs if r["control"])
    assert ctrl == sorted([(t, "L1", "nano") for t in TASKS] + [("mod", "L1", "micro")])
    cal_runs = [parse_run_name(r) for r in run_names(cal)]
    assert {(r["task"], r["level"], r["size"]) for r in cal_runs} == set(cells)
    assert not {r["seed"] for r in cal_runs} & {r["seed"] for r in runs}
    assert study["events"]["classes_file"] == "config/study_classes.csv" and study["events"]["classes_sha256"]
    for block in ("train", "eval", "data"):
        assert study[block] == cal[block], block                      # classes hold for these settings
    assert {k: v for k, v in study["events"].items() if not k.startswith("classes")} == \
        {k: v for k, v in cal["events"].items() if not k.startswith("classes")}


def test_config_yaml_level_table_matches_library_defaults():
    """The configs' level tables repeat the registry's levels (their one home) for the tasks
    they list, the study's eight among them; a task registered later needs no config edit."""
    from geoanatomy.tasks import DEFAULT_LEVELS
    for f in (REPO / "config.yaml", REPO / "config" / "paper.yaml"):
        table = yaml.safe_load(f.read_text())["tasks"]
        assert set(STUDY_TASKS) <= set(table), f
        assert table == {t: DEFAULT_LEVELS[t] for t in table}, f


# ------------------------------------------------------------ results_dir
def test_results_dir_opt_out_and_what_it_does_not_allow(tmp_path):
    out = {**BASE, "allow_results_outside_workdir": True}
    elsewhere = str(tmp_path / "x")
    assert resolve({**out, "results_dir": elsewhere}, workdir=REPO)["results_dir"] == elsewhere
    assert resolve({**out, "results_dir": "../elsewhere"}, workdir=REPO)["results_dir"] == "../elsewhere"
    for bad, needle in (("/", "filesystem root"), ("", "empty"), (str(tmp_path / "a b"), "' '")):
        with pytest.raises(ConfigError, match="results_dir") as e:
            resolve({**out, "results_dir": bad}, workdir=REPO)
        assert needle in str(e.value)
    assert resolve({**BASE, "results_dir": str(REPO / "results")}, workdir=REPO)  # absolute, inside


def test_results_dir_that_is_a_file(tmp_path):
    (tmp_path / "results").write_text("not a folder")
    with pytest.raises(ConfigError, match="'results' exists and is not a directory"):
        resolve({**BASE, "results_dir": "results"}, workdir=tmp_path)
    with pytest.raises(ConfigError, match="part of 'results/deeper'"):
        resolve({**BASE, "results_dir": "results/deeper"}, workdir=tmp_path)


def test_load_config_checks_results_dir_against_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({**BASE, "results_dir": str(tmp_path.parent / "x")}))
    with pytest.raises(ConfigError, match=f"outside the working directory {tmp_path}"):
        load_config("c.yaml")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({**BASE, "results_dir": "out/runs"}))
    assert load_config("c.yaml")["results_dir"] == "out/runs"


# ------------------------------------------------------- integers as floats
def test_integral_floats_become_python_ints():
    cfg = resolve({"grid": [{"tasks": ["mul", "add"], "levels": ["L1"], "sizes": ["nano"]}],
                   "seed": 3.0, "train": {"steps": 60.0, "warmup": 5.0, "batch_size": 8.0, "lr": 1.0,
                                          "checkpoints": {"n_log": 5.0, "log_end": 1.0, "n_uniform": 4.0}},
                   "tasks": {"mul": {"L1": {"digits": [2.0, 1.0]}}, "add": {"L1": {"digits": 2.0}}},
                   "size_overrides": {"nano": {"steps": 50.0}}, "data": {"n_heldout": 256.0},
                   "eval": {"n_samples": 32.0}, "probes": {"n_samples": 64}, "measures": {"llc": {"n_beta": 30.0}},
                   "pythia": {"revisions": [1000.0, "step2000"], "n_items": {"syntax": 10.0}}})
    ints = [cfg["seed"], cfg["train"]["steps"], cfg["train"]["warmup"], cfg["train"]["batch_size"],
            cfg["train"]["checkpoints"]["n_log"], cfg["train"]["checkpoints"]["n_uniform"],
            *cfg["tasks"]["mul"]["L1"]["digits"], cfg["tasks"]["add"]["L1"]["digits"],
            cfg["size_overrides"]["nano"]["steps"], cfg["data"]["n_heldout"], cfg["eval"]["n_samples"],
            cfg["pythia"]["revisions"][0], cfg["pythia"]["n_items"]["syntax"]]
    assert all(type(v) is int for v in ints), ints
    assert ints[1] == 60 and ints[6:8] == [2, 1]
    # numbers stay floats where the schema says number
    assert type(cfg["train"]["lr"]) is float and type(cfg["measures"]["llc"]["n_beta"]) is float
    assert type(cfg["train"]["checkpoints"]["log_end"]) is float
    from geoanatomy.config import run_spec
    spec = run_spec(cfg, "add_L1_nano_s3")                   # seed 3: the run name says so
    assert type(spec.train["steps"]) is int and type(spec.data["n_heldout"]) is int and spec.seed == 3


def test_input_space_is_exact_and_overflow_free():
    from geoanatomy.config import input_space
    assert input_space("copy", {"length": 400}) == 10 ** 400
    assert input_space("mod", {"modulus": 97}) == 97 ** 2
    assert input_space("mul", {"digits": [3, 2]}) == 10 ** 5
    assert input_space("par", {"length": 24}) == 2 ** 24


# ---------------------------------------------------------------- the grid
def test_grid_repeats_are_dropped_and_a_grid_bomb_is_fast(tmp_path):
    cfg = resolve({"grid": [{"tasks": ["add", "add", "mod"], "levels": ["L1", "L1"], "sizes": ["nano"] * 50}] * 200})
    assert cfg["grid"] == [{"tasks": ["add", "mod"], "levels": ["L1"], "sizes": ["nano"]}]
    assert run_names(cfg) == ["add_L1_nano", "mod_L1_nano"]
    # 1000 blocks x 1000 x 1000 x 1000 repeated entries in ~22 KB (YAML aliases)
    bomb = tmp_path / "bomb.yaml"
    lists = ", ".join(f"{k}: [{', '.join([v] * 1000)}]" for k, v in (("tasks", "add"), ("levels", "L1"), ("sizes",
                                                                                                          "nano")))
    bomb.write_text(f"grid:\n  - &b {{{lists}}}\n" + "  - *b\n" * 999)
    t = time.perf_counter()
    with pytest.raises(ConfigError, match=r"config field 'grid\.\d+\.\w+': 1000 entries; .* at most 20000"):
        load_config(bomb, workdir=None)
    assert time.perf_counter() - t < BLOWUP_S
    # 1000 distinct-looking blocks within the bounds: accepted, fast
    many = {"grid": [{"tasks": ["copy", "rev", "add"][: 1 + i % 3], "levels": ["L1", "L2"][: 1 + i % 2],
                      "sizes": ["nano", "micro", "nano"]} for i in range(1000)]}
    t = time.perf_counter()
    assert len(run_names(resolve(many))) == 12
    assert time.perf_counter() - t < BLOWUP_S


def test_yaml_alias_bomb_is_rejected_fast(tmp_path):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]" for p, c in zip("abcdefgh", "bcdefghi")]
    (tmp_path / "laughs.yaml").write_text("\n".join(lines) + "\ngrid: [{tasks: [add], levels: [L1], sizes: [nano]}]\n")
    t = time.perf_counter()
    with pytest.raises(ConfigError, match="at most 20000"):
        load_config(tmp_path / "laughs.yaml", workdir=None)
    assert time.perf_counter() - t < BLOWUP_S


# ------------------------------------------------------------ config files
GRID_YAML = "grid: [{tasks: [add], levels: [L1], sizes: [nano]}]\n"
GRID_JSON = '{"grid": [{"tasks": ["add"], "levels": ["L1"], "sizes": ["nano"]}]'

# (file name, bytes, substrings the message must contain); {f} is the file's path
BAD_FILES = [
    ("latin1.yaml", GRID_YAML.encode() + "# caf\u00e9\n".encode("latin-1"),
     ["config file {f}: not UTF-8", "byte 0xe9 at byte offset 57", "line 2"]),
    ("empty.yaml", b"", ["config file {f} is empty"]),
    ("comments.yaml", b"# nothing yet\n\n", ["config file {f} is empty"]),
    ("empty.json", b"  \n", ["config file {f} is empty"]),
    ("dup.yaml", (GRID_YAML + "train:\n  steps: 100\n  warmup: 5\n  steps: 200\n").encode(),
     ["config file {f}: duplicate key 'steps' at line 5 (first at line 3)"]),
    ("dup-top.yaml", (GRID_YAML + "seed: 1\n" + GRID_YAML).encode(), ["duplicate key 'grid' at line 3 (first at line "
                                                                      "1)"]),
    ("dup.json", (GRID_JSON + ',\n "seed": 1,\n "seed": 2}').encode(),
     ["config file {f}: duplicate key 'seed' at line 3 (first at line 2)"]),
    ("nan.json", (GRID_JSON + ', "train": {"lr": NaN}}').encode(), ["config field 'train.lr': nan is not a finite "
                                                                    "number"]),
    ("inf.json", (GRID_JSON + ', "eval": {"rankme_eps": -Infinity}}').encode(), ["'eval.rankme_eps': -inf"]),
    ("nan.yaml", (GRID_YAML + "train: {lr: .nan}\n").encode(), ["config field 'train.lr': nan is not a finite number"]),
    ("bad.json", (GRID_JSON + ",}").encode(), ["config file {f}: not valid JSON", "line 1"]),
    ("list.json", b"[1, 2]", ["top level must be a mapping, got list"]),
    ("lr.yaml", (GRID_YAML + "train: {lr: 1e-3}\n").encode(), ["'train.lr'", "write 1.0e-3 (YAML reads 1e-3 as a "
                                                                             "string)"]),
    ("bigint.yaml", (GRID_YAML + "seed: 1" + "0" * 5000 + "\n").encode(), ["config file {f}: not valid YAML", "4300 "
                                                                                                              "digits"]),
    ("deep.yaml", b"[" * 100_000, ["config file {f}: not valid YAML", "nesting depth"]),
    ("huge.yaml", b"# " + b"x" * (1 << 20) + b"\n", ["config file {f}: larger than 1048576 bytes"]),
    ("python.yaml", (GRID_YAML + "seed: !!python/object/apply:os.system ['touch INJECTED']\n").encode(),
     ["config file {f}: not valid YAML", "python/object/apply"]),
    ("yte.yaml", (GRID_YAML + "__use_yte__: true\n").encode(), ["'__use_yte__'", "not supported"]),
]


@pytest.mark.parametrize("name,data,needles", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_config_files(tmp_path, name, data, needles):
    f = tmp_path / name
    f.write_bytes(data)
    t = time.perf_counter()
    with pytest.raises(ConfigError) as e:
        load_config(f, workdir=None)
    assert time.perf_counter() - t < BLOWUP_S
    for n in needles:
        assert n.format(f=f) in str(e.value), f"{n!r} not in {str(e.value)!r}"
    assert not (tmp_path / "INJECTED").exists() and not Path("INJECTED").exists()


def test_good_config_files(tmp_path):
    (tmp_path / "c.json").write_text(GRID_JSON + ', "train": {"steps": 300.0, "warmup": 10}}')
    cfg = load_config(tmp_path / "c.json", workdir=None)
    assert cfg["train"]["steps"] == 300 and type(cfg["train"]["steps"]) is int
    # merge keys are not duplicate keys; a byte-order mark is fine
    (tmp_path / "m.yaml").write_text("\ufeff" + GRID_YAML + "train:\n  steps: 300\n  warmup: 10\n"
                                     "size_overrides:\n  nano: &o {steps: 200, warmup: 5}\n"
                                     "  micro:\n    <<: *o\n    steps: 250\n")
    cfg = load_config(tmp_path / "m.yaml", workdir=None)
    assert cfg["size_overrides"]["micro"] == {"steps": 250, "warmup": 5}
    # several files merge in order (Snakemake's --configfile a --configfile b)
    (tmp_path / "b.yaml").write_text("train: {steps: 400}\n")
    assert load_config([tmp_path / "c.json", tmp_path / "b.yaml"], workdir=None)["train"]["steps"] == 400
    with pytest.raises(ConfigError, match="is not a regular file"):
        load_config(tmp_path, workdir=None)


# ------------------------------------------------------------ draw loops
def test_redraw_loops_are_bounded(monkeypatch):
    from geoanatomy import tasks
    # every input held out (what the config check now rejects): the training redraw gives up
    data = tasks.TaskData(tasks.make_task("mul", "L1"), seed=0, n_heldout=1000, heldout_frac=1.0)
    t = time.perf_counter()
    with pytest.raises(RuntimeError, match=r"mul L1 step 0: .*wrong side of the held-out split after 1000 rounds"):
        data.train_inputs(0, 8)
    assert time.perf_counter() - t < BLOWUP_S
    # nothing held out: the held-out pool gives up the same way
    with pytest.raises(RuntimeError, match=r"mul L1 held-out pool: .*after 1000 rounds"):
        tasks.TaskData(tasks.make_task("mul", "L1"), seed=0, n_heldout=1000, heldout_frac=1e-9)


def test_valid_draws_are_unchanged():
    """Held-out sets and training batches of valid settings are pinned: the digest changes only
    when the data definition changes on purpose (last: add and mul operands reversed too,
    sparse parity, the calibrated levels)."""
    import hashlib

    from geoanatomy.tasks import LEVELS, TaskData, make_task
    h = hashlib.sha256()
    for task in STUDY_TASKS:                # by name: a newly registered task has its own recorded cases
        for lv in LEVELS:
            d = TaskData(make_task(task, lv), seed=7, n_heldout=300, heldout_frac=0.25)
            h.update(d.heldout.tobytes())
            for step in (0, 1, 99):
                h.update(d.train_batch(step, 64).tobytes())
    d = TaskData(make_task("mul", "L1"), seed=1, n_heldout=1024, heldout_frac=0.5)  # many redraws
    h.update(d.heldout.tobytes())
    h.update(d.train_batch(3, 256).tobytes())
    assert h.hexdigest()[:16] == "47f64c4062a788aa"


# ---------------------------------------------------------------- devices
def test_unavailable_cuda_device_named_by_validate(tmp_path, capsys):
    import torch

    from geoanatomy.cli import main
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    (tmp_path / "gpu.yaml").write_text(GRID_YAML + f"device: cuda:{n}\n")
    assert main(["validate", "--config", str(tmp_path / "gpu.yaml")]) == 2
    err = capsys.readouterr().err
    assert f"config field 'device': 'cuda:{n}' is not available on this machine" in err
    (tmp_path / "pythia.yaml").write_text(GRID_YAML + f"pythia: {{device: 'cuda:{n}'}}\n")
    assert load_config(tmp_path / "pythia.yaml", workdir=None)  # pythia off: its device is not used


def test_cpu_and_auto_configs_do_not_import_torch(tmp_path):
    for dev in ("cpu", "auto"):
        (tmp_path / f"{dev}.yaml").write_text(GRID_YAML + f"device: {dev}\n")
    code = ("import sys; from geoanatomy.config import load_config\n"
            f"for d in ('cpu', 'auto'): load_config(r'{tmp_path}/' + d + '.yaml', workdir=None)\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


# ------------------------------------------------------------ import layers
def _fresh_python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_defaults_import_no_config_machinery():
    code = ("import sys, geoanatomy.defaults\n"
            "print([m for m in sys.modules if m.startswith(('yaml', 'jsonschema', 'torch', 'geoanatomy.config'))])")
    assert _fresh_python(code) == "[]"


def test_config_imports_no_branch_but_checks_its_block():
    """geoanatomy.config does not import the Pythia branch; validating a config still runs
    the branch's check of its block (config.checks.BLOCK_CHECKS)."""
    code = ("import sys\nfrom geoanatomy.config import ConfigError, resolve\n"
            "print(any(m.startswith('geoanatomy.pythia') for m in sys.modules))\n"
            "try:\n    resolve({'grid': [{'tasks': ['add'], 'levels': ['L1'], 'sizes': ['nano']}], "
            "'pythia': {'enabled': True}})\nexcept ConfigError as e:\n    print(e)\n"
            "print(any(m.startswith('geoanatomy.pythia') for m in sys.modules))")
    loaded, msg, loaded_after = _fresh_python(code).splitlines()
    assert loaded == loaded_after == "False"        # not even to check the pythia: block
    assert msg == "config field 'pythia.models': empty while pythia.enabled is true; give hub ids or local directories"


def test_pythia_benchmark_default_and_schema_are_every_benchmark():
    from geoanatomy.config import DEFAULTS, load_schema
    from geoanatomy.defaults import PYTHIA_BENCHMARKS
    from geoanatomy.config.pythia import BENCHMARKS
    assert PYTHIA_BENCHMARKS == BENCHMARKS == DEFAULTS["pythia"]["benchmarks"]
    assert load_schema()["$defs"]["pythia_benchmark"]["enum"] == BENCHMARKS


# ------------------------------------------- validate and snakemake agree
# What Snakemake itself says about a --configfile it cannot parse before the Snakefile runs
# (it reads every --configfile first; our loader then re-reads it): an empty file and
# bytes that are not UTF-8 never reach geoanatomy.config there.
SNAKEMAKE_OWN_ERRORS = ("Config file must be given as JSON or YAML with keys at top level",
                        "UnicodeDecodeError")


def _snakemake(workdir: Path, *args):
    """conftest.smk without raising: (return code, stdout + stderr)."""
    p = smk(workdir, *args, check=False)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.slow  # 7 snakemake start-ups, two at a time: 4 s on an idle 2-core machine, 12 s on a busy one
def test_validate_and_snakemake_give_the_same_answer(tmp_path, monkeypatch, capsys):
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from geoanatomy.cli import main
    n_gpu = torch.cuda.device_count() if torch.cuda.is_available() else 0
    files = {
        "nan.json": (GRID_JSON + ', "train": {"lr": NaN}}').encode(),
        "dup.yaml": (GRID_YAML + "train:\n  steps: 100\n  steps: 200\n").encode(),
        "outside.yaml": (GRID_YAML + "results_dir: ../elsewhere\n").encode(),
        "empty.yaml": b"",
        "latin1.yaml": GRID_YAML.encode() + "# caf\u00e9\n".encode("latin-1"),
        "gpu.yaml": (GRID_YAML + f"device: cuda:{n_gpu}\n").encode(),
    }
    monkeypatch.chdir(tmp_path)  # validate checks results_dir against the current directory
    said = {}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        assert main(["validate", "--config", str(tmp_path / name)]) == 2, name
        err = capsys.readouterr().err.strip()
        assert err.startswith("geoanatomy validate: config "), err
        said[name] = err.removeprefix("geoanatomy validate: ")
    # a dry run never checks the device (it may plan for another machine); a local run does,
    # before any job
    calls = {name: ("--cores", "1", "--configfile", str(tmp_path / name), *(() if name == "gpu.yaml" else ("-n",)))
             for name in files}
    calls["gpu.yaml -n"] = ("-n", "--configfile", str(tmp_path / "gpu.yaml"))
    with ThreadPoolExecutor(2) as pool:
        results = dict(zip(calls, pool.map(lambda a: _snakemake(tmp_path, *a), calls.values())))
    for name, msg in said.items():
        rc, out = results[name]
        assert rc != 0, f"{name}: snakemake accepted it\n{out}"
        if name in ("empty.yaml", "latin1.yaml"):
            assert msg in out or any(s in out for s in SNAKEMAKE_OWN_ERRORS), f"{name}:\n{out}"
        else:
            assert f"geoanatomy: invalid configuration: {msg}" in out, f"{name}: {msg!r} not in\n{out}"
    assert not list(tmp_path.glob("results/*")), "a job ran"
    rc, out = results["gpu.yaml -n"]
    assert rc == 0 and "This was a dry-run" in out, out


# -------------------------------------------------------------------- fuzz
FUZZ_BASE = {
    "seed": 1, "device": "cpu", "results_dir": "results",
    "grid": [{"tasks": ["add", "mod"], "levels": ["L1", "L2"], "sizes": ["nano"]},
             {"tasks": ["mul", "par"], "levels": ["L1"], "sizes": ["micro"]}],
    "tasks": {"add": {"L1": {"digits": 2}, "L2": {"digits": 3}, "L3": {"digits": 5}},
              "mul": {"L1": {"digits": [2, 1]}, "L2": {"digits": [2, 2]}, "L3": {"digits": [3, 2]}}},
    "model": {"block_size": 64},
    "train": {"steps": 300, "batch_size": 16, "lr": 1.0e-3, "warmup": 10, "min_lr_frac": 0.1,
              "checkpoints": {"n_log": 10, "log_end": 0.1, "n_uniform": 10}},
    "size_overrides": {"micro": {"steps": 200, "lr": 5.0e-4}},
    "data": {"n_heldout": 512, "heldout_frac": 0.25},
    "eval": {"n_samples": 64, "rankme_eps": 1.0e-7},
    "events": {"layer": "ln_final", "persist": 3, "acquisition_threshold": 0.5, "transition": "floor"},
    "measures": {"which": ["grad_rank", "llc"], "n_points": 5, "grad_rank": {"n_samples": 8},
                 "llc": {"n_beta": None, "batch_size": 8, "n_data": 64}},
    "probes": {"n_samples": 40},
    "threads": {"train": 1, "probes": 2},
    "summary": {"n_resamples": 100, "seed": 3},
    "pythia": {"enabled": False, "models": ["EleutherAI/pythia-160m"], "revisions": [0, "step1000"],
               "n_items": {"syntax": 5}},
}
FUZZ_NUMBERS = [0, 1, -1, 2, 7, -10 ** 9, 10 ** 12, 2 ** 63, -(2 ** 64), 10 ** 30, 1e300, -1e-300, 0.5, 60.0,
                1e-3, NAN, INF, -INF, True, False]
FUZZ_STRINGS = ["", "x", "1e-3", "5e4", "nan", "/", "../../etc", "$(touch INJECTED)", "caf\u00e9", "a\x00b",
                "y" * 5000, "cuda:7", "auto", "L1", "nano", "add", "step12", "{run}", "-rf", " "]


def _paths(v, path=()):
    yield path
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _paths(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _paths(x, path + (i,))


def _junk(rng, depth=0):
    r = rng.random()
    if r < 0.3:
        return rng.choice(FUZZ_NUMBERS)
    if r < 0.55:
        return rng.choice(FUZZ_STRINGS)
    if r < 0.6:
        return None
    if r < 0.65:
        return _nested(rng.choice([3, 30]))
    if depth > 2 or r < 0.8:
        return [rng.choice(FUZZ_NUMBERS + FUZZ_STRINGS) for _ in range(rng.randrange(4))]
    return {rng.choice(["a", "steps", "grid", "L1", "digits", "lr"]): _junk(rng, depth + 1) for _ in range(2)}


def _mutate(rng, cfg):
    path = rng.choice([p for p in _paths(cfg) if p])
    parent = cfg
    for k in path[:-1]:
        parent = parent[k]
    old, key, op = parent[path[-1]], path[-1], rng.randrange(7)
    if op == 0:                                  # delete the field / list entry
        del parent[key]
    elif op == 1:                                # type swap / junk
        parent[key] = _junk(rng)
    elif op == 2:                                # huge, negative, NaN, inf numbers
        parent[key] = rng.choice(FUZZ_NUMBERS)
    elif op == 3:                                # random strings
        parent[key] = rng.choice(FUZZ_STRINGS)
    elif op == 4:                                # duplicate a list (or wrap the value in one)
        parent[key] = (old if isinstance(old, list) else [old]) * rng.choice([2, 50, 1000, 30000])
    elif op == 5 and isinstance(old, dict):      # an unknown or misspelt key
        old[rng.choice(["x", "stpes", "L4", "copy", "__use_yte__"])] = _junk(rng)
    else:                                        # the value of a neighbouring field
        parent[key] = copy.deepcopy(rng.choice(list(parent.values()) if isinstance(parent, dict) else parent))


@pytest.mark.slow
def test_fuzzed_configs_are_accepted_or_rejected_cleanly():
    resolve(copy.deepcopy(FUZZ_BASE), workdir=REPO)
    rng = random.Random(20240611)
    accepted = 0
    for i in range(300):
        cfg = copy.deepcopy(FUZZ_BASE)
        for _ in range(rng.choice([1, 1, 2, 3])):
            try:
                _mutate(rng, cfg)
            except (IndexError, KeyError, TypeError):
                pass
        t = time.perf_counter()
        try:
            resolve(cfg, workdir=REPO)
            accepted += 1
        except ConfigError:
            pass
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"case {i}: {type(e).__name__}: {e}\nconfig: {str(cfg)[:2000]}")
        dt = time.perf_counter() - t
        # a blow-up guard like the others (an expanding list or an unbounded walk takes
        # minutes), not a speed test: 1 s a case once failed on a loaded 2-core CI machine
        assert dt < BLOWUP_S, f"case {i} took {dt:.2f} s"
    assert 10 < accepted < 290  # the mutations neither all pass nor all fail
    assert not Path("INJECTED").exists()


def test_largest_allowed_settings_validate_fast():
    """Every size at the bounds (10^7 steps, 2 x 10^5 checkpoints): validated in well under a
    second, the schedule computed without large allocations."""
    big = {"grid": [{"tasks": ["copy", "par", "mod"], "levels": ["L1", "L2", "L3"],
                     "sizes": ["nano", "micro", "small", "medium", "large", "xlarge"]}],
           "train": {"steps": 10_000_000, "warmup": 9_999_999, "batch_size": 8192,
                     "checkpoints": {"n_log": 100_000, "log_end": 1.0, "n_uniform": 100_000}},
           "model": {"block_size": 8192}, "data": {"n_heldout": 100_000}, "eval": {"n_samples": 200},
           "probes": {"n_samples": 200}}
    t = time.perf_counter()
    assert len(run_names(resolve(big))) == 54
    assert time.perf_counter() - t < BLOWUP_S


def test_seeds_are_a_grid_dimension_with_their_own_runs():
    from geoanatomy.config import job_spec, run_names, run_spec
    from geoanatomy.stages.common import build
    cfg = resolve({"grid": [{"tasks": ["add"], "levels": ["L1"], "sizes": ["nano"], "seeds": [0, 1]},
                            {"tasks": ["add"], "levels": ["L1"], "sizes": ["nano"], "control": "shuffled"}]})
    assert run_names(cfg) == ["add_L1_nano", "add_L1_nano_s1", "add_L1_nano_shuffled"]
    s0, s1 = run_spec(cfg, "add_L1_nano"), run_spec(cfg, "add_L1_nano_s1")
    assert (s0.seed, s1.seed) == (0, 1) and s0.train_hash() != s1.train_hash()
    assert job_spec(cfg, "add_L1_nano_s1", "train").run.seed == 1
    (m0, d0), (m1, d1) = build(s0), build(s1)
    # the seed changes the initialisation, the training stream and the held-out split
    assert not all((a == b).all() for a, b in zip(m0.state_dict().values(), m1.state_dict().values()))
    assert not (d0.train_batch(0, 16) == d1.train_batch(0, 16)).all()
    assert not (d0.is_heldout(d0.heldout_inputs) == d1.is_heldout(d0.heldout_inputs)).all()
    ctrl = run_spec(cfg, "add_L1_nano_shuffled")
    assert ctrl.control == "shuffled" and ctrl.train_hash() != s0.train_hash()
    with pytest.raises(ConfigError, match="not in the config grid"):
        run_spec(cfg, "add_L1_nano_s2")


def test_rankme_n_is_a_setting_per_size():
    """eval.n_samples_by_size replaces eval.n_samples for the sizes it names, in the run's
    spec (what the metrics stage reads) and nowhere else; a value above the held-out pool is
    refused naming the size."""
    grid = [{"tasks": ["copy"], "levels": ["L1"], "sizes": ["nano", "micro"]}]
    cfg = resolve({"grid": grid, "eval": {"n_samples": 200, "n_samples_by_size": {"micro": 768}}})
    assert run_spec(cfg, "copy_L1_micro").eval == {"n_samples": 768, "rankme_eps": 1e-7}
    assert run_spec(cfg, "copy_L1_nano").eval == {"n_samples": 200, "rankme_eps": 1e-7}
    with pytest.raises(ConfigError, match=r"eval\.n_samples_by_size\.micro.*exceeds the held-out pool"):
        resolve({"grid": grid, "eval": {"n_samples_by_size": {"micro": 5000}}})
    with pytest.raises(ConfigError, match=r"eval\.n_samples_by_size"):
        resolve({"grid": grid, "eval": {"n_samples_by_size": {"huge": 500}}})


@pytest.mark.parametrize("text,field,reading", [
    ("seed: 1:20\n", "seed", "sexagesimal (base 60), 80"),
    ("train:\n  steps: 0x100\n", "train.steps", "hexadecimal, 256"),
    ("train:\n  steps: 010\n", "train.steps", "octal, 8"),
    ("train:\n  steps: 0b101\n", "train.steps", "binary, 5"),
    ("train:\n  steps: 1_000\n", "train.steps", "a number with underscores, 1000"),
    ("summary:\n  allow_mixed_settings: yes\n", "summary.allow_mixed_settings", "a YAML 1.1 boolean, True"),
    ("grid:\n  - tasks: [copy, on]\n", "grid.0.tasks.1", "a YAML 1.1 boolean, True"),
])
def test_yaml_11_coercions_are_refused_by_name(tmp_path, text, field, reading):
    """PyYAML reads these plain scalars by YAML 1.1 (seed 1:20 as 80, steps 0x100 as 256, 'on' as
    True); a researcher who typed them meant something else: the config is refused, naming the
    field, its line and the reading; quoted, the text is kept."""
    from geoanatomy.config.reading import read_config_file
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=rf"field '{re.escape(field)}' at line \d+ is .*YAML 1\.1 reads as "
                                          rf"{re.escape(reading)}"):
        read_config_file(f)
    f.write_text("seed: '1:20'\ntrain:\n  steps: 256\n  lr: 6.0e-4\nflag: true\nzero: 0\n")
    assert read_config_file(f) == {"seed": "1:20", "train": {"steps": 256, "lr": 6.0e-4}, "flag": True, "zero": 0}


def test_a_plan_whose_checkpoints_cannot_fit_the_disk_is_refused_with_both_figures(tmp_path):
    """steps 1e7 with 200k checkpoints at xlarge validated and planned tens of TB without a word:
    before a local run starts the cost model's planned checkpoint disk is compared with the
    free space under results_dir (refused with both figures; over 80% warns; check_disk: false
    only warns)."""
    from geoanatomy.cost import check_disk, peak_disk_mb
    cfg = resolve({**BASE, "results_dir": str(tmp_path / "results")})
    need = peak_disk_mb(cfg) * 1e6
    assert check_disk(cfg, free_bytes=int(10 * need)) is None
    assert "more than 80% of it" in check_disk(cfg, free_bytes=int(1.1 * need))
    with pytest.raises(ConfigError, match=r"checkpoints need .* GB more .* GB are free under .*: the plan cannot fit"
                                          r".*check_disk: false runs it anyway"):
        check_disk(cfg, free_bytes=int(0.5 * need))
    assert check_disk({**cfg, "check_disk": False}, free_bytes=int(0.5 * need)).startswith("WARNING")
    # checkpoints already written count as done: a resumed grid is not refused for them
    ck = tmp_path / "results" / "add_L1_nano" / "checkpoints"
    ck.mkdir(parents=True)
    (ck / "step_000000.safetensors").write_bytes(b"\0" * int(0.8 * need))
    assert check_disk(cfg, free_bytes=int(0.5 * need)) is None
    assert "already written" in check_disk(cfg, free_bytes=int(0.22 * need))


def test_confirmation_grid_is_the_study_on_fresh_seeds_with_frozen_rules():
    """config/study_confirm.yaml: the study's cells, controls, settings and classes file on seeds
    2 and 3 (disjoint from the study's 0, 1 and the calibration's 100), summarised with the rules
    frozen in config/study_frozen.json."""
    from geoanatomy.spec import parse_run_name
    study = load_config(REPO / "config" / "study.yaml", workdir=REPO)
    conf = load_config(REPO / "config" / "study_confirm.yaml", workdir=REPO)
    key = lambda r: (r["task"], r["level"], r["size"], r["control"])     # noqa: E731
    s_runs = [parse_run_name(r) for r in run_names(study)]
    c_runs = [parse_run_name(r) for r in run_names(conf)]
    assert sorted({key(r) for r in s_runs}) == sorted({key(r) for r in c_runs})
    assert {r["seed"] for r in c_runs if not r["control"]} == {2, 3}
    assert {r["seed"] for r in c_runs} & ({r["seed"] for r in s_runs} | {100}) == set()
    for block in ("train", "data", "eval", "events", "measures", "probes", "model", "tasks"):
        assert conf[block] == study[block], block
    assert {k: v for k, v in conf["summary"].items() if k != "frozen_rules"} == \
        {k: v for k, v in study["summary"].items() if k != "frozen_rules"}
    assert conf["summary"]["frozen_rules"] == "config/study_frozen.json"


def test_a_plan_beyond_the_bound_is_refused_before_any_run_is_listed():
    """864,000 runs once validated in 3 s and then grew the DAG to 2.35 GB: the product is
    refused by name, per block, in well under a second."""
    from geoanatomy.config.checks import MAX_RUNS
    from geoanatomy.tasks import TASKS
    sizes = ["nano", "micro", "small", "medium", "large", "xlarge"]
    big = {"grid": [{"tasks": TASKS[:8], "levels": ["L1", "L2", "L3"], "sizes": sizes,
                     "seeds": list(range(100 * k, 100 * k + 100))} for k in range(3)]}
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"'grid': 43,200 runs planned, more than 20,000.*grid.0: 8 tasks x 3 "
                                          r"levels x 6 sizes x 100 seeds = 14,400; grid.1: "):
        resolve(big, workdir=REPO)
    assert time.perf_counter() - t0 < 30 and MAX_RUNS == 20_000
    ok = {"grid": [{"tasks": ["add"], "levels": ["L1"], "sizes": ["nano"], "seeds": list(range(100))}]}
    assert len(run_names(resolve(ok, workdir=REPO))) == 100


@pytest.mark.parametrize("inside", ["src/out", "docs", ".git/results", "workflow/x"])
def test_results_inside_the_repositorys_own_folders_is_refused(inside):
    with pytest.raises(ConfigError, match=rf"'results_dir': '{re.escape(inside)}' lies inside the repository's own"):
        resolve({**BASE, "results_dir": inside}, workdir=REPO)


def test_snakemake_command_line_values_nested_in_a_mapping_are_read_as_numbers():
    """Snakemake leaves --config 'train={steps: 100}' as {'train': {'steps': '100'}}; the loader
    reads plain numbers and true/false nested in a mapping as such, and leaves other text
    (and top-level values, which Snakemake parses itself) as given."""
    from snakemake.cli import parse_config

    from geoanatomy.config.load import command_line_overrides
    got = command_line_overrides(parse_config(["train={steps: 100, lr: 1e-3, grad_clip: .5}",
                                               "eval={n_samples: 64}", "results_dir=007", "seed=3"]))
    assert got["train"] == {"steps": 100, "lr": 1e-3, "grad_clip": 0.5} and got["eval"] == {"n_samples": 64}
    assert got["seed"] == 3 and got["results_dir"] in (7, "007")      # top level: Snakemake's own reading
    assert command_line_overrides({"train": {"steps": "1e3x", "checkpoint_dtype": "float16"}})["train"] == {
        "steps": "1e3x", "checkpoint_dtype": "float16"}
    assert command_line_overrides({"numerics": {"tf32": "true"}}) == {"numerics": {"tf32": True}}


def test_a_results_dir_whose_run_files_would_pass_the_path_limit_is_refused():
    """The schema caps results_dir at 1,024 characters, so only a deep working directory reaches
    the 4,096-byte limit: checked with the run files' depth added, before any folder is made."""
    from geoanatomy.config.checks import PATH_MAX, RUN_FILE_DEPTH, check_results_dir
    deep = "/" + "/".join(["w" * 200] * 19)
    with pytest.raises(ConfigError, match="4096-byte path limit"):
        check_results_dir({"results_dir": "results/" + "z" * 200}, deep)
    ok = "/" + "/".join(["w" * 200] * 10)
    assert len(ok) + len("/results") + RUN_FILE_DEPTH < PATH_MAX
    check_results_dir({"results_dir": "results"}, ok)
