"""The one config loader (``load_config``: files -> validated config) and ``resolve`` (a user
dict -> validated config merged over DEFAULTS)."""
from __future__ import annotations

import os
import re
from pathlib import Path

from ..defaults import DEFAULTS
from .checks import check_devices, check_results_dir, check_semantics
from .grid import dedupe_grid
from .reading import deep_merge, read_config_file
from .schema import check_values, coerce_ints, load_schema, validate_schema


def resolve(user: dict, *, workdir: str | Path | None = None) -> dict:
    """Validate a user config dict (value walk, schema, semantics) and merge it over
    DEFAULTS. ``workdir``: results_dir must lie inside it unless the config sets
    ``allow_results_outside_workdir: true`` (None: programmatic use, e.g. tests writing
    into a temporary folder, skips that one check; ``load_config`` passes the current
    directory)."""
    check_values(user)
    schema = load_schema()
    validate_schema(user, schema)
    user = dedupe_grid(coerce_ints(schema, user, schema))
    cfg = deep_merge(DEFAULTS, user)
    check_results_dir(cfg, workdir)
    check_semantics(cfg)
    return cfg


_CWD = object()
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")


def command_line_overrides(overrides: dict) -> dict:
    """Snakemake's ``--config KEY=VALUE`` as a config dict: Snakemake reads a top-level VALUE as
    a number or bool but leaves every value nested inside a mapping a string
    (``--config 'train={steps: 100}'`` gives ``{'train': {'steps': '100'}}``), so nested
    strings that are plainly a number (decimal digits, or a decimal float) or true/false
    become one; anything else stays as written for the schema to check."""
    def fix(v, nested):
        if isinstance(v, dict):
            return {k: fix(x, True) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x, nested) for x in v]
        if nested and isinstance(v, str):
            t = v.strip()
            if _INT.fullmatch(t):
                return int(t)
            if _FLOAT.fullmatch(t):
                return float(t)
            if t in ("true", "false"):
                return t == "true"
        return v
    return {k: fix(v, False) for k, v in dict(overrides).items()}


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
