"""The one config loader (``load_config``: files -> validated config) and ``resolve`` (a user
dict -> validated config merged over DEFAULTS)."""
from __future__ import annotations

import os
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
