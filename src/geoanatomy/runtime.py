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


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
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
