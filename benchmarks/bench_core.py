"""Core-pipeline overheads, measured in one run on one thread.

    python benchmarks/bench_core.py [--run add_L3_nano] [--steps 1500] [--repeats 2]

Prints
  trainer / bare loop   wall time of geoanatomy.stages.train.run (checkpoints, optimizer
                        state, train log, progress-line evaluation) over a bare loop with
                        the same model, batches, optimizer and LR schedule (goal <= 1.10)
  metrics / training    wall time of geoanatomy.stages.metrics.run over all checkpoints,
                        as a fraction of the trainer's time (goal <= 0.25)
The checkpoint schedule is the default config's (config.yaml) unless --steps changes it.
Bare loop and trainer run alternately ``--repeats`` times and each keeps its fastest run (a
shared machine's drift between two single runs moved the ratio by +-0.03).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", default="add_L3_nano")
    ap.add_argument("--steps", type=int, default=None, help="default: config.yaml's steps for that size")
    ap.add_argument("--repeats", type=int, default=2, help="alternating runs of each; the fastest counts")
    args = ap.parse_args()

    from geoanatomy.runtime import limit_threads
    limit_threads(1)
    import torch

    from geoanatomy.config import load_config, run_spec
    from geoanatomy.model import answer_loss
    from geoanatomy.stages.common import build
    from geoanatomy.stages.metrics import run as metrics_run
    from geoanatomy.schedule import checkpoint_steps, lr_at
    from geoanatomy.stages.train import make_optimizer
    from geoanatomy.stages.train import run as train_run

    task, level, size = args.run.split("_")
    over = {"grid": [{"tasks": [task], "levels": [level], "sizes": [size]}]}
    cfg = load_config(REPO / "config.yaml", overrides=over)
    if args.steps:
        cfg["train"]["steps"] = args.steps
        cfg.get("size_overrides", {}).pop(size, None)
    spec = run_spec(cfg, args.run)
    tr = spec.train
    ck = tr["checkpoints"]
    n_ck = len(checkpoint_steps(tr["steps"], ck["n_log"], ck["log_end"], ck["n_uniform"]))

    def bare_loop() -> float:
        """Same model init, batches, optimizer and schedule; nothing else."""
        model, data = build(spec, "cpu")
        opt = make_optimizer(model, tr)
        na = data.spec.n_answer
        t0 = time.perf_counter()
        for step in range(tr["steps"]):
            for g in opt.param_groups:
                g["lr"] = lr_at(step, tr["lr"], tr["warmup"], tr["steps"], tr["min_lr_frac"])
            seq = torch.as_tensor(data.train_batch(step, tr["batch_size"]))
            loss = answer_loss(model, seq, na)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), tr["grad_clip"])
            opt.step()
        return time.perf_counter() - t0

    bares, trainers = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            bares.append(bare_loop())
            run_dir = Path(tmp) / f"r{r}"
            t0 = time.perf_counter()
            train_run(spec, run_dir, device="cpu", log=lambda m: None)
            trainers.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        metrics_run(spec, run_dir, device="cpu", log=lambda m: None)
        metrics = time.perf_counter() - t0
    bare, trainer = min(bares), min(trainers)

    print(f"run {args.run}: {tr['steps']} steps, batch {tr['batch_size']}, {n_ck} checkpoints, 1 thread, CPU")
    print(f"bare loop      {bare:8.2f} s  ({tr['steps'] / bare:.1f} steps/s; runs "
          f"{', '.join(f'{b:.2f}' for b in bares)})")
    print(f"trainer        {trainer:8.2f} s  (runs {', '.join(f'{t:.2f}' for t in trainers)})")
    print(f"metrics        {metrics:8.2f} s  ({metrics / n_ck * 1000:.0f} ms per checkpoint, "
          f"{spec.eval['n_samples']} samples)")
    r1, r2 = trainer / bare, metrics / trainer
    print(f"trainer / bare loop  = {r1:.3f}   (goal <= 1.10: {'PASS' if r1 <= 1.10 else 'FAIL'})")
    print(f"metrics / training   = {r2:.3f}   (goal <= 0.25: {'PASS' if r2 <= 0.25 else 'FAIL'})")


if __name__ == "__main__":
    main()
