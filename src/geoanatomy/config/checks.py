"""Semantic checks a schema cannot express, one small function per topic (``CHECKS``, run
in order by ``check_semantics``), plus the results_dir and device checks.

A branch's block is checked by its own function (``BLOCK_CHECKS``), which lives in this
package beside the block's settings (config/pythia.py), so this package imports no branch.
"""
from __future__ import annotations

import math
import os
import posixpath
import re
from pathlib import Path

from ..errors import ConfigError
from ..runtime import device_problem
from ..sizes import SIZES, layer_names
from ..tasks import LEVELS, REGISTRY, LevelParamError, get_task, make_task
from .pythia import check_pythia
from .grid import check_mixtures, level_params, mixtures, runs, train_settings

KEY_BITS = 62                     # TaskSpec.keys packs a task's inputs into one int64
HELDOUT_MAX_SHARE = (1, 2)        # the held-out set may take at most half of an input space
MIN_HELDOUT_INPUTS = 20           # ... and must hold at least this many inputs (expected) to draw from


def input_space(task: str, params: dict) -> int:
    """The exact number of distinct inputs of a task level (integer arithmetic: no float
    overflow however long the input; ``Task.input_space``)."""
    return get_task(task).input_space(params)


def _used_sizes(cfg: dict) -> list[str]:
    """The sizes the grid trains (single-task runs and mixtures), sorted."""
    return sorted({r[2] for r in runs(cfg)} | {m["size"] for m in mixtures(cfg)})


def _used_levels(cfg: dict) -> list[tuple[str, str]]:
    """The (task, level) pairs the grid trains, in grid order, single-task runs first."""
    return list(dict.fromkeys([r[:2] for r in runs(cfg)]
                              + [(c["task"], c["level"]) for m in mixtures(cfg) for c in m["components"]]))


# ------------------------------------------------------------------ the checks
def check_task_params(cfg: dict) -> None:
    """Each ``tasks:`` entry gives its task's parameters, of the right shape (``Task.check_params``)."""
    for task, levels in (cfg.get("tasks") or {}).items():
        for lv, p in (levels or {}).items():
            try:
                get_task(task).check_params(p)
            except LevelParamError as e:
                where = f"tasks.{task}.{lv}" + (f".{e.field}" if e.field else "")
                raise ConfigError(f"config field '{where}': {e}") from None


def check_pruning(cfg: dict) -> None:
    """``max_unpruned_runs`` only with ``keep_checkpoints: final`` (the one that prunes), and
    not with training packs (the window orders runs one by one; a pack trains several at once)."""
    if cfg.get("max_unpruned_runs") and int((cfg.get("pack") or {}).get("train", 1)) > 1:
        raise ConfigError(f"config field 'pack.train': {cfg['pack']['train']} trains runs together, but "
                          f"max_unpruned_runs: {cfg['max_unpruned_runs']} trains them one after another to bound "
                          "the disk; use one of the two")
    if cfg.get("max_unpruned_runs") and cfg.get("keep_checkpoints", "all") != "final":
        raise ConfigError(f"config field 'max_unpruned_runs': {cfg['max_unpruned_runs']} limits runs holding "
                          f"their analysis checkpoints, which only keep_checkpoints: final removes "
                          f"(keep_checkpoints is {cfg.get('keep_checkpoints', 'all')!r})")


def check_level_order(cfg: dict) -> None:
    """Every task's levels are graded L1 < L2 < L3 by its hardness (``Task.hardness``)."""
    for task, t in REGISTRY.items():
        params = [level_params(cfg, task, lv) for lv in LEVELS]
        hard = [t.hardness(p) for p in params]
        for i in range(len(LEVELS) - 1):
            if not hard[i] < hard[i + 1]:
                raise ConfigError(f"config field 'tasks.{task}': {LEVELS[i + 1]} must be harder than {LEVELS[i]} "
                                  f"by its {t.hardness_by} ({params[i]} vs {params[i + 1]})")


def check_schedules(cfg: dict) -> None:
    """Warmup and checkpoint schedule fit the steps, for the train block and every size
    trained; enough distinct checkpoints for event detection."""
    from ..schedule import train_checkpoint_steps
    for size in ["<train>"] + _used_sizes(cfg):
        tr = cfg["train"] if size == "<train>" else train_settings(cfg, size)
        where = "train" if size == "<train>" else f"size_overrides.{size}"
        if tr["warmup"] >= tr["steps"]:
            raise ConfigError(f"config field '{where}.warmup': {tr['warmup']} must be smaller than steps "
                              f"({tr['steps']})")
        ck = tr["checkpoints"]
        if ck["n_log"] + ck["n_uniform"] < 1:
            raise ConfigError(f"config field '{where}.checkpoints': n_log + n_uniform must be >= 1")
        if ck["n_uniform"] > tr["steps"]:
            raise ConfigError(f"config field '{where}.checkpoints.n_uniform': {ck['n_uniform']} checkpoints "
                              f"do not fit in steps={tr['steps']}")
        n = len(train_checkpoint_steps(tr))
        if n < cfg["events"]["persist"] + 2:
            raise ConfigError(f"config field '{where}.checkpoints': only {n} distinct checkpoint steps; "
                              f"event detection needs at least events.persist + 2 = {cfg['events']['persist'] + 2}")


def check_inputs(cfg: dict) -> None:
    """Every task level the grid trains: its inputs fit the held-out split's key and the
    context, the held-out share leaves training the larger part and holds enough inputs,
    and the evaluation and probe samples fit in the held-out pool."""
    for task, lv in _used_levels(cfg):
        params = level_params(cfg, task, lv)
        spec = make_task(task, lv, params)
        t = get_task(task)
        try:
            t.check_run(params, cfg["data"]["heldout_frac"], cfg["model"]["block_size"])
            if spec.heldout_frac is not None:             # the task's own split (grok's fixed training set)
                for seed in sorted({r[4] for r in runs(cfg) if r[:2] == (task, lv)}):
                    t.check_split(params, seed, lv)
        except LevelParamError as e:
            raise ConfigError(f"config field 'tasks.{task}.{lv}.{e.field or t.level_param}': {e}") from None
        if not t.wide_inputs(params):
            _check_key_bits(task, lv, params, spec.n_in)
        if spec.seq_len - 1 > cfg["model"]["block_size"]:
            raise ConfigError(f"config field 'model.block_size': {task} {lv} needs {spec.seq_len - 1} positions, "
                              f"block_size is {cfg['model']['block_size']}")
        if spec.heldout_frac is None:     # a task's own split is its check_split's (it may hold out most)
            _check_heldout_share(cfg, task, lv, input_space(task, params))
        n_heldout = cfg["data"]["n_heldout"]
        by_size = cfg["eval"].get("n_samples_by_size") or {}
        samples = (("eval.n_samples", cfg["eval"]["n_samples"]), ("probes.n_samples", cfg["probes"]["n_samples"]),
                   *((f"eval.n_samples_by_size.{z}", n) for z, n in sorted(by_size.items())))
        for field, n in samples:
            if n > n_heldout:
                raise ConfigError(f"config field '{field}': {n} exceeds the held-out pool of {task} {lv} "
                                  f"(data.n_heldout = {n_heldout} draws)")


def _check_key_bits(task: str, lv: str, params: dict, n_in: int) -> None:
    """The held-out split keys each input as a KEY_BITS-bit integer."""
    t = get_task(task)
    pname = t.level_param
    if t.base ** n_in > 2 ** KEY_BITS:
        most = int(KEY_BITS / math.log2(t.base))
        raise ConfigError(f"config field 'tasks.{task}.{lv}.{pname}': {pname} {params[pname]!r} gives {task} {lv} "
                          f"{n_in} input {t.unit}; the held-out split keys each input as a {KEY_BITS}-bit "
                          f"integer, so at most {most} input {t.unit} are supported")


def _check_heldout_share(cfg: dict, task: str, lv: str, space: int) -> None:
    """Each input is held out with probability heldout_frac (a hash of the input): the
    held-out part must leave the larger share to training and hold enough inputs to draw from."""
    frac = cfg["data"]["heldout_frac"]
    num, den = HELDOUT_MAX_SHARE
    if frac * den > num:
        raise ConfigError(f"config field 'data.heldout_frac': {frac} would hold out more than {num}/{den} of "
                          f"every input space; training must draw from the larger part")
    if frac * space < MIN_HELDOUT_INPUTS:
        raise ConfigError(f"config field 'data.heldout_frac': {task} {lv} has {space} inputs, so "
                          f"heldout_frac = {frac} holds out about {frac * space:.1f} of them; at least "
                          f"{MIN_HELDOUT_INPUTS} are needed (raise heldout_frac or make the level larger)")


def check_llc(cfg: dict) -> None:
    """The LLC's SGLD batch fits its data pool."""
    llc = cfg["measures"]["llc"]
    if llc["batch_size"] > llc["n_data"]:
        raise ConfigError(f"config field 'measures.llc.batch_size': {llc['batch_size']} exceeds the SGLD data pool "
                          f"measures.llc.n_data = {llc['n_data']}")


def check_events_layer(cfg: dict) -> None:
    """The events layer exists in every size trained."""
    layer = cfg["events"]["layer"]
    for size in _used_sizes(cfg):
        names = layer_names(SIZES[size][0])
        if layer not in names + ["final"]:
            raise ConfigError(f"config field 'events.layer': {layer!r} does not exist in size {size!r}; "
                              f"allowed: {names + ['final']}")


# The semantic checks, in the order they run (the first failing one names the field).
def check_classes(cfg: dict) -> None:
    """A class file (``events.classes_file``) comes with its sha256, has that hash, parses,
    and gives every analysed run's cell a class from seeds disjoint from the run's
    (``geoanatomy.classes``); checked before any job runs."""
    from ..classes import check_against_grid, read_class_file
    e = cfg["events"]
    path = e.get("classes_file")
    if not path:
        if e.get("classes_sha256"):
            raise ConfigError("config field 'events.classes_sha256' is set without events.classes_file")
        return
    if not e.get("classes_sha256"):
        raise ConfigError(f"config field 'events.classes_sha256': give the sha256 of {path} (events.classes_file), "
                          f"so a class file edited after the outcome is refused; `sha256sum {path}` prints it")
    classes = read_class_file(path, e["classes_sha256"])
    check_against_grid(classes, [{"task": t, "level": lv, "size": z, "seed": sd, "control": ctl,
                                  "steps": train_settings(cfg, z)["steps"], "name": f"{t}_{lv}_{z}"}
                                 for t, lv, z, ctl, sd in runs(cfg)], path)


MAX_RUNS = 20_000     # a plan beyond this is refused before any DAG is built (about 5 jobs a run)


def check_plan_size(cfg: dict) -> None:
    """The grid's run count, multiplied out per block before any run is listed: refused beyond
    ``MAX_RUNS`` naming each block's product (a grid of 864,000 runs once validated in 3 s,
    then grew Snakemake's DAG to 2.35 GB before it was killed)."""
    parts, total = [], 0
    for i, b in enumerate(cfg.get("grid") or []):
        if not isinstance(b, dict) or b.get("protocol", "single") == "mixture":
            continue
        dims = [len(dict.fromkeys(b.get(k) or [])) for k in ("tasks", "levels", "sizes")]
        dims.append(len(dict.fromkeys(b.get("seeds") or [cfg.get("seed")])))
        n = dims[0] * dims[1] * dims[2] * dims[3]
        total += n
        parts.append(f"grid.{i}: {dims[0]} tasks x {dims[1]} levels x {dims[2]} sizes x {dims[3]} seeds "
                     f"= {n:,}")
    if total > MAX_RUNS:
        raise ConfigError(f"config field 'grid': {total:,} runs planned, more than {MAX_RUNS:,} "
                          f"(about {5 * total:,} Snakemake jobs); {'; '.join(parts[:4])}"
                          f"{' ...' if len(parts) > 4 else ''}. Split the grid into configs of at most "
                          f"{MAX_RUNS:,} runs")


CHECKS = [check_plan_size, check_task_params, check_pruning, check_level_order, check_mixtures, check_schedules,
          check_inputs, check_llc, check_events_layer, check_classes]

# Config blocks checked by the branch that owns them: block -> "module:function", imported
# when a config holding the block is checked, after CHECKS.
# A branch's config block and the function that checks it (the branch's block settings live
# in this package, torch-free: config/pythia.py for ``pythia:``).
BLOCK_CHECKS = {"pythia": check_pythia}


def block_checks(cfg: dict) -> list:
    """The checks of the branch blocks ``cfg`` has."""
    return [check for block, check in BLOCK_CHECKS.items() if block in cfg]


def check_semantics(cfg: dict) -> None:
    """Run every semantic check on a config merged over DEFAULTS (ConfigError names the field)."""
    for check in CHECKS + block_checks(cfg):
        check(cfg)


# ------------------------------------------------------- results folder, devices
NAME_MAX = 255          # bytes per path component (ext4, XFS, APFS, NTFS all stop there)
PATH_MAX = 4096         # bytes per path (Linux); a run's deepest file adds RUN_FILE_DEPTH to results_dir
RUN_FILE_DEPTH = 160    # e.g. /mix..._nano_s12/mod_L3_shuffled/checkpoints/.step_000100.safetensors.tmp


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
    long = next((part for part in rd.split("/") if len(part.encode()) > NAME_MAX), None)
    if long is not None:
        raise ConfigError(f"{f}: the path component {long[:20]!r}... is {len(long.encode())} bytes; a file system "
                          f"takes at most {NAME_MAX} per name")
    norm = posixpath.normpath(rd)
    if norm in ("/", "//"):
        raise ConfigError(f"{f}: {rd!r} is the filesystem root; give a sub-folder of the working directory")
    base = Path(os.getcwd() if workdir is None else workdir)
    target = Path(posixpath.normpath(posixpath.join(str(base), rd)))
    if len(str(target).encode()) + RUN_FILE_DEPTH > PATH_MAX:
        raise ConfigError(f"{f}: {str(target)[:40]!r}... is {len(str(target).encode())} bytes; with a run's files "
                          f"below it (up to {RUN_FILE_DEPTH} more) it passes the {PATH_MAX}-byte path limit")
    if workdir is not None and not cfg.get("allow_results_outside_workdir", False):
        if target == base:
            raise ConfigError(f"{f}: {rd!r} is the working directory itself; give a sub-folder such as 'results'")
        if base not in target.parents:
            raise ConfigError(f"{f}: {rd!r} resolves to {target}, outside the working directory {base}; "
                              f"give a relative path below it, or set allow_results_outside_workdir: true")
    repo_own = [base / d for d in ("src", "docs", ".git", "workflow", "tests", "config")]
    inside = next((d for d in repo_own if d.is_dir() and (target == d or d in target.parents)), None)
    if inside is not None and (base / "Snakefile").is_file():
        raise ConfigError(f"{f}: {rd!r} lies inside the repository's own {inside.name}/ folder; results go to a "
                          f"folder of their own, such as 'results'")
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
        problem = device_problem(dev)
        if problem:
            raise ConfigError(f"config field '{field}': {problem}")
