"""Configuration: reading config files, schema validation, semantic checks, the grid,
per-run specs. DEFAULTS live in ``geoanatomy.defaults`` (re-exported here).

No torch import here: the Snakefile imports this package at parse time (only an explicit
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

Modules: ``reading`` (files, repeated keys, ``deep_merge``), ``schema`` (value walk, JSON
schema, integer coercion), ``checks`` (the semantic checks, one function per topic; a
branch's block, e.g. ``pythia:``, is checked by the branch's own function), ``grid``
(single-task runs), ``jobs``
(RunSpec and JobSpec of a run), ``load`` (``load_config``, ``resolve``).
"""
from ..defaults import DEFAULTS
from ..errors import ConfigError
from .checks import (
                     BLOCK_CHECKS,
                     CHECKS,
                     HELDOUT_MAX_SHARE,
                     KEY_BITS,
                     MIN_HELDOUT_INPUTS,
                     check_devices,
                     check_results_dir,
                     check_semantics,
                     input_space,
)
from .grid import (
                     MIXTURE_KEYS,
                     check_mixtures,
                     eval_settings,
                     level_params,
                     mixture_names,
                     mixture_spec,
                     mixture_unit_names,
                     mixtures,
                     pack_slots,
                     prune_window,
                     run_names,
                     runs,
                     train_settings,
                     training_runs_by_size,
                     unit_names,
)
from .jobs import STAGE_BLOCKS, job_spec, pack_of, run_spec, train_packs
from .load import load_config, resolve
from .reading import MAX_CONFIG_BYTES, ConfigLoader, deep_merge, read_config_file
from .schema import (
                     MAX_CONFIG_VALUES,
                     MAX_DEPTH,
                     MAX_STRING_LEN,
                     SCHEMA_PATH,
                     check_values,
                     load_schema,
                     validate_schema,
)

__all__ = ["BLOCK_CHECKS", "CHECKS", "ConfigError", "ConfigLoader", "DEFAULTS", "HELDOUT_MAX_SHARE", "KEY_BITS",
           "MAX_CONFIG_BYTES", "MAX_CONFIG_VALUES", "MAX_DEPTH", "MAX_STRING_LEN", "MIN_HELDOUT_INPUTS",
           "MIXTURE_KEYS", "SCHEMA_PATH", "STAGE_BLOCKS", "check_devices", "check_mixtures", "check_results_dir",
           "check_semantics", "check_values", "deep_merge", "input_space", "job_spec", "level_params",
           "load_config", "load_schema", "mixture_names", "mixture_spec", "mixture_unit_names", "mixtures",
           "eval_settings", "pack_slots", "prune_window", "read_config_file", "resolve", "run_names", "run_spec",
           "runs", "train_settings", "pack_of", "train_packs",
           "training_runs_by_size",
           "unit_names", "validate_schema"]
