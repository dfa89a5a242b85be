"""The prune stage: once every stage that reads a run's analysis checkpoints has finished
(metrics, measures, probes), remove them and keep only what a later user needs ->
``results/{run}/pruned.json`` (what was removed, bytes freed).

Kept: the newest checkpoint's weights, the resume state (``optim.safetensors``, which also
holds the exact float32 weights when the checkpoints are compact) and the training log; the
previous resume state (``optim.prev.safetensors``) goes with the weights it belongs to. On
by the config's ``keep_checkpoints: final`` (the paper grid: the analysis checkpoints of
the large sizes are most of its disk); ``all`` (default) keeps every checkpoint and never
runs this stage.

Pruning never makes Snakemake retrain: ``train.json`` stays. A stage that needs the removed
checkpoints again (its settings changed) stops with an error naming the run and the fix;
retraining (``snakemake --forcerun train``) rebuilds them bit for bit (training is
deterministic) and the trainer, finding ``pruned.json``, starts afresh instead of resuming.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..files import atomic_write_json
from ..spec import JobSpec, RunSpec, combination_name
from .common import run_record

READERS = ("metrics.csv", "measures.csv", "probes.csv")      # the tables read from the analysis checkpoints


def unread(spec: RunSpec, run_dir: Path) -> list[str]:
    """The reader tables of the run (of each unit, for a mixture: its units read its
    checkpoints) that are missing or not complete (their manifest check fails)."""
    from ..manifest import ManifestError, read_checked
    folders = ([run_dir / combination_name(c["task"], c["level"], c.get("control", ""))
                for c in spec.mixture.get("components", [])] if spec.mixture else [run_dir])
    out = []
    for d in folders:
        for t in READERS:
            try:
                read_checked(d / t, "")
            except (ManifestError, OSError):
                out.append(str(d / t))
    return out


def run(spec: RunSpec, run_dir: str | Path, keep_checkpoints: str | None = None, log=print) -> dict:
    """Remove the run's analysis checkpoints except the newest; write ``pruned.json``. Refused
    (nothing removed) unless the config asks for it (``keep_checkpoints: final``) and every
    reader of the checkpoints has finished (``READERS``, complete by their manifests): pruning
    by hand before metrics once removed 16 of 17 checkpoints and left a run whose later errors
    said its stages had finished."""
    from ..checkpoints import OPTIM_PREV, checkpoint_dir, ckpt_path, list_checkpoints, pruned_record
    run_dir = Path(run_dir)
    if keep_checkpoints != "final":
        raise ConfigError(f"prune {spec.name}: the config keeps every checkpoint (keep_checkpoints:"
                          f" {keep_checkpoints!r}); pruning runs only with keep_checkpoints: final. Nothing removed")
    missing = unread(spec, run_dir)
    if missing:
        raise ConfigError(f"prune {spec.name}: the stages that read the analysis checkpoints have not finished:"
                          f" {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''} missing or incomplete;"
                          " run them first (snakemake does). Nothing removed")
    rec = run_record(spec, run_dir)          # the checkpoints belong to this run and settings
    ckdir = checkpoint_dir(run_dir)
    steps = list_checkpoints(ckdir)
    keep = steps[-1:]
    removed, freed = [], 0
    # the record first: a kill halfway leaves a run that says it is (partly) pruned
    out = {"run": spec.name, "settings_hash": rec["settings_hash"], "kept_steps": keep,
           "removed_steps": steps[:-1], "reason": "keep_checkpoints: final; metrics, measures and "
           "probes of this run had finished"}
    atomic_write_json(pruned_record(run_dir), {**out, "complete": False})
    for s in steps[:-1]:
        p = ckpt_path(ckdir, s)
        freed += p.stat().st_size
        p.unlink()
        removed.append(s)
    prev = ckdir / OPTIM_PREV                # the state before the newest: its weights are gone now
    if prev.exists():
        freed += prev.stat().st_size
        prev.unlink()
    out.update(complete=True, bytes_freed=freed)
    atomic_write_json(pruned_record(run_dir), out)
    log(f"[prune] {spec.name}: removed {len(removed)} analysis checkpoints ({freed / 1e6:.1f} MB); "
        f"kept step {keep}, the resume state and the training log")
    return out


def run_job(job: JobSpec, threads: int = 1) -> dict:
    """The stage's job as the rule passes it (``geoanatomy prune --spec``): its run, folder,
    device and the config blocks it reads (``config.jobs.STAGE_BLOCKS``)."""
    return run(job.run, job.run_dir, job.blocks.get("keep_checkpoints"))
