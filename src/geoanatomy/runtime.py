"""Process-level settings: thread limits, device choice, code version."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def limit_threads(n: int, torch_too: bool = True) -> None:
    """Limit torch *and* the BLAS/OpenMP pools under numpy/scipy/sklearn to ``n`` threads.

    Oversubscription (two jobs each using both cores) made training 2-10x
    slower on a 2-core machine (measured with one other busy process), and a
    100-class LogisticRegression took 3.95 s with 2 BLAS threads against 0.10 s
    with 1, so every job runs with exactly
    the thread count its rule was given. Environment variables cover libraries
    loaded later; threadpoolctl covers pools already loaded. ``torch_too=False`` leaves torch
    unimported (a stage that reads tables only starts ~1 s faster; torch, if a later import
    brings it, reads OMP_NUM_THREADS).
    """
    n = max(1, int(n))
    for v in _THREAD_VARS:
        os.environ[v] = str(n)
    if torch_too:
        import torch
        torch.set_num_threads(n)
        with contextlib.suppress(RuntimeError):  # only settable before the first parallel op
            torch.set_num_interop_threads(n)
    with contextlib.suppress(ImportError):
        from threadpoolctl import threadpool_limits
        threadpool_limits(n)


def parallel_map(fn, items, workers: int = 1) -> list:
    """[fn(item) for item in items], in ``workers`` processes when workers > 1 (the results in
    the items' order, so a caller's numbers cannot depend on the worker count as long as each
    item carries its own seed). Each worker is a fresh interpreter (``spawn``: no inherited
    thread pools, the same on Linux and macOS) with one BLAS/OpenMP thread, so ``workers``
    processes use ``workers`` cores, not workers x threads. ``fn`` must be a module-level
    function and the items picklable."""
    items = list(items)
    workers = max(1, min(int(workers), len(items)))
    if workers == 1:
        return [fn(x) for x in items]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    saved = {v: os.environ.get(v) for v in _THREAD_VARS}
    os.environ.update({v: "1" for v in _THREAD_VARS})      # read by each worker as it starts
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(fn, x) for x in items]
            return [f.result() for f in futures]
    finally:
        for v, old in saved.items():
            if old is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = old


# Settings that change numbers on a GPU (config block ``numerics``), all off by default. A run
# that turns one on hashes the changed keys into its training settings (RunSpec.numerics);
# train.json records all of them and what they did on the device the run used.
NUMERICS = {"tf32": False, "mixed_precision": "off", "fused_attention_gpu": False}


def apply_numerics(numerics: dict | None, device: str) -> dict:
    """Set torch's process-wide switches for ``numerics`` (the non-default keys; the rest take
    ``NUMERICS``) on ``device``, and return the record train.json keeps: every key, and what it
    means on this device. TF32 off also turns off cuDNN's, which torch enables by default; the
    fused attention switch keeps CUDA's scaled_dot_product_attention to its math kernel (the
    CPU's own kernel is left alone: every CPU result was made with it)."""
    import torch
    bad = sorted(set(numerics or {}) - set(NUMERICS))
    if bad:
        raise ValueError(f"numerics: unknown keys {bad}; known: {sorted(NUMERICS)}")
    n = {**NUMERICS, **(numerics or {})}
    if n["mixed_precision"] not in ("off", "bfloat16"):
        raise ValueError(f"numerics.mixed_precision must be 'off' or 'bfloat16', got {n['mixed_precision']!r}")
    cuda = str(device).startswith("cuda")
    torch.backends.cuda.matmul.allow_tf32 = bool(n["tf32"])
    torch.backends.cudnn.allow_tf32 = bool(n["tf32"])
    torch.set_float32_matmul_precision("high" if n["tf32"] else "highest")
    if cuda:
        for enable in ("enable_flash_sdp", "enable_mem_efficient_sdp", "enable_cudnn_sdp"):
            if hasattr(torch.backends.cuda, enable):
                getattr(torch.backends.cuda, enable)(bool(n["fused_attention_gpu"]))
        torch.backends.cuda.enable_math_sdp(True)
    attention = ("torch's CPU scaled_dot_product_attention kernel" if not cuda else
                 "CUDA fused kernels allowed (flash, memory-efficient, cuDNN)" if n["fused_attention_gpu"] else
                 "CUDA math kernel only (fused kernels off)")
    return {**n, "device": str(device), "attention_kernel": attention,
            "tf32_in_effect": bool(n["tf32"]) and cuda,
            "autocast": f"{n['mixed_precision']} forward and loss" if n["mixed_precision"] != "off" else "none"}


def autocast(numerics: dict | None, device: str):
    """The context of a training forward pass and loss: torch.autocast in bfloat16 when
    ``numerics.mixed_precision`` asks for it, else nothing."""
    import torch
    if (numerics or {}).get("mixed_precision", "off") == "bfloat16":
        return torch.autocast(device_type="cuda" if str(device).startswith("cuda") else "cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


DEVICES = "auto, cpu, cuda or cuda:N"


def device_problem(dev) -> str | None:
    """Why ``dev`` cannot be used on this machine (None when it can): not one of auto, cpu,
    cuda, cuda:N (an empty string included), or a CUDA device torch does not see. cpu and auto
    never import torch."""
    import re
    if not isinstance(dev, str) or not re.fullmatch(r"auto|cpu|cuda(:[0-9]+)?", dev):
        return f"{dev!r} is not a device; use {DEVICES}"
    if not dev.startswith("cuda"):
        return None
    import torch
    idx = int(dev.split(":")[1]) if ":" in dev else 0
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if idx < n:
        return None
    have = (f"torch {torch.__version__} sees no CUDA device" if n == 0 else
            f"torch sees {n} CUDA device(s): " + ", ".join(f"cuda:{i}" for i in range(n)))
    return f"{dev!r} is not available on this machine ({have}); use auto, cpu or an existing device"


def pick_device(requested: str = "auto") -> str:
    """'auto' -> 'cuda' when a GPU is visible, else 'cpu'; otherwise the requested device."""
    import torch
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {requested!r} requested but torch sees no CUDA device")
    return requested


def describe_device(requested: str = "auto") -> str:
    """One line for a job's log: the device the job will use (GPU name and memory), torch
    version and threads, host, and the SLURM job id and allocated GPUs when run under SLURM."""
    import socket

    import torch
    dev = pick_device(requested)
    what = dev
    if dev.startswith("cuda"):
        idx = torch.device(dev).index
        p = torch.cuda.get_device_properties(torch.cuda.current_device() if idx is None else idx)
        what += f" ({p.name}, {p.total_memory / 2**30:.0f} GiB)"
    line = (f"device {what} (requested {requested}), torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads, host {socket.gethostname()}")
    if os.environ.get("SLURM_JOB_ID"):
        gpus = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("SLURM_JOB_GPUS") or "none"
        line += f", SLURM job {os.environ['SLURM_JOB_ID']} (GPUs allocated: {gpus})"
        if gpus not in ("none", "", "NoDevFiles") and dev == "cpu":
            line += ("; WARNING: SLURM allocated a GPU but torch uses the CPU (device: cpu in the "
                     "config, or a CPU-only torch build: torch.cuda.is_available() is False)")
    return line


def code_version() -> dict:
    """Package version and, when run from a git checkout, the commit (with a dirty flag)."""
    import subprocess

    from .version import __version__
    out = {"geoanatomy": __version__, "git_commit": None, "git_dirty": None}
    root = Path(__file__).resolve().parents[2]
    if (root / ".git").exists():
        try:
            out["git_commit"] = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                               text=True, timeout=5).stdout.strip() or None
            st = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=5).stdout
            out["git_dirty"] = bool(st.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    return out


# Environment variables that change the floating-point path of CPU kernels: torch's dispatch
# (ATEN_CPU_CAPABILITY) and MKL's instruction set (MKL_ENABLE_INSTRUCTIONS, MKL_CBWR).
FLOAT_PATH_ENV = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR")


def machine_fingerprint(float_paths=None) -> dict:
    """What decides the floating-point path of a run: the CPU model, the instruction set torch
    dispatches to, the BLAS library, the torch build and the variables that pin them, plus
    ``fingerprint``, a short hash of all of it. ``float_paths``: how the run's steps were
    computed (the trainer's ``float_path`` values); any other than "single" (a packed run's
    batched kernels) is part of the fingerprint, as another CPU would be. Runs with the same config and seed are
    byte-identical only under one fingerprint: on a plateau, a different last bit acts like
    a new seed."""
    import hashlib
    import json
    import platform
    import re

    import torch
    cpu = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cfg = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=([^,\s]+)", cfg)
    mkl = re.search(r"Math Kernel Library Version ([^\s]+)", cfg)
    out = {"cpu_model": cpu or platform.processor() or platform.machine(),
           "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "blas": " ".join(x for x in (blas.group(1) if blas else None, mkl.group(1) if mkl else None) if x) or None,
           "torch": torch.__version__, "torch_git": getattr(torch.version, "git_version", None),
           "cuda": torch.version.cuda, "platform": f"{platform.system()} {platform.machine()}",
           "env": {k: os.environ.get(k) for k in FLOAT_PATH_ENV if os.environ.get(k)}}
    if any(p != "single" for p in float_paths or ()):
        out["float_path"] = sorted(set(float_paths))
    out["fingerprint"] = hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest()[:12]
    return out
