"""Cost model: cluster resources per job (wall time, memory, checkpoint disk) from the
model size and the configured steps, checkpoints and measure settings, and the cost table
of a grid. Torch-free: imported at Snakefile parse time and evaluated once per job when
the DAG is built (workflow/rules/common.smk caches the answers per job).

Used by the rules' ``resources:`` (workflow/rules/common.smk ``cluster_resource``) and by
the cost table in docs/slurm.md (``geoanatomy report cost config/paper.yaml``).
Which jobs get a GPU is decided only in the SLURM profile (slurm/config.yaml,
``gpu_sizes``); ``GPU_SIZES`` here must name the same sizes per rule (tests/test_slurm.py
checks it) so that wall times are estimated for the device the job will have. With
``device: cpu`` in the config every estimate is for the CPU.

Cost model (FLOPs = 2 x multiply-adds; T = model input positions, d = width, L = layers,
V = vocabulary, P = parameters)::

    forward FLOPs per token  f = L (24 d^2 + 4 T d) + 2 V d     (QKV+proj+MLP, QK^T+AV, LM head)
    train step (batch B)     3 f B T                              (backward = 2 x forward)
    metrics checkpoint       f N T + 16 (L + 2) N d min(N, d)     (forward + 4 SVDs per layer)
    Hessian-vector product   2 x train step at the Hessian batch  (double backward)
    SGLD step                1 x train step at the LLC batch
    gradient ranks           train step at N samples + 2 N^2 P    (per-sample grads + Gram)
    probe fit                PROBE_FIT_S(d) CPU seconds each, (L + 2) x positions per checkpoint

    seconds(CPU) = FLOPs / rate        (1 thread; rates measured here for nano, micro, small by
                                        benchmarks/bench_step_time.py --expensive; larger sizes
                                        use the largest measured rate: extrapolated by FLOPs)
    seconds(GPU) = max(floor, FLOPs / (GPU_PEAK_TFLOPS x GPU_UTIL))     (assumed, see below)

    wall time = SAFETY x (startup + work) x attempt       (minutes, at least MIN_RUNTIME_MIN)

Each expensive measure's cost per checkpoint is its ``measures.registry`` entry's (from the
operations above), at its worst case (power iteration runs max_iter iterations; every
event neighbourhood adds its own checkpoints), so a job killed for time is rare and comes
back (profile ``retries``) with a longer limit.
"""
from __future__ import annotations

import math
from functools import lru_cache

from .config import eval_settings, level_params, mixture_spec, mixture_unit_names, train_settings, training_runs_by_size
from .measures.registry import MEASURES
from .schedule import checkpoint_steps
from .sizes import SIZES, n_params
from .spec import parse_mixture_name, parse_run_name, run_name
from .tasks import VOCAB_SIZE, make_task
from .throughput import (  # noqa: F401 (the rate model; re-exported for the cost table's users)
    CPU_GFLOPS,
    GPU_EVAL_FLOOR_S,
    GPU_FLOOR_STEPS,
    GPU_PEAK_TFLOPS,
    GPU_STEP_FLOOR_S,
    GPU_UTIL,
    _cpu_rate,
    eval_checkpoint_flops,
    eval_seconds,
    forward_flops_per_token,
    grad_rank_flops,
    hvp_flops,
    op_seconds,
    probe_fit_seconds,
    sgld_step_flops,
    step_seconds,
    train_step_flops,
)

VOCAB = VOCAB_SIZE
STAGES = ("train", "metrics", "measures", "probes", "events")

# Sizes whose jobs get one GPU in slurm/config.yaml (variable gpu_sizes); rules not named
# here (probes: scikit-learn; events; summaries) always run on CPUs.
GPU_SIZES = {
    "train": ("medium", "large", "xlarge"),
    "metrics": ("medium", "large", "xlarge"),
    # Hessian power iteration + SGLD at every checkpoint: ~7 CPU-h per nano run on average
    # and up to ~17 h (copy L3) in the paper grid, so even nano goes to a GPU.
    "measures": ("nano", "micro", "small", "medium", "large", "xlarge"),
}

# GPU jobs of these sizes are launch-bound (the cost model's floor, not the arithmetic, sets
# their time): the profile packs them, gpu_pack_per_gpu at a time, onto one GPU (Snakemake
# group jobs; slurm/config.yaml variable gpu_pack_sizes, which must name the same sizes per
# rule: tests/test_slurm.py checks it). The workflow puts each such job in the group
# pack_group(stage, size); a profile without group-components runs every group as one job.
PACK_SIZES = {"measures": ("nano", "micro", "small")}
GPU_PACK_PER_GPU = 4      # the profile's default gpu_pack_per_gpu (jobs sharing one GPU)
GPU_MEM_MB_PER_GPU = 80_000       # an A100/H100-class GPU, for the memory bound on packing
CUDA_CONTEXT_MB = 600     # GPU memory of a CUDA context and cuBLAS workspace per process


PACK_SLOTS = 128          # group names per stage the profile's group-components lists


def pack_group(stage: str, size: str, slot: int | str = 0) -> str | None:
    """The Snakemake group of a job whose size the profile packs (PACK_SIZES), else None:
    gpupack_<stage>_<slot>, slot the run's batch (config.pack_slots: runs that never wait for
    each other; a mixture unit: its mixture's), so a group never depends on itself. A slot beyond
    the PACK_SLOTS the profile names runs unpacked (correct, only less dense)."""
    return f"gpupack_{stage}_{slot}" if size in PACK_SIZES.get(stage, ()) else None


def gpu_mem_mb(cfg: dict, stage: str, run: str) -> int:
    """GPU memory one job needs (its CUDA context, its weights, gradients and optimizer state,
    and the largest batch of activations it holds), for how many jobs fit on one GPU."""
    s = run_shape(cfg, run)
    size = s["size"]
    P, (L, d, _) = n_params(size, VOCAB_SIZE), SIZES[size]
    batch = s["batch"]
    if stage == "measures":
        m = cfg.get("measures") or {}
        batch = max([batch] + [int((m.get(k) or {}).get("batch_size", 0)) for k in ("hessian", "llc")]
                    + [int((m.get("grad_rank") or {}).get("n_samples", 0))])
    acts = 4 * batch * s["positions"] * (16 * d * L + 2 * VOCAB_SIZE)      # float32, kept for backward
    return math.ceil(CUDA_CONTEXT_MB + (BYTES_PER_PARAM[stage] * P + acts) / 1e6)


def jobs_per_gpu(cfg: dict, stage: str, run: str, per_gpu: int = GPU_PACK_PER_GPU) -> int:
    """Jobs of this kind that share one GPU: the profile's setting, bounded by GPU memory."""
    return max(1, min(per_gpu, GPU_MEM_MB_PER_GPU // max(1, gpu_mem_mb(cfg, stage, run))))


def packed_gpu_seconds(cfg: dict, stage: str, run: str, per_gpu: int = GPU_PACK_PER_GPU) -> float:
    """GPU-seconds one job costs when k = jobs_per_gpu jobs share the GPU: its wall time split k
    ways, but never less than its arithmetic (FLOPs at the assumed rate, which packing cannot
    overlap): max(wall / k, compute). A model: the launch floor is CPU-side work that k
    processes overlap; the first GPU run (tools/device_check.py) tests it."""
    k = jobs_per_gpu(cfg, stage, run, per_gpu)
    return max(work_seconds(cfg, stage, run, "gpu") / k, work_seconds(cfg, stage, run, "gpu_compute"))


def train_pack_gpu_seconds(cfg: dict, run: str, k: int) -> float:
    """GPU-seconds of one run's training in a pack of ``k`` runs on one GPU (config pack:
    {train: k}; ``stages.train_pack``: one process issues one kernel sequence per step for the
    whole pack, so the launch floor is paid once per step for all k runs): the run's share of
    the steps, max(their GPU wall time / k, their arithmetic at the assumed rate), plus its own
    checkpoints (each run saves and evaluates its own). A model, like every GPU figure here,
    until ``tools/device_check.py --pack`` has run on a GPU."""
    steps, ckpts = train_parts(cfg, run, "gpu")
    return max(steps / max(1, int(k)), train_parts(cfg, run, "gpu_compute")[0]) + ckpts


def train_pack_savings(cfg: dict, k: int) -> list[dict]:
    """Per size whose training the profile sends to CPUs (not GPU_SIZES["train"]): the grid's
    training CPU-hours as it runs today, and the GPU-hours of the same runs in packs of ``k``
    on one GPU (``train_pack_gpu_seconds``)."""
    out = []
    for size, names in training_runs_by_size(cfg).items():
        if size in GPU_SIZES["train"]:
            continue
        runs = [cost_name(cfg, r) for r in names]
        out.append({"size": size, "runs": len(runs), "k": k,
                    "cpu_hours": sum(work_seconds(cfg, "train", r, "cpu") for r in runs) / 3600,
                    "gpu_hours_alone": sum(work_seconds(cfg, "train", r, "gpu") for r in runs) / 3600,
                    "gpu_hours_packed": sum(train_pack_gpu_seconds(cfg, r, k) for r in runs) / 3600})
    return out


SAFETY = 2.0              # requested wall time = SAFETY x estimate (x attempt on retries)
STARTUP_S = 120           # python + torch import, model build, (CUDA init), scheduling slack
MIN_RUNTIME_MIN = 15
BASE_MEM_MB = 1500        # python + torch + numpy/pandas resident
CUDA_MEM_MB = 3000        # extra host memory of a CUDA process (driver, cuBLAS/cuDNN)
BYTES_PER_PARAM = {"train": 32, "metrics": 8, "measures": 24, "probes": 8, "events": 0}
IO_BYTES_PER_S = 200e6    # checkpoint write/read


def job_device(cfg: dict, stage: str, size: str) -> str:
    """'gpu' when the profile gives this rule and size a GPU and the config lets torch use it."""
    return "gpu" if size in GPU_SIZES.get(stage, ()) and cfg.get("device", "auto") != "cpu" else "cpu"


@lru_cache(maxsize=None)
def _n_checkpoints(steps: int, n_log: int, log_end: float, n_uniform: int) -> int:
    return len(checkpoint_steps(steps, n_log, log_end, n_uniform))


def run_shape(cfg: dict, run: str) -> dict:
    """Steps, checkpoints, batch, positions, answer length and eval samples of one run."""
    r = parse_run_name(run)
    task, level, size = r["task"], r["level"], r["size"]
    tr = train_settings(cfg, size)
    ck = tr["checkpoints"]
    t = make_task(task, level, level_params(cfg, task, level))
    shape = {"size": size, "steps": int(tr["steps"]), "batch": int(tr["batch_size"]),
             "checkpoints": _n_checkpoints(int(tr["steps"]), int(ck["n_log"]), float(ck["log_end"]),
                                           int(ck["n_uniform"])),
             "positions": t.seq_len - 1, "n_answer": t.n_answer, "eval_n": int(eval_settings(cfg, size)["n_samples"])}
    return shape


def train_parts(cfg: dict, run: str, device: str) -> tuple[float, float]:
    """A training job's (steps, checkpoints) seconds on ``device``: every optimizer step, and per
    checkpoint the weights' and optimizer state's save and a quick evaluation."""
    s = run_shape(cfg, run)
    size, T = s["size"], s["positions"]
    per_ck = 16 * n_params(size, VOCAB_SIZE) / IO_BYTES_PER_S + eval_seconds(size, s["eval_n"], T, device) / 4
    return s["steps"] * step_seconds(size, s["batch"], T, device), s["checkpoints"] * per_ck


def work_seconds(cfg: dict, stage: str, run: str, device: str | None = None) -> float:
    """Expected seconds of one job's work (no startup, SAFETY or retries) on ``device``
    (default: the device the profile gives it)."""
    s = run_shape(cfg, run)
    size, T = s["size"], s["positions"]
    dev = device or job_device(cfg, stage, size)
    P, (L, d, _) = n_params(size, VOCAB_SIZE), SIZES[size]
    if stage == "train":
        return sum(train_parts(cfg, run, dev))
    if stage == "metrics":
        return s["checkpoints"] * (eval_seconds(size, s["eval_n"], T, dev) + 4 * P / IO_BYTES_PER_S)
    if stage == "measures":
        m = cfg.get("measures") or {}
        if size not in m.get("sizes", ()):
            return 0.0
        which = set(m["which"])
        per_ck = 4 * P / IO_BYTES_PER_S
        for entry in MEASURES.values():          # each measure's own cost (measures.registry)
            if entry.name in which:
                per_ck += entry.seconds_per_checkpoint(m[entry.config_key], size, T, dev)
        return min(int(m["n_points"]), s["checkpoints"]) * per_ck      # schedule.measure_steps
    if stage == "probes":
        p = cfg.get("probes") or {}
        if size not in p.get("sizes", ()):
            return 0.0
        fits = (L + 2) * (s["n_answer"] if p["positions"] == "all" else 1)
        per_ck = eval_seconds(size, int(p["n_samples"]), T, dev) + fits * probe_fit_seconds(d)
        return s["checkpoints"] * per_ck                # every checkpoint, as behaviour
    if stage == "events":
        return 0.0
    raise ValueError(f"unknown stage {stage!r}; expected one of {STAGES}")


def job_resources(cfg: dict, stage: str, run: str, attempt: int = 1) -> dict:
    """{'runtime': minutes, 'mem_mb': MB[, 'disk_mb': checkpoint MB]} for a rule's resources.

    runtime and mem_mb grow with the retry ``attempt`` (x attempt, +50% per retry)."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {STAGES}")
    run = cost_name(cfg, run)               # a mixture's job: its proxy run's resources
    size = parse_run_name(run)["size"]
    gpu = job_device(cfg, stage, size) == "gpu"
    minutes = max(MIN_RUNTIME_MIN, math.ceil(SAFETY * (STARTUP_S + work_seconds(cfg, stage, run)) / 60))
    mem = BASE_MEM_MB + math.ceil(BYTES_PER_PARAM[stage] * n_params(size, VOCAB_SIZE) / 1e6) + (CUDA_MEM_MB if gpu
                                                                                                else 0)
    if stage == "measures" and size in (cfg.get("measures") or {}).get("sizes", ()):
        mem += int(cfg["measures"]["grad_rank"]["max_mbytes"])       # per-sample gradient chunks
    out = {"runtime": minutes * attempt, "mem_mb": int(mem * (1 + 0.5 * (attempt - 1)))}
    if stage == "train":
        out["disk_mb"] = checkpoint_disk_mb(cfg, run)
    return out


def _checkpoint_bytes(cfg: dict, run: str) -> tuple[int, int, int, int]:
    """(checkpoints, parameters, bytes per parameter of one analysis checkpoint, bytes per
    parameter of the resume states) of a run: weights in ``train.checkpoint_dtype`` (4 bytes for
    float32, 2 for float16/bfloat16); two AdamW states (the newest and the one before it, so a
    damaged newest one is resumed past; m, v: 8 bytes each), each also holding the float32
    weights (4 more) when the checkpoints are compact."""
    s = run_shape(cfg, run)
    compact = train_settings(cfg, s["size"]).get("checkpoint_dtype", "float32") != "float32"
    return s["checkpoints"], n_params(s["size"], VOCAB_SIZE), (2 if compact else 4), (24 if compact else 16)


def checkpoint_disk_mb(cfg: dict, run: str) -> int:
    """Disk a run's checkpoints/ take while its stages read them: every analysis checkpoint
    plus the resume state."""
    n_ck, n, per_ck, state = _checkpoint_bytes(cfg, run)
    return math.ceil((n_ck * per_ck * n + state * n) / 1e6)


def kept_disk_mb(cfg: dict, run: str) -> int:
    """Disk a run's checkpoints/ keep once its stages have finished: everything with
    ``keep_checkpoints: all``; with ``final`` the newest weights and the resume state
    (stages.prune removes the rest)."""
    if cfg.get("keep_checkpoints", "all") == "all":
        return checkpoint_disk_mb(cfg, run)
    _, n, per_ck, state = _checkpoint_bytes(cfg, run)
    return math.ceil((per_ck * n + state // 2 * n) / 1e6)     # one resume state: prune drops the previous


def proxy_run(spec) -> str:
    """The single-task run whose cost model stands for the job of a mixture spec (its training
    run or one of its units): a unit's own task, level, size and seed (its evaluation is that
    run's); for the training run the combination with the longest sequence (every row is padded
    to it, so a step costs as one of that task's steps)."""
    if spec.is_unit:
        return run_name(spec.task, spec.level, spec.size, spec.control, spec.seed)
    lengths = [make_task(c["task"], c["level"], c["level_params"]).seq_len for c in spec.mixture["components"]]
    c = spec.mixture["components"][lengths.index(max(lengths))]
    return run_name(c["task"], c["level"], spec.size, c["control"], spec.seed)


def cost_proxy(cfg: dict, name: str) -> str:
    """``proxy_run`` of the mixture job ``name`` of the config ``cfg``."""
    return proxy_run(mixture_spec(cfg, name))


def cost_name(cfg: dict, name: str) -> str:
    """The single-task run whose shape a job's cost is computed from: the run itself, or for a
    mixture's training run or unit its proxy (``cost_proxy``)."""
    return cost_proxy(cfg, name) if parse_mixture_name(name) else name


def peak_disk_mb(cfg: dict) -> int | None:
    """The most checkpoint disk the grid can hold at once: with keep_checkpoints final and
    max_unpruned_runs J, what every training run (single-task runs and mixtures) keeps plus,
    per size, its J largest runs' analysis checkpoints (config.prune_window); otherwise every
    run's checkpoints."""
    by_size = {s: [cost_name(cfg, r) for r in names] for s, names in training_runs_by_size(cfg).items()}
    names = [r for v in by_size.values() for r in v]
    j = cfg.get("max_unpruned_runs")
    if cfg.get("keep_checkpoints", "all") != "final" or not j:
        return sum(checkpoint_disk_mb(cfg, r) for r in names)
    extra = {s: [checkpoint_disk_mb(cfg, r) - kept_disk_mb(cfg, r) for r in v] for s, v in by_size.items()}
    return sum(kept_disk_mb(cfg, r) for r in names) + sum(sum(sorted(v)[-j:]) for v in extra.values())


DISK_WARN_SHARE = 0.8       # a plan over this share of the free space warns


def check_disk(cfg: dict, free_bytes: int | None = None) -> str | None:
    """Compare the grid's planned checkpoint disk (``peak_disk_mb``, less the checkpoint files
    already under results_dir) with the free space there (``free_bytes``: measured when None).
    Raises ConfigError naming both figures when the plan cannot fit (unless ``check_disk:
    false``, then it is the returned warning); returns a warning line above
    ``DISK_WARN_SHARE`` of the free space; None otherwise."""
    import shutil
    from pathlib import Path

    from .errors import ConfigError
    root = Path(cfg["results_dir"])
    have = sum(f.stat().st_size for f in root.glob("*/checkpoints/*.safetensors")) if root.is_dir() else 0
    have += sum(f.stat().st_size for f in root.glob("*/*/checkpoints/*.safetensors")) if root.is_dir() else 0
    need = max(0, int(peak_disk_mb(cfg) * 1e6) - have)
    if free_bytes is None:
        probe = next((q for q in [root.resolve(), *root.resolve().parents] if q.exists()), Path("/"))
        free_bytes = shutil.disk_usage(probe).free
    figures = (f"the grid's checkpoints need {need / 1e9:.3g} GB more (the cost model's peak"
               f" {peak_disk_mb(cfg) / 1e3:.3g} GB, {have / 1e9:.3g} GB already written) and {free_bytes / 1e9:.3g} GB"
               f" are free under {cfg['results_dir']}")
    if need > free_bytes:
        msg = (f"{figures}: the plan cannot fit. Fewer checkpoints (train.checkpoints), keep_checkpoints: final with"
               " max_unpruned_runs, or a larger disk; check_disk: false runs it anyway")
        if cfg.get("check_disk", True):
            raise ConfigError(msg)
        return "WARNING: " + msg
    if need > DISK_WARN_SHARE * free_bytes:
        return f"WARNING: {figures} (more than {DISK_WARN_SHARE:.0%} of it)"
    return None


# ------------------------------------------------------------------- cost table
def cost_table(cfg: dict) -> list[dict]:
    """Per size in the grid: training runs (single-task runs and mixtures), steps, checkpoints,
    hours per stage on the device the profile gives it (1 CPU thread or 1 GPU; a mixture's
    training and each of its units' analysis jobs costed by their proxies, cost_name),
    checkpoint disk."""
    rows = []
    by_size = training_runs_by_size(cfg)
    for size in SIZES:
        names = by_size.get(size)
        if not names:
            continue
        runs = [cost_name(cfg, r) for r in names]                          # training jobs
        units = [cost_name(cfg, u) for r in names                          # analysis jobs
                 for u in (mixture_unit_names(cfg, r) if parse_mixture_name(r) else [r])]
        shapes = [run_shape(cfg, r) for r in runs]
        stage_h = {}
        for st in ("train", "metrics", "measures", "probes"):
            dev = job_device(cfg, st, size)
            stage_h[st] = (dev, sum(work_seconds(cfg, st, r) for r in (runs if st == "train" else units)) / 3600)
        cpu_train_h = sum(work_seconds(cfg, "train", r, "cpu") for r in runs) / 3600
        packed_h = sum((sum(packed_gpu_seconds(cfg, st, r) for r in units) / 3600
                        if dev == "gpu" and pack_group(st, size) else h)
                       for st, (dev, h) in stage_h.items() if dev == "gpu")
        disk = sum(checkpoint_disk_mb(cfg, r) for r in runs) / 1e3
        kept = sum(kept_disk_mb(cfg, r) for r in runs) / 1e3
        rows.append({
            "size": size, "n_params": n_params(size, VOCAB_SIZE), "runs": len(runs),
            "mixtures": sum(bool(parse_mixture_name(r)) for r in names), "analysis_units": len(units),
            "steps": sorted({s["steps"] for s in shapes}), "checkpoints": sorted({s["checkpoints"] for s in shapes}),
            "cpu_s_per_step_ref": step_seconds(size, 64, 19, "cpu"), "measured": size in CPU_GFLOPS["train"],
            "gpu_s_per_step_ref": step_seconds(size, 64, 19, "gpu"),
            "stages": stage_h, "cpu_train_hours_if_cpu": cpu_train_h,
            "cpu_hours": sum(h for dev, h in stage_h.values() if dev == "cpu"),
            "gpu_hours": sum(h for dev, h in stage_h.values() if dev == "gpu"),
            "gpu_hours_packed": packed_h,
            "jobs_per_gpu": {st: jobs_per_gpu(cfg, st, runs[0]) for st in stage_h
                             if stage_h[st][0] == "gpu" and pack_group(st, size)},
            "disk_gb": disk, "kept_gb": kept, "run_disk_gb": max(checkpoint_disk_mb(cfg, r) for r in runs) / 1e3,
        })
    return rows

