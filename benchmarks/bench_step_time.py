"""Measure CPU seconds per training step and per metrics checkpoint, for the cost table.

    OMP_NUM_THREADS=1 python benchmarks/bench_step_time.py                 # nano micro small
    OMP_NUM_THREADS=1 python benchmarks/bench_step_time.py --sizes nano --steps 30 --json out.json

What one "step" is here: exactly the trainer's update (geoanatomy.train): a batch of
``--batch`` task sequences, forward, answer-token cross-entropy, backward, global
grad-norm clip, AdamW step. Task ``cmp L3`` (sequence 20 tokens, 19 input positions)
stands for the grid's typical length (the default levels span 8..34 tokens).
"One metrics checkpoint" is ``geoanatomy.extract.measure_checkpoint`` on ``--eval-n``
held-out sequences: forward with all hidden states, float64 behaviour measures and
RankMe (uncentred + centred) at two positions of every layer.

Timings are CPU seconds of this process (``time.process_time``: on a shared machine
wall time also counts other jobs' turns; both are stored), medians over ``--repeats``
blocks of ``--steps`` steps after ``--warmup`` steps, on ``--threads`` torch/BLAS threads. The FLOP counts are
analytic (below); the
effective FLOP/s they imply is what ``geoanatomy.cluster`` uses to extrapolate to the
sizes too slow to time here (medium, large, xlarge).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))



def training_step(task: str, level: str, size: str, batch: int):
    """A training step of the trainer's own loop on a default-settings run (same model init,
    batches, AdamW, clipping, loss read every step): (step(i), model, data, T input positions).
    Shared by the benchmarks that time training."""
    import torch

    from geoanatomy.defaults import DEFAULTS
    from geoanatomy.model import answer_loss
    from geoanatomy.spec import RunSpec
    from geoanatomy.stages.common import build
    from geoanatomy.stages.train import make_optimizer
    from geoanatomy.tasks import DEFAULT_LEVELS

    tr = dict(DEFAULTS["train"], batch_size=batch)
    spec = RunSpec(task=task, level=level, size=size, level_params=dict(DEFAULT_LEVELS[task][level]), train=tr,
                   data=dict(DEFAULTS["data"]), seed=0, block_size=64, eval=dict(DEFAULTS["eval"]))
    model, data = build(spec, "cpu")
    opt = make_optimizer(model, tr)
    na = data.spec.n_answer
    batches = [torch.as_tensor(data.train_batch(i, batch)) for i in range(8)]  # (B, S)

    def step(i: int) -> None:
        loss = answer_loss(model, batches[i % len(batches)], na)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tr["grad_clip"])
        opt.step()
        loss.item()                                             # the trainer reads it every step

    return step, model, data, data.spec.seq_len - 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", default=["nano", "micro", "small"])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--task", default="cmp")
    ap.add_argument("--level", default="L3")
    ap.add_argument("--steps", type=int, default=20, help="steps per timed block")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--eval-n", type=int, default=200, help="evaluation samples per metrics checkpoint")
    ap.add_argument("--eval-repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--expensive", action="store_true",
                    help="also time the expensive measures and probes per unit (HVP iteration, SGLD "
                         "step, per-sample-gradient ranks, one logistic-regression probe fit)")
    ap.add_argument("--hess-batch", type=int, default=200)
    ap.add_argument("--hess-iters", type=int, default=3)
    ap.add_argument("--sgld-steps", type=int, default=10)
    ap.add_argument("--probe-n", type=int, default=200)
    ap.add_argument("--table", metavar="CONFIG", help="print the cost table of docs/slurm.md for this config and exit")
    args = ap.parse_args(argv)
    if args.table:
        from geoanatomy.config import load_config
        from geoanatomy.report.cost import cost_table_markdown
        print(cost_table_markdown(load_config(args.table)))
        return 0

    from geoanatomy.runtime import limit_threads
    limit_threads(args.threads)
    import torch

    from geoanatomy.cost import train_step_flops, eval_checkpoint_flops, n_params
    from geoanatomy.tasks import VOCAB_SIZE
    from geoanatomy.stages.metrics import measure_checkpoint

    rows = []
    for size in args.sizes:
        step, model, data, T = training_step(args.task, args.level, size, args.batch)
        S = T + 1
        model.train()
        for i in range(args.warmup):
            step(i)
        blocks, walls = [], []
        for _ in range(args.repeats):
            c0, t0 = time.process_time(), time.perf_counter()
            for i in range(args.steps):
                step(i)
            blocks.append((time.process_time() - c0) / args.steps)
            walls.append((time.perf_counter() - t0) / args.steps)
        s_step = statistics.median(blocks)

        seq = torch.as_tensor(data.eval_set(min(args.eval_n, data.n_heldout)))   # (N, S)
        measure_checkpoint(model, seq, data.spec.n_answer)       # warm-up
        ev = []
        for _ in range(args.eval_repeats):
            c0 = time.process_time()
            measure_checkpoint(model, seq, data.spec.n_answer)
            ev.append(time.process_time() - c0)
        s_eval = statistics.median(ev)

        if args.expensive:
            extra = _time_expensive(model, data, size, args)
        f_step = train_step_flops(size, args.batch, T)
        f_eval = eval_checkpoint_flops(size, seq.shape[0], T)
        rows.append({
            "size": size, "n_params": n_params(size, VOCAB_SIZE), "batch": args.batch, "seq_len": S, "positions": T,
            "threads": torch.get_num_threads(), "sec_per_step": round(s_step, 5),
            "steps_per_sec": round(1 / s_step, 2), "train_gflop_per_step": round(f_step / 1e9, 3),
            "effective_gflops": round(f_step / s_step / 1e9, 2),
            "eval_n": int(seq.shape[0]), "sec_per_metrics_checkpoint": round(s_eval, 4),
            "eval_gflop_per_checkpoint": round(f_eval / 1e9, 3),
            **(extra if args.expensive else {}),
            "cpu_s_per_step_blocks": [round(b, 5) for b in blocks],
            "wall_s_per_step_blocks": [round(b, 5) for b in walls],
        })
        r = rows[-1]
        print(f"{size:>6}: {r['n_params'] / 1e6:6.2f}M params  {r['sec_per_step'] * 1e3:8.1f} CPU ms/step "
              f"({r['steps_per_sec']:.1f} steps/s, {r['effective_gflops']:.1f} GFLOP/s effective)  "
              f"metrics {r['sec_per_metrics_checkpoint'] * 1e3:7.1f} CPU ms/checkpoint (N={r['eval_n']})",
              flush=True)
        if args.expensive:
            print("        " + ", ".join(f"{k} {v}" for k, v in extra.items()), flush=True)
        del model

    out = {"what": "CPU seconds per training step (batch, task below) and per metrics checkpoint",
           "task": f"{args.task} {args.level}", "torch": torch.__version__,
           "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
           "note": "CPU seconds of this process (process_time), median of blocks; "
                   "wall_s_per_step_blocks also counts other processes' turns on a shared machine",
           "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


def _time_expensive(model, data, size: str, args) -> dict:
    """CPU seconds per unit of the expensive measures and of one probe fit, plus the
    effective GFLOP/s each implies (geoanatomy.cluster's FLOP counts)."""
    import torch

    from geoanatomy.cost import grad_rank_flops, hvp_flops, sgld_step_flops
    from geoanatomy.config import DEFAULTS, deep_merge
    from geoanatomy.stages.measures import measure_checkpoint, train_sample
    from geoanatomy.stages.probes import probe_checkpoint, split_indices

    na, T = data.spec.n_answer, data.spec.seq_len - 1
    cfg = deep_merge(DEFAULTS["measures"], {"hessian": {"batch_size": args.hess_batch, "max_iter": args.hess_iters,
                                                        "tol": 1e-12},
                   "llc": {"chains": 1, "draws": args.sgld_steps, "burnin": 0, "n_data": 1024, "batch_size": 32,
                           "eps": 1e-3, "gamma": 0.0, "n_beta": 30.0},
                   "grad_rank": {"n_samples": 200, "method": "vmap", "max_mbytes": 1024}})
    pools = {"grad_rank": torch.as_tensor(train_sample(data, 200, "grad_rank")),
             "hessian": torch.as_tensor(train_sample(data, args.hess_batch, "hessian")),
             "llc": torch.as_tensor(train_sample(data, 1024, "llc"))}
    timings: dict = {}
    measure_checkpoint(model, pools, na, cfg, {"hessian": 0, "llc": 0}, timings=timings)
    h_s = timings["hessian"] / args.hess_iters
    s_s = timings["llc"] / args.sgld_steps
    g_s = timings["grad_rank"]
    seq = torch.as_tensor(data.eval_set(min(args.probe_n, data.n_heldout)))
    tr, te = split_indices(seq.shape[0], 0.5, 0)
    c0 = time.process_time()
    rows = probe_checkpoint(model, seq, data.spec.first_answer_pred_pos, na, tr, te, "all")
    fits = len({(r["layer"], r["position"]) for r in rows if r["position"] != "answer_mean"})
    p_s = (time.process_time() - c0) / fits
    return {"hvp_s": round(h_s, 4), "hvp_gflops": round(hvp_flops(size, args.hess_batch, T) / h_s / 1e9, 2),
            "sgld_step_s": round(s_s, 4), "sgld_gflops": round(sgld_step_flops(size, 32, T) / s_s / 1e9, 2),
            "grad_rank_s": round(g_s, 3), "grad_rank_gflops": round(grad_rank_flops(size, 200, T) / g_s / 1e9, 2),
            "probe_fit_s": round(p_s, 4), "probe_fits": fits, "hess_batch": args.hess_batch}


if __name__ == "__main__":
    sys.exit(main())
