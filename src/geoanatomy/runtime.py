"""Process-level settings: thread limits, device choice, atomic file writes."""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def limit_threads(n: int) -> None:
    """Limit torch *and* the BLAS/OpenMP pools under numpy/scipy/sklearn to ``n`` threads.

    Oversubscription (two jobs each using both cores) made training 2-10x
    slower on a 2-core machine (pitfalls.md), so every job runs with exactly
    the thread count its rule was given. Environment variables cover libraries
    loaded later; threadpoolctl covers pools already loaded.
    """
    n = max(1, int(n))
    for v in _THREAD_VARS:
        os.environ[v] = str(n)
    import torch
    torch.set_num_threads(n)
    with contextlib.suppress(RuntimeError):  # only settable before the first parallel op
        torch.set_num_interop_threads(n)
    with contextlib.suppress(ImportError):
        from threadpoolctl import threadpool_limits
        threadpool_limits(n)


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


_FAULT_COUNTER = [0]


def _maybe_inject_fault() -> None:
    """Fault injection for tests: with GEOANATOMY_KILL_AFTER_TMP_WRITES=N the process
    SIGKILLs itself after its N-th temporary file is written and before it is renamed
    (a kill in the middle of a checkpoint write). Unset in normal use."""
    n = os.environ.get("GEOANATOMY_KILL_AFTER_TMP_WRITES")
    if n:
        _FAULT_COUNTER[0] += 1
        if _FAULT_COUNTER[0] >= int(n):
            import signal
            os.kill(os.getpid(), signal.SIGKILL)


def code_version() -> dict:
    """Package version and, when run from a git checkout, the commit (with a dirty flag)."""
    import subprocess

    from . import __version__
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


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results must be readable like any file
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        _maybe_inject_fault()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_write_json(path: str | os.PathLike, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, allow_nan=False, default=_json_default) + "\n")


def _json_default(o):
    import numpy as np
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    raise TypeError(f"not JSON serialisable: {type(o)}")
