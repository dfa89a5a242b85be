"""Machine rate model (torch-free, below the cost model and the measure registry): FLOPs of
each operation of a run (training step, metrics checkpoint, Hessian-vector product, SGLD
step, per-sample gradients) and its seconds on one CPU thread or a GPU. The formulas are
written out in ``geoanatomy.cost``'s docstring; ``cost`` turns them into job resources, and
each ``measures.registry`` entry into its cost per checkpoint."""
from __future__ import annotations

from .sizes import SIZES, n_params
from .tasks import VOCAB_SIZE

VOCAB = VOCAB_SIZE

# Effective FLOP/s of one CPU thread (CPU seconds, not wall: the machine was shared),
# measured with benchmarks/bench_step_time.py --expensive: batch 64, cmp L3 (19
# positions), eval N=200, Hessian batch 200, SGLD batch 32, 200 gradient samples; torch
# 2.13 CPU on an x86-64 VM. Small models are overhead-bound, so rates grow with size;
# unmeasured sizes (medium, large, xlarge) use the largest measured rate.
CPU_GFLOPS = {
    "train": {"nano": 29.6, "micro": 40.4, "small": 41.1},
    "eval": {"nano": 18.8, "micro": 26.8, "small": 32.9},       # metrics checkpoint
    "hvp": {"nano": 29.8, "micro": 32.3, "small": 33.0},
    "sgld": {"nano": 16.1, "micro": 16.8, "small": 18.2},
    "grad_rank": {"nano": 15.0, "micro": 13.1, "small": 14.1},
}


def probe_fit_seconds(d: int) -> float:
    """CPU seconds of one logistic-regression probe (100 train examples, d features):
    measured 0.09 s at d=192 and 0.15 s at d=256; linear in d beyond, at least 0.1 s."""
    return max(0.1, 0.15 * d / 256)


# GPU assumptions (this machine has none, so nothing here is measured): FP32 matmuls
# (the code enables neither TF32 nor mixed precision) on an A100-class GPU, 19.5 TFLOP/s
# FP32 peak at 30% utilisation; small batches are launch-bound, so an operation never
# takes less than its floor: a training step 4 ms + 0.6 ms per layer (kernel launches
# forward + backward + AdamW + one host sync); an HVP 3 steps; a metrics checkpoint
# 50 ms + 10 ms per layer (float64 SVDs); gradient ranks 20 steps.
GPU_PEAK_TFLOPS = 19.5
GPU_UTIL = 0.30
GPU_STEP_FLOOR_S = (0.004, 0.0006)
GPU_FLOOR_STEPS = {"train": 1, "sgld": 1, "hvp": 3, "grad_rank": 20}
GPU_EVAL_FLOOR_S = (0.05, 0.01)


# ------------------------------------------------------------------ FLOP counts
def forward_flops_per_token(size: str, positions: int, vocab: int = VOCAB) -> float:
    L, d, _ = SIZES[size]
    return L * (24 * d * d + 4 * positions * d) + 2 * vocab * d


def train_step_flops(size: str, batch: int, positions: int) -> float:
    """FLOPs of one training step: 3 x forward over batch x positions tokens."""
    return 3.0 * forward_flops_per_token(size, positions) * batch * positions


def hvp_flops(size: str, batch: int, positions: int) -> float:
    """One Hessian-vector product by double backward: ~2 x a training step's FLOPs."""
    return 2.0 * train_step_flops(size, batch, positions)


def sgld_step_flops(size: str, batch: int, positions: int) -> float:
    """One SGLD step: forward + backward on a minibatch (as a training step)."""
    return train_step_flops(size, batch, positions)


def grad_rank_flops(size: str, n: int, positions: int) -> float:
    """Per-sample gradients of n examples + their Gram matrix (n x n over all P parameters)."""
    return train_step_flops(size, n, positions) + 2.0 * n * n * n_params(size, VOCAB_SIZE)


def eval_checkpoint_flops(size: str, n: int, positions: int) -> float:
    """FLOPs of one metrics checkpoint: forward over n sequences + 4 SVDs (n x d) per layer."""
    L, d, _ = SIZES[size]
    return forward_flops_per_token(size, positions) * n * positions + 4 * (L + 2) * 4 * n * d * min(n, d)


# --------------------------------------------------------------------- seconds
def _cpu_rate(kind: str, size: str) -> float:
    table = CPU_GFLOPS[kind]
    return (table[size] if size in table else max(table.values())) * 1e9


def op_seconds(kind: str, size: str, flops: float, device: str) -> float:
    """Seconds of one operation of ``kind`` (train, eval, hvp, sgld, grad_rank) on a device
    ("cpu", "gpu", or "gpu_compute": the GPU's arithmetic alone, without the launch floor,
    the part of a job that jobs packed onto one GPU cannot overlap)."""
    if device == "gpu_compute":
        return flops / (GPU_PEAK_TFLOPS * 1e12 * GPU_UTIL)
    if device == "gpu":
        L = SIZES[size][0]
        if kind == "eval":
            floor = GPU_EVAL_FLOOR_S[0] + GPU_EVAL_FLOOR_S[1] * L
        else:
            floor = GPU_FLOOR_STEPS[kind] * (GPU_STEP_FLOOR_S[0] + GPU_STEP_FLOOR_S[1] * L)
        return max(floor, flops / (GPU_PEAK_TFLOPS * 1e12 * GPU_UTIL))
    return flops / _cpu_rate(kind, size)


def step_seconds(size: str, batch: int, positions: int, device: str) -> float:
    return op_seconds("train", size, train_step_flops(size, batch, positions), device)


def eval_seconds(size: str, n: int, positions: int, device: str) -> float:
    return op_seconds("eval", size, eval_checkpoint_flops(size, n, positions), device)
