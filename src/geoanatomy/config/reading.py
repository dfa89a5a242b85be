"""Reading config files: YAML or JSON, UTF-8, bounded in size, repeated keys rejected with
their line; ``deep_merge`` of one settings dict over another."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import yaml

from ..errors import ConfigError

MAX_CONFIG_BYTES = 1 << 20        # a config file (the shipped ones are ~5 KB)


def deep_merge(base: dict, over: dict) -> dict:
    """A deep copy of ``base`` with ``over`` merged in (nested dicts merge, anything else replaces)."""
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _short(text: str, n: int = 300) -> str:
    """``text`` cut to ``n`` characters (with ...)."""
    return text if len(text) <= n else text[: n - 3] + "..."


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


# YAML 1.1 (PyYAML) reads some plain scalars as numbers or booleans that YAML 1.2 and every
# reader of a modern config read as text or not at all: 1:20 (sexagesimal, 80), 0x100 (256),
# 010 (octal 8), 0b101, 1_000, yes / no / on / off. A researcher who typed one meant
# something else or made a typo, so the config is refused, naming the field and the reading.
_PLAIN_OK = {"tag:yaml.org,2002:int": re.compile(r"[-+]?(0|[1-9][0-9]*)\Z"),
             "tag:yaml.org,2002:float": re.compile(
                 r"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))\Z"),
             "tag:yaml.org,2002:bool": re.compile(r"(true|True|TRUE|false|False|FALSE)\Z")}
_KIND = ((re.compile(r".*:"), "sexagesimal (base 60)"), (re.compile(r"[-+]?0x", re.I), "hexadecimal"),
         (re.compile(r"[-+]?0b", re.I), "binary"), (re.compile(r"[-+]?0[0-9]"), "octal"),
         (re.compile(r".*_"), "a number with underscores"), (re.compile(r"[A-Za-z]"), "a YAML 1.1 boolean"))


class _Yaml11Scalar(Exception):
    def __init__(self, where, text, kind, line):
        super().__init__(text)
        self.where, self.text, self.kind, self.line = where, text, kind, line


def _check_yaml11_scalars(root) -> None:
    """Raise _Yaml11Scalar for the first plain scalar that YAML 1.1 coerces beyond YAML 1.2's
    core schema (module comment), with its key path."""
    stack, seen = [(root, "")], set()
    while stack:
        node, where = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for k, val in node.value:
                name = str(k.value) if isinstance(k, yaml.ScalarNode) else "?"
                stack.append((val, f"{where}.{name}" if where else name))
        elif isinstance(node, yaml.SequenceNode):
            stack += [(v, f"{where}.{i}") for i, v in enumerate(node.value)]
        elif isinstance(node, yaml.ScalarNode) and not node.style and node.tag in _PLAIN_OK:
            if not _PLAIN_OK[node.tag].match(node.value):
                kind = next((k for r, k in _KIND if r.match(node.value)), "a YAML 1.1 reading")
                value = yaml.safe_load(node.value)
                raise _Yaml11Scalar(where, node.value, f"{kind}, {value!r}", node.start_mark.line + 1)


class ConfigLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """yaml's safe loader (libyaml when present) that rejects repeated mapping keys and plain
    scalars YAML 1.1 would coerce beyond YAML 1.2 (``_check_yaml11_scalars``)."""

    def get_single_data(self):
        node = self.get_single_node()
        if node is None:
            return None
        _check_duplicate_keys(node)
        _check_yaml11_scalars(node)
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
    except _Yaml11Scalar as e:
        raise ConfigError(f"config file {p}: field '{e.where}' at line {e.line} is {e.text!r}, which YAML 1.1 reads"
                          f" as {e.kind}; write the plain decimal number (or true/false) you mean, or quote it to keep"
                          " it as text") from None
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
