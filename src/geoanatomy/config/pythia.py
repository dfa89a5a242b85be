"""The ``pythia:`` config block: defaults, checks that a schema cannot express, job specs.

No torch import here: the Snakefile imports this module at parse time.

Block (defaults in ``geoanatomy.defaults.DEFAULTS["pythia"]``; ``check_pythia`` runs
whenever a config is validated: ``geoanatomy.config.checks.BLOCK_CHECKS`` names it; the
Pythia branch, geoanatomy.pythia, reads its settings from here)::

    pythia:
      enabled: false          # no network here: off unless a config turns it on
      models: [EleutherAI/pythia-160m, /data/pythia-410m,
               {source: EleutherAI/pythia-2.8b, name: 2.8b, revisions: {preset: window}}]
      revisions: all          # all | {stride: 10, keep_early: true} | {preset: all|window|spread72}
                              # | [step0, step1000, 143000]; dict forms take exclude: [step0, ...]
      benchmarks: [syntax, semantics, arithmetic, icl, factual, reasoning, general,
                   deduction3, deduction5, deduction7]
      n_items: {}             # per-benchmark cap (fixed sets) / count (deduction, default 50)
      deduction_seed: 0
      scoring: sum            # accuracy definition: sum | mean of option-token log-probs
      layer: final_ln_post    # headline layer for the events
      delete_cache: true      # remove each hub revision this job downloaded once it is measured
      cache_dir: null         # HF cache (null: HF_HUB_CACHE / ~/.cache/huggingface/hub)
      dtype: float32          # weights load in float32 | bfloat16 | float16; the forward pass
                              # runs in float32 and the unembedding in float64 whatever this is
      batch_size: 16          # sequences per forward pass
      device: auto
      threads: 1

A model is a hub id ``org/name`` (loaded at ``revision="stepN"``) or a local directory
holding one sub-folder per step (``dir/step1000/config.json`` + weights; optionally
``dir/main/``, fingerprinted to resolve duplicates). Its run name is ``pythia_<name>``,
``<name>`` = the last path component, lower-cased, without a leading ``pythia-``
(``EleutherAI/pythia-160m`` -> ``pythia_160m``), unless given. ``{source, revisions}``
overrides ``pythia.revisions`` for that model (revisions.py documents every form).
"""
from __future__ import annotations

import re
from pathlib import Path

from .pythia_revisions import parse_revision, revision_name, select_steps
from ..sizes import LEGACY_LAYERS, canonical_layer

# Fixed diagnostic sets (data/<name>.jsonl) and generated logical-deduction sets.
FIXED_BENCHMARKS = ["syntax", "semantics", "arithmetic", "icl", "factual", "reasoning", "general"]
DEDUCTION_BENCHMARKS = {"deduction3": 3, "deduction5": 5, "deduction7": 7}
BENCHMARKS = FIXED_BENCHMARKS + list(DEDUCTION_BENCHMARKS)  # = geoanatomy.defaults.PYTHIA_BENCHMARKS
DEDUCTION_DEFAULT_ITEMS = 50
# Bump when the extraction code changes what it measures: it is part of the job's params,
# so Snakemake reruns the extraction (edits under src/ alone do not trigger reruns).
# 3: rows from scan.measure_model (adds mean_share); 2: float64 unembedding, latest-holder duplicates
EXTRACT_VERSION = 4  # 4: the pipeline's layer names (embed, block{i}, ln_final)
EVENTS_VERSION = 4  # 2: the matched detector family; 3: chance/cap-normalised fields for scale;
# 4: precursor.json schema 3 (the shared record builder's global_floor and window fields)
# Pythia's difficulty: easy if acquired within this share of the last selected step (compare
# sizes with the same last step: a model's own ``revisions`` may differ, and duplicates removed
# at extraction leave some sizes without early revisions, e.g. pythia-2.8b before step66000).
EASY_MAX_FRAC = 0.1

HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
STEP_DIR = re.compile(r"^step(0|[1-9][0-9]*)$")


def _err(field: str, msg: str):
    from ..errors import ConfigError
    return ConfigError(f"config field '{field}': {msg}")


def derive_name(source: str) -> str:
    """'EleutherAI/pythia-160m' -> '160m'; '/data/Pythia-2.8B/' -> '2.8b'."""
    base = str(source).rstrip("/").split("/")[-1].lower()
    base = re.sub(r"^pythia-", "", base)
    return re.sub(r"[^a-z0-9.-]+", "-", base).strip("-.")


def source_kind(source: str) -> str:
    """'local' for an existing directory or a path-looking string, 'hub' for org/name."""
    p = Path(source).expanduser()
    if p.is_dir() or source.startswith(("/", ".", "~")):
        return "local"
    if HUB_ID.match(source):
        return "hub"
    return "invalid"


def local_steps(root: str | Path) -> list[int]:
    """Steps N with a ``root/stepN/config.json``, sorted."""
    root = Path(root).expanduser()
    out = []
    for d in root.iterdir():
        if d.is_dir() and STEP_DIR.match(d.name) and (d / "config.json").is_file():
            out.append(int(d.name[4:]))
    return sorted(out)


def models(cfg: dict) -> list[dict]:
    """[{name, run, source, kind, field}] for every configured model (checked)."""
    out, seen = [], {}
    for i, m in enumerate(cfg["pythia"]["models"]):
        field = f"pythia.models[{i}]"
        revs = None
        if isinstance(m, dict):
            source, name = str(m["source"]), m.get("name") or derive_name(m["source"])
            revs = m.get("revisions")
        else:
            source, name = str(m), derive_name(m)
        if not NAME.match(name):
            raise _err(field, f"model name {name!r} (from {source!r}) must match {NAME.pattern}; "
                              f"give {{source: {source!r}, name: ...}}")
        if name in seen:
            raise _err(field, f"model name {name!r} repeats {seen[name]}; give distinct names "
                              f"with {{source: ..., name: ...}}")
        seen[name] = field
        kind = source_kind(source)
        if kind == "invalid":
            raise _err(field, f"{source!r} is neither an existing directory nor a hub id 'org/name'")
        out.append({"name": name, "run": f"pythia_{name}", "source": source, "kind": kind, "field": field,
                    "revisions": revs})
    return out


def model_steps(cfg: dict, m: dict) -> list[int]:
    """The selected steps of one model (checked: missing directories/revisions name the field)."""
    own = m.get("revisions") is not None
    sel = m["revisions"] if own else cfg["pythia"]["revisions"]
    sel_field = f"{m['field']}.revisions" if own else "pythia.revisions"
    available = None
    if m["kind"] == "local":
        root = Path(m["source"]).expanduser()
        if not root.is_dir():
            raise _err(m["field"], f"directory {m['source']!r} does not exist")
        available = local_steps(root)
        if not available:
            raise _err(m["field"], f"directory {m['source']!r} has no stepN/ sub-folder with a config.json "
                                   f"(expected e.g. {m['source']}/step1000/config.json)")
    try:
        steps = select_steps(sel, available)
    except ValueError as e:
        where = f" for {m['field']} ({m['source']})"
        raise _err(sel_field, f"{e}{where}") from None
    return steps


def n_items(cfg: dict, bench: str) -> int | None:
    """Item cap of a fixed set (None = all) / number of generated deduction puzzles."""
    n = (cfg["pythia"].get("n_items") or {}).get(bench)
    if bench in DEDUCTION_BENCHMARKS and n is None:
        return DEDUCTION_DEFAULT_ITEMS
    return None if n is None else int(n)


def check_pythia(cfg: dict) -> None:
    """Semantic checks of the ``pythia`` block (only when enabled)."""
    p = cfg["pythia"]
    if not p["enabled"]:
        return
    if not p["models"]:
        raise _err("pythia.models", "empty while pythia.enabled is true; give hub ids or local directories")
    if not p["benchmarks"]:
        raise _err("pythia.benchmarks", "empty while pythia.enabled is true")
    _check_selection(p["revisions"], "pythia.revisions")
    persist = cfg["events"]["persist"]
    for m in models(cfg):
        field = "pythia.revisions"
        if m["revisions"] is not None:
            field = f"{m['field']}.revisions"
            _check_selection(m["revisions"], field)
        n = len(model_steps(cfg, m))
        if n < persist + 2:
            raise _err(field, f"only {n} revisions selected for {m['field']} ({m['source']}); "
                              f"event detection needs at least events.persist + 2 = {persist + 2}")
    layer = p["layer"]
    if not re.match(r"^(embed|block(0|[1-9][0-9]*)|ln_final|layer[1-9][0-9]*|final_ln_post)$", layer):
        raise _err("pythia.layer", f"{layer!r} is not embed, block{{i}} (i >= 0) or ln_final (the earlier names "
                                   f"{LEGACY_LAYERS} are read too)")


def _check_selection(sel, field: str) -> None:
    """Revision names in a list or an ``exclude`` list parse (errors name the entry)."""
    entries = sel if isinstance(sel, list) else (sel.get("exclude") or []) if isinstance(sel, dict) else []
    sub = "" if isinstance(sel, list) else ".exclude"
    for j, r in enumerate(entries):
        try:
            parse_revision(r)
        except ValueError as e:
            raise _err(f"{field}{sub}[{j}]", str(e)) from None


def enabled_models(cfg: dict) -> list[dict]:
    return models(cfg) if cfg["pythia"]["enabled"] else []


def extract_spec(cfg: dict, name: str) -> dict:
    """Everything that determines one model's extraction (the rule's params)."""
    p = cfg["pythia"]
    by_name = {m["name"]: m for m in models(cfg)}
    if name not in by_name:
        from ..errors import ConfigError
        raise ConfigError(f"pythia model {name!r} is not configured; models: {sorted(by_name)}")
    m = by_name[name]
    return {
        "version": EXTRACT_VERSION,
        "name": name, "run": m["run"], "source": m["source"], "kind": m["kind"],
        "revisions": [revision_name(s) for s in model_steps(cfg, m)],
        "benchmarks": list(p["benchmarks"]),
        "n_items": {b: n_items(cfg, b) for b in p["benchmarks"]},
        "deduction_seed": int(p["deduction_seed"]),
        "scoring": p["scoring"], "rankme_eps": float(cfg["eval"]["rankme_eps"]),
        "dtype": p["dtype"], "batch_size": int(p["batch_size"]), "device": p["device"],
        "delete_cache": bool(p["delete_cache"]), "cache_dir": p["cache_dir"],
        "results_dir": cfg["results_dir"],
    }


def events_settings(cfg: dict) -> dict:
    """The global ``events`` thresholds with the Pythia headline layer and position."""
    e = dict(cfg["events"])
    e.update(layer=canonical_layer(cfg["pythia"]["layer"]), position="last_prompt", version=EVENTS_VERSION,
             scoring=cfg["pythia"]["scoring"], easy_max_frac=EASY_MAX_FRAC)
    return e


def events_spec(cfg: dict, name: str) -> dict:
    """Params of one model's events job (benchmarks + event thresholds)."""
    ex = extract_spec(cfg, name)
    return {"name": name, "run": ex["run"], "results_dir": cfg["results_dir"],
            "benchmarks": ex["benchmarks"], "events": events_settings(cfg)}


def scale_spec(cfg: dict) -> dict:
    """Params of the cross-size summary job."""
    return {"results_dir": cfg["results_dir"], "names": [m["name"] for m in enabled_models(cfg)],
            "benchmarks": list(cfg["pythia"]["benchmarks"])}
