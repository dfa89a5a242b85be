"""The prune stage: once every stage that reads a run's analysis checkpoints has finished
(metrics, measures, probes), remove them and keep only what a later user needs ->
``results/{run}/pruned.json`` (what was removed, bytes freed).

Kept: the newest checkpoint's weights, the resume state (``optim.safetensors``, which also
holds the exact float32 weights when the checkpoints are compact) and the training log. On
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

from ..files import atomic_write_json
from ..spec import RunSpec
from .common import run_record

def run(spec: RunSpec, run_dir: str | Path, log=print) -> dict:
    """Remove the run's analysis checkpoints except the newest; write ``pruned.json``."""
    from ..checkpoints import checkpoint_dir, ckpt_path, list_checkpoints, pruned_record
    run_dir = Path(run_dir)
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
    out.update(complete=True, bytes_freed=freed)
    atomic_write_json(pruned_record(run_dir), out)
    log(f"[prune] {spec.name}: removed {len(removed)} analysis checkpoints ({freed / 1e6:.1f} MB); "
        f"kept step {keep}, the resume state and the training log")
    return out
