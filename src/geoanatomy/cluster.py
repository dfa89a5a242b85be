"""Cluster resources per job (wall time, memory, checkpoint disk) from the model size and
the configured steps and checkpoints. Torch-free: imported at Snakefile parse time and
evaluated once per job when the DAG is built (every SLURM job re-parses the Snakefile).

Used by the rules' ``resources:`` (workflow/rules/common.smk) and by the README's cost
table. Which jobs get a GPU is decided only in the SLURM profile (slurm/config.yaml:
set-resources ``gpu`` for train and metrics, by size); ``GPU_SIZES`` here must name the
same sizes (tests/test_slurm.py checks it) so that wall times are estimated for the
device the job will have. With ``device: cpu`` in the config every estimate is for CPU.

Cost model (all FLOP counts are matmul multiply-adds x 2; T = model input positions)::

    forward FLOPs per token  f = L (24 d^2 + 4 T d) + 2 V d      (QKV+proj+MLP, QK^T+AV, LM head)
    train step               3 f B T                               (backward = 2 x forward)
    metrics checkpoint       f N T + 4 (L + 2) * 4 N d min(N, d)   (forward + 4 SVDs per layer)

    seconds(CPU) = FLOPs / CPU_GFLOPS[size]   (1 thread, measured: benchmarks/bench_step_time.py;
                                               medium..xlarge extrapolated at small's rate)
    seconds(GPU) = max(GPU floor per step, FLOPs / (GPU_PEAK_TFLOPS x GPU_UTIL))   (assumed)

    wall time = SAFETY x (startup + steps x step + checkpoints x per-checkpoint) x attempt

so a job killed for time is retried (profile ``retries``) with a longer limit.
"""
from __future__ import annotations

import math
from functools import lru_cache

from .sizes import SIZES

VOCAB = 32

# Sizes whose train and metrics jobs get a GPU in slurm/config.yaml (set-resources gpu).
GPU_SIZES = ("medium", "large", "xlarge")

# Effective FLOP/s of one CPU thread (CPU seconds, not wall: the machine was shared),
# measured with benchmarks/bench_step_time.py: batch 64, cmp L3 (19 positions), eval N=200,
# torch 2.13 CPU, x86-64 VM. Small models are overhead-bound, so the rate grows with
# size; sizes not measured (medium, large, xlarge) use the largest measured rate, i.e.
# their times are extrapolated from small's by FLOPs.
CPU_GFLOPS = {"nano": 29.6, "micro": 40.4, "small": 41.1}        # training step
CPU_EVAL_GFLOPS = {"nano": 18.8, "micro": 26.8, "small": 32.9}   # metrics checkpoint

# GPU assumptions (not measured here: this machine has none). FP32 matmuls (the trainer
# does not enable TF32 or mixed precision): an A100's 19.5 TFLOP/s FP32 peak at 30%
# utilisation; tiny batches are launch-bound, so a step never takes less than
# 4 ms + 0.6 ms per layer (kernel launches forward + backward + AdamW + one sync).
GPU_PEAK_TFLOPS = 19.5
GPU_UTIL = 0.30
GPU_STEP_FLOOR_S = (0.004, 0.0006)     # (fixed, per layer)
GPU_EVAL_FLOOR_S = (0.05, 0.01)        # metrics checkpoint: forward + 4 SVDs per layer

SAFETY = 2.0              # requested wall time = SAFETY x estimate (x attempt on retries)
STARTUP_S = 120           # python + torch import, model build, (CUDA init), scheduling slack
MIN_RUNTIME_MIN = 15
EVENTS_RUNTIME_MIN = 15
BASE_MEM_MB = 1500        # python + torch + numpy/pandas resident
CUDA_MEM_MB = 3000        # extra host memory of a CUDA process (driver, cuBLAS/cuDNN)
TRAIN_BYTES_PER_PARAM = 32  # weights + grads + AdamW m, v (16 B) + checkpoint serialisation copies
EVAL_BYTES_PER_PARAM = 8


def n_params(size: str, vocab: int = VOCAB, block_size: int = 64) -> int:
    """Parameter count, as geoanatomy.model.count_params: L(12d^2 + 13d) + 2d + (V + T)d."""
    L, d, _ = SIZES[size]
    return L * (12 * d * d + 13 * d) + 2 * d + (vocab + block_size) * d


def forward_flops_per_token(size: str, positions: int, vocab: int = VOCAB) -> float:
    L, d, _ = SIZES[size]
    return L * (24 * d * d + 4 * positions * d) + 2 * vocab * d


def train_step_flops(size: str, batch: int, positions: int) -> float:
    """FLOPs of one training step: 3 x forward over batch x positions tokens."""
    return 3.0 * forward_flops_per_token(size, positions) * batch * positions


def eval_checkpoint_flops(size: str, n: int, positions: int) -> float:
    """FLOPs of one metrics checkpoint: forward over n sequences + 4 SVDs (N x d) per layer."""
    L, d, _ = SIZES[size]
    return forward_flops_per_token(size, positions) * n * positions + 4 * (L + 2) * 4 * n * d * min(n, d)


def _cpu_rate(table: dict, size: str) -> float:
    if size in table:
        return table[size] * 1e9
    return max(table.values()) * 1e9


def step_seconds(size: str, batch: int, positions: int, device: str) -> float:
    f = train_step_flops(size, batch, positions)
    if device == "gpu":
        L = SIZES[size][0]
        return max(GPU_STEP_FLOOR_S[0] + GPU_STEP_FLOOR_S[1] * L, f / (GPU_PEAK_TFLOPS * 1e12 * GPU_UTIL))
    return f / _cpu_rate(CPU_GFLOPS, size)


def eval_seconds(size: str, n: int, positions: int, device: str) -> float:
    f = eval_checkpoint_flops(size, n, positions)
    if device == "gpu":
        L = SIZES[size][0]
        return max(GPU_EVAL_FLOOR_S[0] + GPU_EVAL_FLOOR_S[1] * L, f / (GPU_PEAK_TFLOPS * 1e12 * GPU_UTIL))
    return f / _cpu_rate(CPU_EVAL_GFLOPS, size)


def job_device(cfg: dict, size: str) -> str:
    """'gpu' when the profile gives this size a GPU and the config lets torch use it."""
    return "gpu" if size in GPU_SIZES and cfg.get("device", "auto") != "cpu" else "cpu"


# Caches keyed by id(config): the Snakefile's CFG is built once and never mutated.
_CFGS: dict[int, dict] = {}                 # holds each config, so its id stays unique
_SHAPES: dict[tuple[int, str], dict] = {}


@lru_cache(maxsize=None)
def _n_checkpoints(steps: int, n_log: int, log_end: float, n_uniform: int) -> int:
    from .schedule import checkpoint_steps
    return len(checkpoint_steps(steps, n_log, log_end, n_uniform))


def run_shape(cfg: dict, run: str) -> dict:
    """Steps, checkpoints, batch, input positions and eval samples of one run (torch-free).

    Cached per (config object, run): it is asked for every job while the DAG is built."""
    key = (id(cfg), run)
    if key in _SHAPES:
        return _SHAPES[key]
    from .config import level_params, train_settings
    from .tasks import make_task
    task, level, size = run.split("_")
    tr = train_settings(cfg, size)
    ck = tr["checkpoints"]
    shape = {"size": size, "steps": int(tr["steps"]), "batch": int(tr["batch_size"]),
             "checkpoints": _n_checkpoints(int(tr["steps"]), int(ck["n_log"]), float(ck["log_end"]),
                                           int(ck["n_uniform"])),
             "positions": make_task(task, level, level_params(cfg, task, level)).seq_len - 1,
             "eval_n": int(cfg["eval"]["n_samples"])}
    _CFGS.setdefault(id(cfg), cfg)
    _SHAPES[key] = shape
    return shape


def estimate_seconds(cfg: dict, stage: str, run: str) -> float:
    """Expected wall seconds of one job (before SAFETY and retries)."""
    s = run_shape(cfg, run)
    dev = job_device(cfg, s["size"])
    ev = eval_seconds(s["size"], s["eval_n"], s["positions"], dev)
    if stage == "train":   # + a quick eval (forward + one SVD) and a weights/optimizer save per checkpoint
        save = 16 * n_params(s["size"]) / 200e6            # 16 B/param at >= 200 MB/s
        return STARTUP_S + s["steps"] * step_seconds(s["size"], s["batch"], s["positions"], dev) \
            + s["checkpoints"] * (ev / 4 + save)
    if stage == "metrics":
        load = 4 * n_params(s["size"]) / 200e6
        return STARTUP_S + s["checkpoints"] * (ev + load)
    if stage == "events":
        return STARTUP_S
    raise ValueError(f"unknown stage {stage!r}; expected train, metrics or events")


@lru_cache(maxsize=None)
def _resources(cfg_key: int, stage: str, run: str, attempt: int) -> dict:
    cfg = _CFGS[cfg_key]
    size = run.rsplit("_", 1)[-1]
    gpu = job_device(cfg, size) == "gpu" and stage in ("train", "metrics")
    if stage == "events":
        minutes = EVENTS_RUNTIME_MIN
        mem = BASE_MEM_MB
    else:
        minutes = max(MIN_RUNTIME_MIN, math.ceil(SAFETY * estimate_seconds(cfg, stage, run) / 60))
        per_param = TRAIN_BYTES_PER_PARAM if stage == "train" else EVAL_BYTES_PER_PARAM
        mem = BASE_MEM_MB + math.ceil(per_param * n_params(size) / 1e6) + (CUDA_MEM_MB if gpu else 0)
    out = {"runtime": minutes * attempt, "mem_mb": int(mem * (1 + 0.5 * (attempt - 1)))}
    if stage == "train":
        out["disk_mb"] = checkpoint_disk_mb(cfg, run)
    return out


def job_resources(cfg: dict, stage: str, run: str, attempt: int = 1) -> dict:
    """{'runtime': minutes, 'mem_mb': MB[, 'disk_mb': checkpoint MB]} for a rule's resources.

    runtime and mem_mb grow with the retry ``attempt`` (x attempt, +50% per retry)."""
    _CFGS.setdefault(id(cfg), cfg)
    return _resources(id(cfg), stage, run, int(attempt))


def checkpoint_disk_mb(cfg: dict, run: str) -> int:
    """Disk a run's checkpoints/ take: float32 weights per checkpoint + AdamW state (m, v)."""
    s = run_shape(cfg, run)
    n = n_params(s["size"])
    return math.ceil((s["checkpoints"] * 4 * n + 8 * n) / 1e6)


def cost_table(cfg: dict) -> list[dict]:
    """Per size in the grid: runs, steps, checkpoints, CPU and GPU hours, checkpoint disk.

    CPU hours: 1 thread, train + metrics, for every size (even those the profile sends to
    a GPU); GPU hours: train + metrics under the GPU assumptions above, for GPU_SIZES only.
    """
    from .config import run_names
    rows = []
    by_size: dict[str, list[str]] = {}
    for run in run_names(cfg):
        by_size.setdefault(run.rsplit("_", 1)[-1], []).append(run)
    for size in SIZES:
        runs = by_size.get(size)
        if not runs:
            continue
        cpu_s = gpu_s = disk = 0.0
        shapes = [run_shape(cfg, r) for r in runs]
        for s in shapes:
            for dev in ("cpu", "gpu"):
                t = s["steps"] * step_seconds(size, s["batch"], s["positions"], dev) \
                    + s["checkpoints"] * eval_seconds(size, s["eval_n"], s["positions"], dev) * 1.25
                if dev == "cpu":
                    cpu_s += t
                else:
                    gpu_s += t
            disk += 4 * n_params(size) * s["checkpoints"] + 8 * n_params(size)
        s0 = shapes[0]
        rows.append({
            "size": size, "n_params": n_params(size), "runs": len(runs),
            "steps": sorted({s["steps"] for s in shapes}), "checkpoints": sorted({s["checkpoints"] for s in shapes}),
            "cpu_s_per_step_ref": step_seconds(size, 64, 19, "cpu"),
            "measured": size in CPU_GFLOPS,
            "gpu_s_per_step_ref": step_seconds(size, 64, 19, "gpu"),
            "cpu_hours_per_run": cpu_s / len(runs) / 3600, "gpu_hours_per_run": gpu_s / len(runs) / 3600,
            "cpu_hours": cpu_s / 3600, "gpu_hours": gpu_s / 3600,
            "device": "gpu" if size in GPU_SIZES else "cpu",
            "disk_gb_per_run": disk / len(runs) / 1e9, "disk_gb": disk / 1e9,
            "mean_positions": sum(s["positions"] for s in shapes) / len(shapes), "batch": s0["batch"],
        })
    return rows


def cost_table_markdown(cfg: dict) -> str:
    rows = cost_table(cfg)
    out = ["| size | params | runs | steps | checkpoints | CPU s/step (1 thread) | CPU h/run | "
           "GPU s/step (assumed) | GPU h/run | checkpoints GB/run | runs on | grid total |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    tot_cpu = tot_gpu = tot_disk = 0.0
    for r in rows:
        on_gpu = r["device"] == "gpu"
        total = f"{r['gpu_hours']:.1f} GPU-h" if on_gpu else f"{r['cpu_hours']:.1f} CPU-h"
        tot_gpu += r["gpu_hours"] if on_gpu else 0
        tot_cpu += 0 if on_gpu else r["cpu_hours"]
        tot_disk += r["disk_gb"]
        out.append(
            f"| {r['size']} | {r['n_params'] / 1e6:.2f}M | {r['runs']} | {'/'.join(map(str, r['steps']))} | "
            f"{'/'.join(map(str, r['checkpoints']))} | {r['cpu_s_per_step_ref']:.3f} "
            f"({'measured' if r['measured'] else 'extrapolated'}) | {r['cpu_hours_per_run']:.1f} | "
            f"{r['gpu_s_per_step_ref']:.3f} | {r['gpu_hours_per_run']:.2f} | {r['disk_gb_per_run']:.1f} | "
            f"{r['device'].upper()} | {total} |")
    out.append(f"| **all** | | {sum(r['runs'] for r in rows)} | | | | | | | {tot_disk:.0f} GB in all | | "
               f"{tot_cpu:.0f} CPU-h + {tot_gpu:.0f} GPU-h |")
    return "\n".join(out)
