"""Configuration: reading config files, defaults, schema validation, semantic checks,
per-run specs.

No torch import here: the Snakefile imports this module at parse time (only an explicit
``device: cuda[:N]`` makes ``check_devices`` import torch, to say whether that GPU exists).

``load_config`` is the one loader: ``geoanatomy validate`` and the Snakefile both call it,
so a config gets the same answer from both. It reads each file with ``read_config_file``
(UTF-8 only, at most ``MAX_CONFIG_BYTES``, duplicate keys rejected with their line, JSON
for ``.json`` files and YAML otherwise, an empty file rejected), merges the overrides,
and ``resolve``s the result. A config is validated in four passes, all before any job runs:

1. a bounded walk over the user's values (``check_values``): only mappings with string
   keys, lists, strings, numbers, booleans and null; every number finite; at most
   ``MAX_CONFIG_VALUES`` values (YAML aliases count each time they are used), nesting at
   most ``MAX_DEPTH`` deep, strings at most ``MAX_STRING_LEN`` characters without control
   characters; the message names the dotted field path;
2. JSON schema (``workflow/schemas/config.schema.yaml``; unknown keys and wrong types are
   rejected, every integer has a ``maximum``, the message names the field path and the
   bound); integers written as floats (``steps: 60.0``) are then converted to int;
3. the grid's lists and repeated blocks are de-duplicated (so run enumeration is bounded);
4. semantic checks a schema cannot express (``check_results_dir``, ``check_semantics``):
   results_dir is a quoting-free sub-folder of the working directory, levels graded
   L1 < L2 < L3 by their own parameter, inputs fit the held-out split's 62-bit key and
   the context, the held-out set leaves at least half of every input space for training,
   evaluation samples fit in the held-out set, warmup and checkpoint schedule fit the
   steps, the events layer exists for every size.
"""
from __future__ import annotations

import copy
import json
import math
import os
import posixpath
import re
from pathlib import Path

import yaml

from .errors import ConfigError
from .pythia.settings import BENCHMARKS as PYTHIA_BENCHMARKS
from .sizes import SIZES, layer_names
from .spec import (JobSpec, RunSpec, combination_name, mixture_run_name, parse_mixture_name, parse_run_name,
                   run_name)

SCHEMA_PATH = Path(__file__).with_name("config.schema.yaml")

# Bounds on what a config may be (the per-field size bounds are the schema's `maximum`s).
MAX_CONFIG_BYTES = 1 << 20        # a config file (the shipped ones are ~5 KB)
MAX_CONFIG_VALUES = 20_000        # values in a config, YAML aliases expanded
MAX_DEPTH = 24                    # nesting of mappings and lists
MAX_STRING_LEN = 4096             # characters in one string
KEY_BITS = 62                     # TaskSpec.keys packs a task's inputs into one int64
HELDOUT_MAX_SHARE = (1, 2)        # the held-out set may take at most half of an input space
MIN_HELDOUT_INPUTS = 20           # ... and must hold at least this many inputs (expected) to draw from
RESULTS_DIR_OK = re.compile(r"[A-Za-z0-9._/-]*")

DEFAULTS: dict = {
    "seed": 0,
    "device": "auto",
    "results_dir": "results",
    "allow_results_outside_workdir": False,
    "keep_checkpoints": "all",
    "max_unpruned_runs": None,
    "tasks": {},
    "model": {"block_size": 64},
    "train": {
        "steps": 2000, "batch_size": 64, "lr": 1e-3, "warmup": 100, "min_lr_frac": 0.1,
        "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.98, "grad_clip": 1.0, "checkpoint_dtype": "float32",
        "checkpoints": {"n_log": 30, "log_end": 0.1, "n_uniform": 50},
    },
    "size_overrides": {},
    "data": {"n_heldout": 1024, "heldout_frac": 0.25, "heldout_symmetric": True},
    "eval": {"n_samples": 200, "rankme_eps": 1e-7},
    "events": {
        "layer": "ln_final", "position": "first", "variant": "uncentred",
        "acquisition_threshold": 0.5, "persist": 3, "detector": "matched",
        "onset_frac": 0.1, "extreme_tol": 0.05, "return_frac": 0.25,
        "collapse_drop": 0.3, "collapse_half": 0.5, "recovery_rise": 0.25,
        "transition": "floor", "precursor_min_gap_frac": 0.25,
        "logprob_margin": 0.1, "plateau_rule": "matched", "easy_max_step": 150,
    },
    # Expensive measures on a checkpoint subset (geoanatomy.stages.measures documents every key).
    "measures": {
        "which": ["grad_rank", "hessian", "llc"],
        "sizes": ["nano", "micro", "small", "medium", "large", "xlarge"],
        "every_k": 25, "around_events": 0,
        "events": ["acquisition", "rankme_floor", "rankme_recovery"],
        "grad": {"n_samples": 64, "method": "vmap", "max_mbytes": 256, "rankme_eps": 1e-7},
        "hessian": {"batch_size": 32, "max_iter": 100, "tol": 1e-3},
        "llc": {"eps": 3e-5, "gamma": 1e4, "n_beta": 30.0, "chains": 2, "draws": 20, "burnin": 5,
                "batch_size": 32, "n_data": 512, "disagree_threshold": 0.5},
    },
    # Linear probes per layer and checkpoint (geoanatomy.stages.probes documents every key).
    "probes": {"sizes": ["nano", "micro", "small", "medium", "large", "xlarge"],
               "n_samples": 200, "test_frac": 0.5, "positions": "first", "every_k": 2,
               "C": 0.1, "max_iter": 100, "standardize": True},
    "threads": {"train": 1, "metrics": 1, "events": 1, "measures": 1, "probes": 1},
    # Cross-run analysis -> results/summary/ (geoanatomy.analysis documents every key).
    "summary": {"coincide_log10_tol": 0.1, "exact_max_n": 10, "n_resamples": 20000, "seed": 0,
                "alpha": 0.05, "topdown_require_collapse": True, "n_permutations": 10000,
                "n_bootstrap": 2000, "verdict_min_units": 5},
    # Pythia validation branch (geoanatomy.pythia.settings documents every key).
    "pythia": {
        "enabled": False, "models": [], "revisions": "all", "benchmarks": list(PYTHIA_BENCHMARKS),
        "n_items": {}, "deduction_seed": 0, "scoring": "sum", "layer": "final_ln_post",
        "delete_cache": True, "cache_dir": None, "dtype": "float32", "batch_size": 16,
        "device": "auto", "threads": 1,
    },
}


def deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_schema() -> dict:
    """The JSON schema of a config, with the allowed task, level, size and Pythia benchmark
    names filled in from the library (their one home)."""
    from .tasks import LEVELS, TASKS
    # libyaml's loader when present: the pure-Python one took ~0.1 s of every Snakefile parse
    schema = yaml.load(SCHEMA_PATH.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    for name, values in (("task", TASKS), ("level", LEVELS), ("size", list(SIZES)),
                         ("pythia_benchmark", PYTHIA_BENCHMARKS)):
        schema["$defs"][name]["enum"] = list(values)
    return schema


def _field(path) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def _short(text: str, n: int = 300) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _number_hint(value, types) -> str:
    """' ; write 1.0e-3 (...)' when a string is a number YAML 1.1 did not read as one."""
    types = {types} if isinstance(types, str) else set(types or ())
    if not isinstance(value, str) or not types & {"number", "integer"} or len(value) > 40:
        return ""
    try:
        x = float(value.strip())
    except ValueError:
        return ""
    if not math.isfinite(x):
        return ""
    try:
        plain = yaml.safe_load(value.strip())
    except yaml.YAMLError:
        plain = None
    if isinstance(plain, (int, float)) and not isinstance(plain, bool):
        return f"; write {value.strip()} without quotes"
    m = re.fullmatch(r"\s*([+-]?)(\d+)(?:\.(\d*))?[eE]([+-]?\d+)\s*", value)
    if "number" not in types and x.is_integer() and abs(x) < 2 ** 53:
        fix = str(int(x))
    elif m:
        fix = f"{m.group(1)}{m.group(2)}.{m.group(3) or '0'}e{m.group(4)}"
    else:
        fix = repr(x)
    return f"; write {fix} (YAML reads {value.strip()} as a string)"


def validate_schema(cfg: dict, schema: dict | None = None) -> None:
    """Raise ConfigError naming the first offending field (JSON schema pass)."""
    import jsonschema
    v = jsonschema.Draft202012Validator(schema or load_schema())
    # shallowest field first; of two maxima on one field (a shared cap and its own), the tighter
    errors = sorted(v.iter_errors(cfg), key=lambda e: (len(e.absolute_path), str(e.absolute_path),
                                                       e.validator_value if e.validator == "maximum" else 0))
    if not errors:
        return
    e = errors[0]
    where = _field(e.absolute_path)
    msg = e.message
    got = True
    if e.validator == "enum":
        msg, got = f"{_short(repr(e.instance), 80)} is not allowed; allowed values: {e.validator_value}", False
    elif e.validator == "additionalProperties":
        allowed = sorted((e.schema.get("properties") or {}).keys())
        msg, got = f"{_short(e.message, 200)}; allowed keys: {allowed}", False
    elif e.validator == "propertyNames":
        msg = f"{_short(repr(e.instance), 80)} is not allowed; allowed values: {e.validator_value.get('enum', e.validator_value)}"
        if "$ref" in e.validator_value:
            ref = e.validator_value["$ref"].split("/")[-1]
            msg = f"{_short(repr(e.instance), 80)} is not allowed; allowed values: {load_schema()['$defs'][ref]['enum']}"
        got = False
    elif e.validator == "maxItems":
        msg, got = f"{len(e.instance)} entries; at most {e.validator_value} allowed", False
    elif e.validator == "maxLength":
        msg, got = f"{len(e.instance)} characters; at most {e.validator_value} allowed", False
    elif e.validator == "type":
        msg += _number_hint(e.instance, e.validator_value)
    elif e.validator in ("oneOf", "anyOf"):
        types = [_deref(b, v.schema).get("type") for b in e.validator_value]
        flat = [t for ts in types for t in ([ts] if isinstance(ts, str) else ts or [])]
        msg += _number_hint(e.instance, flat)
        if isinstance(e.instance, float) and "integer" in flat and "number" not in flat:
            msg += "; give a whole number"

    msg = _short(msg, 400)
    raise ConfigError(f"config field '{where}': {msg}" + (f" (got {_short(repr(e.instance), 120)})" if got else ""))


# ------------------------------------------------------------- reading files
class _DuplicateKey(Exception):
    def __init__(self, key, line=None, first=None):
        super().__init__(key)
        self.key, self.line, self.first = key, line, first


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _check_duplicate_keys(root) -> None:
    """Raise _DuplicateKey for the first mapping that repeats a key (YAML node graph;
    every node visited once, so aliases cost nothing)."""
    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: dict = {}
            for k, val in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != _MERGE_TAG:
                    ident = (k.tag, k.value)
                    if ident in keys:
                        raise _DuplicateKey(k.value, k.start_mark.line + 1, keys[ident])
                    keys[ident] = k.start_mark.line + 1
                stack += [val, k]
        elif isinstance(node, yaml.SequenceNode):
            stack += reversed(node.value)


class ConfigLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """yaml's safe loader (libyaml when present) that rejects repeated mapping keys."""

    def get_single_data(self):
        node = self.get_single_node()
        if node is None:
            return None
        _check_duplicate_keys(node)
        return self.construct_document(node)


def _json_pairs(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def read_config_file(path: str | Path) -> dict:
    """The user settings in one config file (YAML, or JSON when it ends in ``.json``),
    not yet validated. ConfigError names the file for anything that is not a readable,
    UTF-8, non-empty mapping without repeated keys."""
    p = Path(path)
    try:
        if not p.is_file():
            what = "does not exist" if not p.exists() else "is not a regular file"
            raise ConfigError(f"config file {p}: cannot be read ({what})")
        with open(p, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"config file {p}: cannot be read ({e.strerror or e})") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {p}: larger than {MAX_CONFIG_BYTES} bytes (the limit for a config)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ConfigError(f"config file {p}: not UTF-8: byte 0x{data[e.start]:02x} at byte offset {e.start} "
                          f"(line {line}); save the file as UTF-8") from None
    text = text.removeprefix("\ufeff")
    is_json = p.suffix.lower() == ".json"
    try:
        if is_json:
            user = json.loads(text, object_pairs_hook=_json_pairs) if text.strip() else None
        else:
            user = yaml.load(text, Loader=ConfigLoader)
    except _DuplicateKey as first:
        d = first
        if is_json:  # line numbers from the YAML composer (JSON is YAML); without them if it balks
            try:
                yaml.load(text, Loader=ConfigLoader)
            except _DuplicateKey as dy:
                d = dy
            except Exception:  # noqa: BLE001 - only for the line numbers
                pass
        where = f" at line {d.line} (first at line {d.first})" if d.line else ""
        raise ConfigError(f"config file {p}: duplicate key {_short(repr(d.key), 80)}{where}; "
                          f"each key may appear once per mapping") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"config file {p}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError) as e:
        kind = "JSON" if is_json else "YAML"
        detail = _short(re.sub(r"\s+", " ", str(e).replace('"<unicode string>"', str(p))), 300)
        raise ConfigError(f"config file {p}: not valid {kind} ({detail})") from None
    if user is None:
        raise ConfigError(f"config file {p} is empty (a config needs at least a 'grid')")
    if not isinstance(user, dict):
        raise ConfigError(f"config file {p}: top level must be a mapping, got {type(user).__name__}")
    return user


_CWD = object()


def load_config(path=None, overrides: dict | None = None, *, workdir=_CWD,
                check_device: bool = True) -> dict:
    """Read config file(s), merge ``overrides`` on top, validate, and return the config
    merged over DEFAULTS. The one loader of ``geoanatomy validate`` and the Snakefile.

    ``path``: a file, a list of files (merged in order, like Snakemake's --configfile), or
    None. ``workdir``: results_dir must lie inside it (default: the current directory;
    None skips that check). ``check_device``: say whether an explicit ``cuda[:N]`` device
    exists here (imports torch only then)."""
    if path is None:
        paths = []
    elif isinstance(path, (str, os.PathLike)):
        paths = [path]
    else:
        paths = list(path)
    user: dict = {}
    for p in paths:
        user = deep_merge(user, read_config_file(p))
    if overrides:
        user = deep_merge(user, dict(overrides))
    cfg = resolve(user, workdir=os.getcwd() if workdir is _CWD else workdir)
    if check_device:
        check_devices(cfg)
    return cfg


# ------------------------------------------------------------ value walk
_PLAIN = (str, int, float, bool, type(None))


def check_values(user) -> None:
    """Bounded walk over a user config before the schema: mappings with string keys,
    lists and plain values only; finite numbers; size, depth and string-length bounds.
    The message names the dotted field path."""
    if not isinstance(user, dict):
        raise ConfigError(f"config: top level must be a mapping, got {type(user).__name__}")
    count = 0
    stack = [((), user, 0)]
    while stack:
        path, v, depth = stack.pop()
        count += 1
        if count > MAX_CONFIG_VALUES:
            raise ConfigError(f"config field '{_field(path[:1])}': the config holds more than {MAX_CONFIG_VALUES} "
                              f"values (YAML aliases count each time they are used); at most {MAX_CONFIG_VALUES}")
        if depth > MAX_DEPTH:
            raise ConfigError(f"config field '{_field(path)}': nested more than {MAX_DEPTH} levels deep")
        if isinstance(v, dict):
            if count + len(v) > MAX_CONFIG_VALUES:
                raise ConfigError(f"config field '{_field(path)}': {len(v)} keys; the config holds more than "
                                  f"{MAX_CONFIG_VALUES} values; at most {MAX_CONFIG_VALUES}")
            for k in v:
                if not isinstance(k, str):
                    raise ConfigError(f"config field '{_field(path + (repr(k),))}': key {_short(repr(k), 60)} is of type "
                                      f"{type(k).__name__} (YAML reads unquoted numbers, yes/no, null as such); keys must be strings")
            stack.extend((path + (k,), x, depth + 1) for k, x in reversed(v.items()))
        elif isinstance(v, list):
            if count + len(v) > MAX_CONFIG_VALUES:
                raise ConfigError(f"config field '{_field(path)}': {len(v)} entries; the config holds more than "
                                  f"{MAX_CONFIG_VALUES} values (YAML aliases count each time they are used); "
                                  f"at most {MAX_CONFIG_VALUES}")
            stack.extend((path + (i,), x, depth + 1) for i, x in reversed(list(enumerate(v))))
        elif not isinstance(v, _PLAIN):
            raise ConfigError(f"config field '{_field(path)}': a {type(v).__name__} value "
                              f"({_short(repr(v), 60)}) is not allowed; use numbers, strings, "
                              f"true/false, null, lists and mappings")
        elif isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"config field '{_field(path)}': {v} is not a finite number "
                              f"(NaN and infinity are not allowed)")
        elif isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 63:
            raise ConfigError(f"config field '{_field(path)}': an integer of {v.bit_length()} bits is out of "
                              f"range (at most 2**63 - 1 in absolute value)")
        elif isinstance(v, str):
            if len(v) > MAX_STRING_LEN:
                raise ConfigError(f"config field '{_field(path)}': a string of {len(v)} characters; "
                                  f"at most {MAX_STRING_LEN}")
            bad = re.search(r"[\x00-\x1f\x7f]", v)
            if bad:
                raise ConfigError(f"config field '{_field(path)}': control character "
                                  f"U+{ord(bad.group()):04X} at position {bad.start()} is not allowed")
    if "__use_yte__" in user:
        raise ConfigError("config field '__use_yte__': YTE templates are not supported (Snakemake would run "
                          "their Python code while reading --configfile; run 'geoanatomy validate' on a "
                          "config you did not write before giving it to snakemake)")


def _deref(schema: dict, root: dict) -> dict:
    """A schema with its $ref (recursively) merged under its own keywords."""
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < 16:
        target = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        seen += 1
    return schema


def _types(schema: dict) -> set:
    t = schema.get("type", ())
    return {t} if isinstance(t, str) else set(t)


def _json_type(v) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    return {dict: "object", list: "array", str: "string", float: "number",
            type(None): "null"}.get(type(v), "?")


def _coerce_ints(schema: dict, v, root: dict):
    """A copy of schema-valid ``v`` with every float at an integer position made an int
    (JSON schema counts 60.0 as an integer; the code needs Python ints)."""
    schema = _deref(schema, root)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            kind = _json_type(v)
            branches = [_deref(b, root) for b in schema[key]]
            pick = [b for b in branches if kind in _types(b) or (kind == "integer" and "number" in _types(b))
                    or (kind == "number" and "integer" in _types(b) and isinstance(v, float) and v.is_integer())]
            if not pick:
                return v
            if kind == "number" and any("number" in _types(b) for b in pick):
                return v
            return _coerce_ints(pick[0], v, root)
    if isinstance(v, dict):
        props, pats, extra = schema.get("properties", {}), schema.get("patternProperties", {}), \
            schema.get("additionalProperties")
        out = {}
        for k, x in v.items():
            sub = props.get(k)
            if sub is None:
                sub = next((s for pat, s in pats.items() if re.search(pat, k)), None)
            if sub is None and isinstance(extra, dict):
                sub = extra
            out[k] = _coerce_ints(sub, x, root) if sub is not None else copy.deepcopy(x)
        return out
    if isinstance(v, list):
        items = schema.get("items")
        return [_coerce_ints(items, x, root) if isinstance(items, dict) else copy.deepcopy(x) for x in v]
    if isinstance(v, float) and v.is_integer() and "integer" in _types(schema) and "number" not in _types(schema):
        return int(v)
    return v


def _dedupe_grid(user: dict) -> dict:
    """Each grid block's lists without repeats, and repeated blocks dropped: the run
    product stays small whatever the file repeats."""
    if "grid" not in user:
        return user
    blocks, seen = [], set()
    for b in user["grid"]:
        nb = {**b, **{k: list(dict.fromkeys(b[k])) for k in ("tasks", "levels", "sizes", "seeds") if k in b}}
        key = (tuple(tuple(nb[k]) for k in ("tasks", "levels", "sizes")), tuple(nb.get("seeds", ())),
               nb.get("control", ""))
        if "protocol" in nb or any(k in nb for k in MIXTURE_KEYS):   # a mixture block is its own run
            key += (json.dumps({k: nb.get(k) for k in ("protocol",) + MIXTURE_KEYS}, sort_keys=True),)
        if key not in seen:
            seen.add(key)
            blocks.append(nb)
    return {**user, "grid": blocks}


def resolve(user: dict, *, workdir: str | Path | None = None) -> dict:
    """Validate a user config dict (value walk, schema, semantics) and merge it over
    DEFAULTS. ``workdir``: results_dir must lie inside it unless the config sets
    ``allow_results_outside_workdir: true`` (None: programmatic use, e.g. tests writing
    into a temporary folder, skips that one check; ``load_config`` passes the current
    directory)."""
    check_values(user)
    schema = load_schema()
    validate_schema(user, schema)
    user = _dedupe_grid(_coerce_ints(schema, user, schema))
    cfg = deep_merge(DEFAULTS, user)
    check_results_dir(cfg, workdir)
    check_semantics(cfg)
    return cfg


def check_results_dir(cfg: dict, workdir: str | Path | None = None) -> None:
    """results_dir: not empty, not the filesystem root, quoting-free characters only, not
    an existing file, and (when ``workdir`` is given) a sub-folder of ``workdir`` unless
    ``allow_results_outside_workdir`` is true. The containment test is lexical
    (``..`` resolved, symbolic links not followed): a link you put in the working
    directory is yours to make."""
    rd = cfg["results_dir"]
    f = "config field 'results_dir'"
    if rd.strip() == "":
        raise ConfigError(f"{f}: empty; give a folder such as 'results'")
    bad = re.search(r"[^A-Za-z0-9._/-]", rd)
    if bad:
        raise ConfigError(f"{f}: character {bad.group()!r} at position {bad.start()} of {rd!r} is not allowed; "
                          f"use only letters, digits and . _ / - (names that need no quoting in a shell)")
    if any(part.startswith("-") for part in rd.split("/")):
        raise ConfigError(f"{f}: {rd!r} has a path component starting with '-' (it would read as an option)")
    norm = posixpath.normpath(rd)
    if norm in ("/", "//"):
        raise ConfigError(f"{f}: {rd!r} is the filesystem root; give a sub-folder of the working directory")
    base = Path(os.getcwd() if workdir is None else workdir)
    target = Path(posixpath.normpath(posixpath.join(str(base), rd)))
    if workdir is not None and not cfg.get("allow_results_outside_workdir", False):
        if target == base:
            raise ConfigError(f"{f}: {rd!r} is the working directory itself; give a sub-folder such as 'results'")
        if base not in target.parents:
            raise ConfigError(f"{f}: {rd!r} resolves to {target}, outside the working directory {base}; "
                              f"give a relative path below it, or set allow_results_outside_workdir: true")
    for q in [target, *target.parents]:
        if q.exists():
            if not q.is_dir():
                what = repr(rd) if q == target else f"{str(q)!r} (part of {rd!r})"
                raise ConfigError(f"{f}: {what} exists and is not a directory")
            break


def check_devices(cfg: dict) -> None:
    """ConfigError when ``device`` (or an enabled ``pythia.device``) is an explicit
    ``cuda[:N]`` this machine does not have. cpu and auto never import torch."""
    fields = [("device", cfg["device"])]
    if cfg["pythia"]["enabled"]:
        fields.append(("pythia.device", cfg["pythia"]["device"]))
    for field, dev in fields:
        if not dev.startswith("cuda"):
            continue
        import torch
        idx = int(dev.split(":")[1]) if ":" in dev else 0
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if idx >= n:
            have = (f"torch {torch.__version__} sees no CUDA device" if n == 0 else
                    f"torch sees {n} CUDA device(s): " + ", ".join(f"cuda:{i}" for i in range(n)))
            raise ConfigError(f"config field '{field}': {dev!r} is not available on this machine ({have}); "
                              f"use auto, cpu or an existing device")


# ----------------------------------------------------------------- run specs
def level_params(cfg: dict, task: str, level: str) -> dict:
    from .tasks import DEFAULT_LEVELS
    return dict((cfg.get("tasks", {}).get(task, {}) or {}).get(level) or DEFAULT_LEVELS[task][level])


def train_settings(cfg: dict, size: str) -> dict:
    return deep_merge(cfg["train"], cfg.get("size_overrides", {}).get(size, {}) or {})


def runs(cfg: dict) -> list[tuple[str, str, str, str, int]]:
    """(task, level, size, control, seed) of every run, in grid order, without duplicates.
    A block's ``seeds`` default to [the top-level seed]; ``control`` to "" (the task itself)."""
    seen: dict[tuple, None] = {}
    for block in cfg["grid"]:
        if block.get("protocol", "single") == "mixture":   # mixtures(cfg) enumerates those
            continue
        sizes, levels = list(dict.fromkeys(block["sizes"])), list(dict.fromkeys(block["levels"]))
        seeds = [int(x) for x in dict.fromkeys(block.get("seeds") or [cfg["seed"]])]
        control = block.get("control", "none")
        control = "" if control == "none" else control
        for t in dict.fromkeys(block["tasks"]):
            for lv in levels:
                for s in sizes:
                    for seed in seeds:
                        seen[(t, lv, s, control, seed)] = None
    return list(seen)


def run_names(cfg: dict) -> list[str]:
    return [run_name(*r) for r in runs(cfg)]


def prune_window(cfg: dict) -> dict[str, str]:
    """{run: the run whose pruning it waits for before training}: with ``keep_checkpoints:
    final`` and ``max_unpruned_runs: J``, the runs of each size train in grid order with at
    most J of them holding their analysis checkpoints at once (run i waits for run i - J of
    its size to be pruned), so a grid's checkpoint disk never exceeds what is kept plus J runs
    of every size (geoanatomy.cost.peak_disk_mb). Empty otherwise."""
    j = cfg.get("max_unpruned_runs")
    if cfg.get("keep_checkpoints", "all") != "final" or not j:
        return {}
    by_size: dict[str, list[str]] = {}
    for r in runs(cfg):
        by_size.setdefault(r[2], []).append(run_name(*r))
    return {names[i]: names[i - j] for names in by_size.values() for i in range(j, len(names))}


def run_spec(cfg: dict, name: str) -> RunSpec:
    if parse_mixture_name(name) is not None:
        return mixture_spec(cfg, name)
    parts = parse_run_name(name)
    if parts is None:
        raise ConfigError(f"run name {name!r} is not task_level_size[_shuffled][_sSEED]") from None
    key = (parts["task"], parts["level"], parts["size"], parts["control"], parts["seed"])
    if key not in set(runs(cfg)):
        names = run_names(cfg)
        raise ConfigError(f"run {name!r} is not in the config grid; runs: {names[:20]}"
                          + (f" ... ({len(names)} in all)" if len(names) > 20 else ""))
    task, level, size, control, seed = key
    return RunSpec(task=task, level=level, size=size, level_params=level_params(cfg, task, level),
                   train=train_settings(cfg, size), data=dict(cfg["data"]), seed=seed,
                   block_size=int(cfg["model"]["block_size"]), eval=dict(cfg["eval"]), control=control)


# Config blocks each stage reads besides the run itself (the job's Snakemake params carry
# them, so changing a block reruns exactly the stages that read it).
STAGE_BLOCKS = {"train": (), "metrics": (), "measures": ("measures", "events"), "probes": ("probes",),
                "events": ("events",), "prune": ()}


def job_spec(cfg: dict, name: str, stage: str) -> JobSpec:
    """The JobSpec of ``stage`` for run ``name`` of a resolved config.

    train gets no evaluation settings (they do not change the weights, so editing them must
    not retrain); measures reads the events block only when ``measures.events`` picks
    checkpoints around events."""
    if stage not in STAGE_BLOCKS:
        raise ConfigError(f"unknown stage {stage!r}; stages: {list(STAGE_BLOCKS)}")
    spec = run_spec(cfg, name)
    if spec.mixture and (stage == "train") == spec.is_unit:
        raise ConfigError(f"{name!r} is a mixture's {'unit' if spec.is_unit else 'training run'}: "
                          + (f"train its mixture {spec.train_name!r}" if spec.is_unit else
                             f"the {stage} stage runs on its units {mixture_unit_names(cfg, name)}"))
    if stage == "train":
        spec = RunSpec(**{**spec.__dict__, "eval": {}})
    blocks = {b: copy.deepcopy(cfg[b]) for b in STAGE_BLOCKS[stage]}
    if stage == "measures" and not cfg["measures"]["events"]:
        del blocks["events"]
    return JobSpec(stage=stage, run=spec, results_dir=cfg["results_dir"], device=cfg["device"], blocks=blocks)


# ------------------------------------------------------------ semantic checks
def input_space(task: str, params: dict) -> int:
    """The exact number of distinct inputs of a task level (integer arithmetic: no float
    overflow however long the input)."""
    from .tasks import LEVEL_PARAM
    v = params[LEVEL_PARAM[task]]
    if task == "par":
        return 2 ** int(v)
    if task == "mod":
        return int(v) ** 2
    if task in ("cmp", "add"):
        return 10 ** (2 * int(v))
    if task == "mul":
        return 10 ** sum(int(d) for d in v)
    return 10 ** int(v)  # copy, rev, sort


def check_semantics(cfg: dict) -> None:
    from .tasks import LEVEL_PARAM, LEVELS, OPTIONAL_PARAMS, TASKS, level_hardness, make_task
    from .schedule import checkpoint_steps

    for task, levels in (cfg.get("tasks") or {}).items():
        for lv, p in (levels or {}).items():
            want = LEVEL_PARAM[task]
            optional = OPTIONAL_PARAMS.get(task, {})
            extra = sorted(set(p) - {want} - set(optional))
            if want not in p or extra:
                also = f" (optional: {sorted(optional)})" if optional else ""
                raise ConfigError(f"config field 'tasks.{task}.{lv}': task {task!r} takes the parameter "
                                  f"{want!r}{also}, got {sorted(p)}")
            if "support" in p and not (isinstance(p["support"], int) and 1 <= p["support"] <= p[want]):
                raise ConfigError(f"config field 'tasks.{task}.{lv}.support': {p['support']!r} must be an "
                                  f"integer between 1 and length ({p[want]})")
            if task == "mul" and not isinstance(p[want], list):
                raise ConfigError(f"config field 'tasks.mul.{lv}.digits': give [digits_a, digits_b], got {p[want]!r}")
            if task != "mul" and isinstance(p[want], list):
                raise ConfigError(f"config field 'tasks.{task}.{lv}.{want}': give one integer, got {p[want]!r}")
    if cfg.get("max_unpruned_runs") and cfg.get("keep_checkpoints", "all") != "final":
        raise ConfigError(f"config field 'max_unpruned_runs': {cfg['max_unpruned_runs']} limits runs holding "
                          f"their analysis checkpoints, which only keep_checkpoints: final removes "
                          f"(keep_checkpoints is {cfg.get('keep_checkpoints', 'all')!r})")
    for task in TASKS:
        hard = [level_hardness(task, level_params(cfg, task, lv)) for lv in LEVELS]
        for i in range(2):
            if not hard[i] < hard[i + 1]:
                raise ConfigError(
                    f"config field 'tasks.{task}': {LEVELS[i + 1]} must be harder than {LEVELS[i]} by its "
                    + ("length ** support (k relevant bits among n)" if task == "par" else f"'{LEVEL_PARAM[task]}'")
                    + f" ({level_params(cfg, task, LEVELS[i])} vs "
                    f"{level_params(cfg, task, LEVELS[i + 1])})")

    check_mixtures(cfg)
    used_sizes = sorted({r[2] for r in runs(cfg)} | {m["size"] for m in mixtures(cfg)})
    for size in ["<train>"] + used_sizes:
        tr = cfg["train"] if size == "<train>" else train_settings(cfg, size)
        where = "train" if size == "<train>" else f"size_overrides.{size}"
        if tr["warmup"] >= tr["steps"]:
            raise ConfigError(f"config field '{where}.warmup': {tr['warmup']} must be smaller than steps ({tr['steps']})")
        ck = tr["checkpoints"]
        if ck["n_log"] + ck["n_uniform"] < 1:
            raise ConfigError(f"config field '{where}.checkpoints': n_log + n_uniform must be >= 1")
        if ck["n_uniform"] > tr["steps"]:
            raise ConfigError(f"config field '{where}.checkpoints.n_uniform': {ck['n_uniform']} checkpoints "
                              f"do not fit in steps={tr['steps']}")
        n = len(checkpoint_steps(tr["steps"], ck["n_log"], ck["log_end"], ck["n_uniform"]))
        if n < cfg["events"]["persist"] + 2:
            raise ConfigError(f"config field '{where}.checkpoints': only {n} distinct checkpoint steps; "
                              f"event detection needs at least events.persist + 2 = {cfg['events']['persist'] + 2}")

    n_eval, n_probe = cfg["eval"]["n_samples"], cfg["probes"]["n_samples"]
    n_heldout, frac = cfg["data"]["n_heldout"], cfg["data"]["heldout_frac"]
    num, den = HELDOUT_MAX_SHARE
    for task, lv in dict.fromkeys([r[:2] for r in runs(cfg)]
                                  + [(c["task"], c["level"]) for m in mixtures(cfg) for c in m["components"]]):
        params = level_params(cfg, task, lv)
        pname = LEVEL_PARAM[task]
        spec = make_task(task, lv, params)
        base = 2 if task == "par" else 10
        if base ** spec.n_in > 2 ** KEY_BITS:
            most = int(KEY_BITS / math.log2(base))
            unit = "bits" if task == "par" else "digits"
            raise ConfigError(f"config field 'tasks.{task}.{lv}.{pname}': {pname} {params[pname]!r} gives {task} {lv} "
                              f"{spec.n_in} input {unit}; the held-out split keys each input as a {KEY_BITS}-bit "
                              f"integer, so at most {most} input {unit} are supported")
        if spec.seq_len - 1 > cfg["model"]["block_size"]:
            raise ConfigError(f"config field 'model.block_size': {task} {lv} needs {spec.seq_len - 1} positions, "
                              f"block_size is {cfg['model']['block_size']}")
        space = input_space(task, params)
        # each input is held out with probability heldout_frac (a hash of the input): the held-out
        # part must leave the larger share to training and hold enough inputs to draw from
        if frac * den > num:
            raise ConfigError(f"config field 'data.heldout_frac': {frac} would hold out more than {num}/{den} of "
                              f"every input space; training must draw from the larger part")
        if frac * space < MIN_HELDOUT_INPUTS:
            raise ConfigError(f"config field 'data.heldout_frac': {task} {lv} has {space} inputs, so "
                              f"heldout_frac = {frac} holds out about {frac * space:.1f} of them; at least "
                              f"{MIN_HELDOUT_INPUTS} are needed (raise heldout_frac or make the level larger)")
        for field, n in (("eval.n_samples", n_eval), ("probes.n_samples", n_probe)):
            if n > n_heldout:
                raise ConfigError(f"config field '{field}': {n} exceeds the held-out pool of {task} {lv} "
                                  f"(data.n_heldout = {n_heldout} draws)")
    llc = cfg["measures"]["llc"]
    if llc["batch_size"] > llc["n_data"]:
        raise ConfigError(f"config field 'measures.llc.batch_size': {llc['batch_size']} exceeds the SGLD data pool "
                          f"measures.llc.n_data = {llc['n_data']}")

    layer = cfg["events"]["layer"]
    for size in used_sizes:
        names = layer_names(SIZES[size][0])
        if layer not in names + ["final"]:
            raise ConfigError(f"config field 'events.layer': {layer!r} does not exist in size {size!r}; "
                              f"allowed: {names + ['final']}")

    from .pythia.settings import check_pythia
    check_pythia(cfg)



# ------------------------------------------------------------ multi-task protocol
# A grid block with ``protocol: mixture`` trains one model per size and seed on every
# task x level combination of the block (geoanatomy.mixture; docs/mixture.md). Its training
# run is NAME_SIZE[_sN]; each combination is an analysis unit NAME_SIZE[_sN]/TASK_LEVEL[_shuffled].
MIXTURE_KEYS = ("name", "weights", "controls")


def _combos(block: dict) -> list[str]:
    return [f"{t}_{lv}" for t in dict.fromkeys(block["tasks"]) for lv in dict.fromkeys(block["levels"])]


def mixtures(cfg: dict) -> list[dict]:
    """Every mixture training run of the grid, in grid order: {"name" (the run), "mixture",
    "size", "seed", "block" (index in grid), "components": [{task, level, level_params, control,
    weight}, ...]} (components in block order: tasks, then levels)."""
    out: dict[str, dict] = {}
    for i, block in enumerate(cfg["grid"]):
        if block.get("protocol", "single") != "mixture":
            continue
        mix = block.get("name", "mixture")
        default_control = block.get("control", "none")
        comps = []
        for combo in _combos(block):
            task, level = combo.split("_")
            control = (block.get("controls") or {}).get(combo, default_control)
            comps.append({"task": task, "level": level, "level_params": level_params(cfg, task, level),
                          "control": "" if control == "none" else control,
                          "weight": float((block.get("weights") or {}).get(combo, 1.0))})
        for size in dict.fromkeys(block["sizes"]):
            for seed in dict.fromkeys(int(x) for x in (block.get("seeds") or [cfg["seed"]])):
                name = mixture_run_name(mix, size, seed)
                out.setdefault(name, {"name": name, "mixture": mix, "size": size, "seed": seed, "block": i,
                                      "components": comps})
    return list(out.values())


def mixture_names(cfg: dict) -> list[str]:
    """The training runs of the grid's mixtures."""
    return [m["name"] for m in mixtures(cfg)]


def mixture_unit_names(cfg: dict, parent: str | None = None) -> list[str]:
    """The analysis units (one per combination) of every mixture, or of the mixture ``parent``."""
    return [f"{m['name']}/{combination_name(c['task'], c['level'], c['control'])}"
            for m in mixtures(cfg) if parent is None or m["name"] == parent for c in m["components"]]


def unit_names(cfg: dict) -> list[str]:
    """Every analysis unit of the grid: the single-task runs, then the mixtures' units (each
    gets metrics, measures, probes and a precursor.json)."""
    return run_names(cfg) + mixture_unit_names(cfg)


def mixture_spec(cfg: dict, name: str) -> RunSpec:
    """The RunSpec of a mixture's training run (``task`` empty) or of one of its units."""
    parts = parse_mixture_name(name)
    found = {m["name"]: m for m in mixtures(cfg)}
    if parts is None or parts["parent"] not in found:
        names = mixture_names(cfg)
        raise ConfigError(f"mixture run {name!r} is not in the config grid; mixtures: {names[:20]}"
                          + (f" ... ({len(names)} in all)" if len(names) > 20 else ""))
    m = found[parts["parent"]]
    base = dict(size=m["size"], train=train_settings(cfg, m["size"]), data=dict(cfg["data"]), seed=m["seed"],
                block_size=int(cfg["model"]["block_size"]), eval=dict(cfg["eval"]),
                mixture={"name": m["mixture"], "components": copy.deepcopy(m["components"])})
    if parts["task"] is None:
        return RunSpec(task="", level="", level_params={}, control="", **base)
    for c in m["components"]:
        if (c["task"], c["level"], c["control"]) == (parts["task"], parts["level"], parts["control"]):
            return RunSpec(task=c["task"], level=c["level"], level_params=dict(c["level_params"]),
                           control=c["control"], **base)
    raise ConfigError(f"{name!r}: {parts['parent']!r} has no combination "
                      f"{combination_name(parts['task'], parts['level'], parts['control'])!r}; its units: "
                      f"{mixture_unit_names(cfg, parts['parent'])}")


def check_mixtures(cfg: dict) -> None:
    """Semantic checks of the grid's mixture blocks (the schema has checked types): mixture
    keys only in mixture blocks, at least two combinations, weights and controls only for the
    block's combinations, one block per mixture training run."""
    trained_by: dict[str, int] = {}
    for i, block in enumerate(cfg["grid"]):
        where = f"grid.{i}"
        if block.get("protocol", "single") != "mixture":
            for k in MIXTURE_KEYS:
                if k in block:
                    raise ConfigError(f"config field '{where}.{k}': only for a mixture block (protocol: mixture); "
                                      f"this block is single-task")
            continue
        combos = _combos(block)
        if len(combos) < 2:
            raise ConfigError(f"config field '{where}': protocol mixture needs at least two task x level "
                              f"combinations, got {combos}; use protocol: single for one")
        for k in ("weights", "controls"):
            for combo in (block.get(k) or {}):
                if combo not in combos:
                    raise ConfigError(f"config field '{where}.{k}.{combo}': {combo!r} is not a combination of "
                                      f"this block (TASK_LEVEL); its combinations: {combos}")
        mix = block.get("name", "mixture")
        for size in dict.fromkeys(block["sizes"]):
            for seed in dict.fromkeys(int(x) for x in (block.get("seeds") or [cfg["seed"]])):
                name = mixture_run_name(mix, size, seed)
                if name in trained_by and trained_by[name] != i:
                    raise ConfigError(f"config field '{where}': the mixture run {name!r} is also trained by "
                                      f"grid.{trained_by[name]} with other settings; give one block its own "
                                      f"name (e.g. name: {mix}2)")
                trained_by[name] = i
