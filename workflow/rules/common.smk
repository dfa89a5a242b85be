# Helpers for the workflow/rules/ files: functions and constants only, no rules here
# (`snakemake --lint` wants the two apart; its check is a regex, so no line here may hold
# the word "rule", a space and later a colon). No torch import: parse time stays fast.
import functools
import json
import re
import shlex
from pathlib import Path

from geoanatomy.config import job_spec, pack_of, pack_slots, prune_window, train_packs
from geoanatomy.cost import job_resources
from geoanatomy.cost import pack_group as cost_pack_group
from geoanatomy.spec import parse_mixture_name, parse_run_name
from geoanatomy.config import pythia as pythia_settings

# Thread-limiting environment for every job: torch and the BLAS pools under
# numpy/scipy/sklearn get exactly the job's thread count (two jobs that each use
# both cores of a 2-core machine ran 2-10x slower than two one-thread jobs).
THREAD_ENV = (
    "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} "
    "OPENBLAS_NUM_THREADS={threads} NUMEXPR_NUM_THREADS={threads}"
)

# Every rule's conda env (relative to this folder): the repository's environment.yml,
# which ends in `pip install -e .`. Snakemake cannot build it (--sdm conda): conda runs pip
# in the folder of Snakemake's copy of the file, .snakemake/conda/, where there is no
# package; check_deployment() says so at once. docs/running.md ("Conda") has what works:
# create the env once from environment.yml and run snakemake inside it.
CONDA_ENV = "../../environment.yml"


@functools.lru_cache(maxsize=None)
def spec_param(stage, run):
    """The stage's job spec for a run as a shell-quoted JSON string (a Snakemake param:
    changing anything the stage reads reruns exactly the jobs that read it)."""
    return shlex.quote(job_spec(CFG, run, stage).to_json())


def stage_shell(stage):
    """A stage job's shell command: the library's CLI with the job spec and thread
    limits. (The text is part of every job's record: a change reruns all jobs.)"""
    return (
        f"{THREAD_ENV} geoanatomy {stage} --spec {{params.spec}} --threads {{threads}}"
        " > {log:q} 2>&1"
    )


def train_json(wildcards):
    """The train.json a run's analysis jobs read: its own, or a mixture unit's mixture's."""
    m = parse_mixture_name(wildcards.run)
    return f"{RESULTS}/{m['parent'] if m else wildcards.run}/train.json"


@functools.lru_cache(maxsize=None)
def _prune_window():
    return prune_window(CFG)


def disk_window(wildcards):
    """Train's input with keep_checkpoints final and max_unpruned_runs J: the pruned.json of
    the run J places earlier in its size (geoanatomy.config.prune_window), so at most J runs
    per size hold their analysis checkpoints. ancient(): only its existence matters, a later
    rewrite never reruns this training."""
    before = _prune_window().get(wildcards.run)
    return [ancient(f"{RESULTS}/{before}/pruned.json")] if before else []


# Training packs (config pack: {train: K}): {pack: its runs}; empty when every run trains alone
TRAIN_PACKS = train_packs(CFG)
_PACK_OF = pack_of(CFG)


def train_pack_record(wildcards):
    """Train's input when the run is in a pack: the pack's record (rule train_pack trained it,
    into the run's own checkpoints/), so the run's own train job only resumes at its last step
    and writes train.json. ancient(): only its existence matters (turning packing on for a
    trained grid retrains and reruns nothing)."""
    p = _PACK_OF.get(wildcards.run)
    return [ancient(f"{RESULTS}/packs/{p}.json")] if p else []


def pack_specs(wildcards):
    """The pack job's --spec arguments, one per run (its train job spec as JSON), as a list:
    the shell quotes each element ({params.specs:q})."""
    return [
        a
        for r in TRAIN_PACKS[wildcards.pack]
        for a in ("--spec", job_spec(CFG, r, "train").to_json())
    ]


def pack_resource(key):
    """A pack job's resource: runtime the sum of its runs' (an upper bound: a pack is never
    slower than its runs one after another on the device it gets, benchmarks/bench_pack.py),
    memory and disk the sum too."""
    return lambda wildcards, attempt: sum(
        _resources("train", r, attempt)[key] for r in TRAIN_PACKS[wildcards.pack]
    )


@functools.lru_cache(maxsize=None)
def _resources(stage, run, attempt):
    return job_resources(
        CFG, stage, run, attempt
    )  # a mixture's job: its proxy run's (cost_name)


@functools.lru_cache(maxsize=None)
def _pack_slots():
    return pack_slots(CFG)


def pack_group(stage):
    """The job's Snakemake group: one per stage for the sizes the SLURM profile packs onto a
    shared GPU (geoanatomy.cost.PACK_SIZES), None (a job of its own) for the others. Only
    cluster runs form groups; the profile's group-components says how many share one GPU.
    """

    def group(wildcards):
        m = parse_mixture_name(wildcards.run)  # a unit takes its mixture's batch
        named = m or parse_run_name(wildcards.run)
        if named is None:
            return None
        slot = _pack_slots().get(m["parent"] if m else wildcards.run, 0)
        return cost_pack_group(stage, named["size"], slot)

    return group


def cluster_resource(stage, key):
    """Rule resource (runtime minutes, mem_mb, disk_mb) scaled by model size, steps and
    checkpoints (geoanatomy.cost; grows with the retry attempt). Used by SLURM, ignored
    by local runs. GPUs are requested only in the SLURM profile (slurm/config.yaml)."""
    return lambda wildcards, attempt: _resources(stage, wildcards.run, attempt)[key]


# ------------------------------------------------------------------ Pythia (pythia.smk)
def pythia_param(kind, name=None):
    """Resolved settings of one Pythia job as a shell-quoted JSON param (a change reruns it)."""
    if kind == "scale":
        spec = pythia_settings.scale_spec(CFG)
    else:
        make = {
            "extract": pythia_settings.extract_spec,
            "events": pythia_settings.events_spec,
        }
        spec = make[kind](CFG, name)
    return shlex.quote(json.dumps(spec, sort_keys=True))


def pythia_shell(kind):
    """A Pythia job's shell command (geoanatomy pythia KIND, see geoanatomy.cli.pythia)."""
    return (
        f"{THREAD_ENV} geoanatomy pythia {kind} --spec {{params.spec}} --threads {{threads}}"
        " > {log:q} 2>&1"
    )


# ------------------------------------------------------------ summary (analysis.smk)
def summary_file(summary_dir, name, caption, category, **labels):
    """An output under results/summary/ flagged for `snakemake --report`, with its caption."""
    return report(
        f"{summary_dir}/{name}",
        caption=f"../report/{caption}.rst",
        category=category,
        labels=labels or None,
    )


def source_version(*parts):
    """A short hash of library source files (folders or files under src/geoanatomy): a param
    that changes when that code changes, so Snakemake reruns the jobs that use it."""
    import hashlib

    import geoanatomy

    root = Path(geoanatomy.__file__).parent
    h = hashlib.sha256()
    for part in parts:
        p = root / part
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            h.update(f.relative_to(root).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:12]


def parent_dir(path, up=1):
    """The folder `up` levels above a file (a summary job's --out folder)."""
    return str(Path(path).parents[up - 1])


# ------------------------------------------------------------------ parse-time checks
CONDA_UNSUPPORTED = (
    "--sdm conda (--use-conda) cannot build this workflow's environment: environment.yml "
    "installs this repository with `pip install -e .`, and conda runs that from "
    "Snakemake's copy of the file under .snakemake/conda/, where there is no package. "
    "Create the environment once and run snakemake inside it, without --sdm conda "
    "(docs/running.md, 'Conda'):\n"
    "  conda env create -f environment.yml\n"
    "  conda activate geoanatomy\n"
    "  snakemake --cores 2"
)


def check_deployment(settings):
    """Refuse --sdm conda before Snakemake tries (and fails) to build environment.yml."""
    methods = getattr(settings, "deployment_method", None) or ()
    if any(getattr(m, "name", str(m)).lower() == "conda" for m in methods):
        raise SystemExit(f"geoanatomy: {CONDA_UNSUPPORTED}")


# SLURM profile (slurm/config.yaml): the three site edits, see check_site_edits
SITE_EDITS = (
    "the SLURM profile still holds placeholders ({found}): make the three site edits "
    "in __variables__ at the top of slurm/config.yaml (docs/slurm.md, 'Adapting the "
    "profile') before submitting:\n"
    "  EDIT 1  cpu_partition  partition for CPU jobs (sinfo -s)\n"
    "  EDIT 2  gpu_partition  partition with GPU nodes\n"
    '  EDIT 3  account        your allocation ("" = submit without -A; '
    "sacctmgr show assoc user=$USER format=account)"
)


def _resource_texts(resources):
    """The values of a resource mapping as given on the command line or in a profile
    (Resource.raw: the unevaluated expression; set-resources values are functions)."""
    if not resources:
        return []
    texts = []
    for value in resources.values():
        if hasattr(value, "raw"):  # snakemake.resources.Resource
            texts.append(str(value.raw))
        elif hasattr(value, "values"):  # set-resources: one mapping per rule
            texts += _resource_texts(value)
        else:
            texts.append(str(value))
    return texts


def check_site_edits(settings):
    """Stop at parse time, before anything reaches sbatch, when the resources (from the
    SLURM profile's default-resources and set-resources) hold an EDIT_ME_ placeholder.
    """
    if settings is None:
        return
    texts = _resource_texts(getattr(settings, "default_resources", None))
    texts += _resource_texts(getattr(settings, "overwrite_resources", None))
    found = sorted(set(re.findall(r"EDIT_ME_\w+", " ".join(texts))))
    if found:
        raise SystemExit(f"geoanatomy: {SITE_EDITS.format(found=', '.join(found))}")


check_deployment(getattr(workflow, "deployment_settings", None))
check_site_edits(getattr(workflow, "resource_settings", None))


def prune_readers(table):
    """The tables that must exist before a training run's checkpoints go: its own, or those
    of every unit of a mixture (the units read the mixture's checkpoints)."""

    def files(wildcards):
        units = (
            mixture_unit_names(CFG, wildcards.run)
            if wildcards.run in MIXTURES
            else [wildcards.run]
        )
        return [f"{RESULTS}/{u}/{table}" for u in units]

    return files
