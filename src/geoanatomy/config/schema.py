"""Validating a user config's shape: the bounded value walk (``check_values``), the JSON
schema (``validate_schema``; the message names the field and the bound) and the coercion of
integers written as floats (``coerce_ints``)."""
from __future__ import annotations

import copy
import difflib
import math
import re
from pathlib import Path

import yaml

from ..defaults import PYTHIA_BENCHMARKS
from ..errors import ConfigError
from ..measures.registry import MEASURES
from ..sizes import SIZES
from .reading import _short

SCHEMA_PATH = Path(__file__).with_name("config.schema.yaml")

# Bounds on what a config may be (the per-field size bounds are the schema's `maximum`s).
MAX_CONFIG_VALUES = 20_000        # values in a config, YAML aliases expanded
MAX_DEPTH = 24                    # nesting of mappings and lists
MAX_STRING_LEN = 4096             # characters in one string


def load_schema() -> dict:
    """The JSON schema of a config, with the allowed task, level, size, Pythia benchmark and
    expensive-measure names, and each measure's settings block, filled in from the library
    (their one home)."""
    from ..tasks import LEVELS, TASKS
    # libyaml's loader when present: the pure-Python one took ~0.1 s of every Snakefile parse
    schema = yaml.load(SCHEMA_PATH.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    for name, values in (("task", TASKS), ("level", LEVELS), ("size", list(SIZES)),
                         ("pythia_benchmark", PYTHIA_BENCHMARKS)):
        schema["$defs"][name]["enum"] = list(values)
    m = schema["properties"]["measures"]["properties"]
    m["which"]["items"]["enum"] = list(MEASURES)
    for entry in MEASURES.values():          # each measure's settings block: its registry entry's schema
        m[entry.config_key] = entry.settings_block_schema()
    return schema


def _field(path) -> str:
    """A field path as the messages write it: ``train.checkpoints.n_log``."""
    return ".".join(str(p) for p in path) or "<top level>"


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


# Keys earlier versions read, with what replaced them (a config that still sets one is told why).
REMOVED_KEYS = {
    "measures.every_k": "the expensive measures' checkpoints are fixed before training: set measures.n_points",
    "measures.around_events": "no checkpoint is chosen by an event any more: set measures.n_points",
    "measures.events": "no checkpoint is chosen by an event any more: set measures.n_points",
    "measures.grad": "renamed measures.grad_rank (one name per measure: the kind in measures.which)",
    "probes.every_k": "probes run at every checkpoint the metrics stage measures (behaviour's own schedule)",
}


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
        unknown = sorted(set(e.instance) - set(allowed)) if isinstance(e.instance, dict) else []
        near = [(k, difflib.get_close_matches(str(k), allowed, n=1, cutoff=0.6)) for k in unknown[:3]]
        hint = "; ".join(f"did you mean {m[0]!r} for {k!r}?" for k, m in near if m)
        msg, got = f"{_short(e.message, 200)}; " + (f"{hint} " if hint else "") + f"allowed keys: {allowed}", False
        for key in sorted(set(e.instance) - set(allowed)) if isinstance(e.instance, dict) else ():
            full = f"{where}.{key}" if where else key
            if full in REMOVED_KEYS:
                raise ConfigError(f"config field '{full}' was removed: {REMOVED_KEYS[full]}")
    elif e.validator == "propertyNames":
        allowed = e.validator_value.get("enum", e.validator_value)
        msg = f"{_short(repr(e.instance), 80)} is not allowed; allowed values: {allowed}"
        if "$ref" in e.validator_value:
            ref = e.validator_value["$ref"].split("/")[-1]
            allowed = load_schema()["$defs"][ref]["enum"]
            msg = f"{_short(repr(e.instance), 80)} is not allowed; allowed values: {allowed}"
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


def validate_block(name: str, value) -> None:
    """Check one top-level block (``summary``, ``events``...) on its own against the config
    schema (for settings given outside a config file: the summary's --settings, the monitor's
    events); ConfigError naming the field, as for a config."""
    sch = load_schema()
    validate_schema({name: value}, {"$defs": sch.get("$defs", {}), "type": "object",
                                    "properties": {name: sch["properties"][name]}})


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
                    raise ConfigError(f"config field '{_field(path + (repr(k),))}': key {_short(repr(k), 60)} is of "
                                      f"type "
                                      f"{type(k).__name__} (YAML reads unquoted numbers, yes/no, null as such); keys "
                                      f"must be strings")
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


def coerce_ints(schema: dict, v, root: dict):
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
            return coerce_ints(pick[0], v, root)
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
            out[k] = coerce_ints(sub, x, root) if sub is not None else copy.deepcopy(x)
        return out
    if isinstance(v, list):
        items = schema.get("items")
        return [coerce_ints(items, x, root) if isinstance(items, dict) else copy.deepcopy(x) for x in v]
    if isinstance(v, float) and v.is_integer() and "integer" in _types(schema) and "number" not in _types(schema):
        return int(v)
    return v
