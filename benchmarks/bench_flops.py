"""Training FLOP rate against the machine's limit, measured in one run on one thread.

    python benchmarks/bench_flops.py [--task copy --level L3] [--steps 40] [--profile]

Prints, on one CPU thread:
  GEMM rate      fp32 torch.matmul FLOP/s at a large square size (2048^3) and at each model's
                 own shapes (tokens x d @ d x 4d, the MLP's first matrix), best of 5
  model rate     the trainer's FLOP/s at nano, micro and small: steps/s of the bare training
                 loop (same model, batches, AdamW, clipping) x FLOPs per step, where
                 FLOPs per step = 6 x n_params x tokens + 12 x n_layer x T x d x tokens
                 (weights: forward 2, backward 4 per parameter and token; attention scores and
                 mixing: forward 4 T d per layer and token, x3 with the backward)
  ratio          model rate / large-GEMM rate (goal >= 0.5 at small), and / the GEMM rate at
                 the model's own shapes
With --profile, the top operators of a few small training steps by self CPU time (where the
rest of the time goes).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def gemm_rate(m: int, k: int, n: int, reps: int = 5) -> float:
    import torch
    a, b = torch.randn(m, k), torch.randn(k, n)
    torch.matmul(a, b)
    best = float("inf")
    for _ in range(reps):
        iters = max(1, int(2e9 / (2 * m * k * n)))
        t0 = time.perf_counter()
        for _ in range(iters):
            torch.matmul(a, b)
        best = min(best, (time.perf_counter() - t0) / iters)
    return 2 * m * k * n / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="copy")
    ap.add_argument("--level", default="L3")
    ap.add_argument("--steps", type=int, default=40, help="timed steps per size (after 5 warm-up steps)")
    ap.add_argument("--sizes", nargs="+", default=["nano", "micro", "small"])
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    from geoanatomy.runtime import limit_threads
    limit_threads(1)
    import torch

    from bench_step_time import training_step
    from geoanatomy.defaults import DEFAULTS
    from geoanatomy.sizes import SIZES, n_params
    from geoanatomy.tasks import VOCAB_SIZE

    peak = gemm_rate(2048, 2048, 2048)
    print(f"torch {torch.__version__}, 1 thread; fp32 GEMM 2048^3: {peak / 1e9:.1f} GFLOP/s")
    print("| size | params | tokens/step | steps/s | model GFLOP/s | GEMM at model shapes GFLOP/s | "
          "model / large GEMM | model / GEMM at shapes |")
    print("|---|---|---|---|---|---|---|---|")
    tr = dict(DEFAULTS["train"])
    results = {}
    for size in args.sizes:
        step, model, data, T = training_step(args.task, args.level, size, tr["batch_size"])
        B = tr["batch_size"]
        L, d, _ = SIZES[size]

        for i in range(5):
            step(i)
        t0 = time.perf_counter()
        for i in range(args.steps):
            step(i)
        sps = args.steps / (time.perf_counter() - t0)
        P = n_params(size, VOCAB_SIZE)
        flops = 6 * P * B * T + 12 * L * T * d * B * T
        rate = flops * sps
        shape_rate = gemm_rate(B * T, d, 4 * d)
        results[size] = rate / peak
        print(f"| {size} | {P / 1e6:.2f}M | {B * T} | {sps:.2f} | {rate / 1e9:.2f} | {shape_rate / 1e9:.1f} | "
              f"{rate / peak:.3f} | {rate / shape_rate:.3f} |")
        if args.profile and size == args.sizes[-1]:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for i in range(5):
                    step(i)
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    print("ratios (model FLOP rate / fp32 GEMM 2048^3): "
          + ", ".join(f"{s} {r:.3f}" for s, r in results.items())
          + f"   (goal >= 0.5 at small: "
            f"{'not measured' if 'small' not in results else 'PASS' if results['small'] >= 0.5 else 'FAIL'})")


if __name__ == "__main__":
    main()
