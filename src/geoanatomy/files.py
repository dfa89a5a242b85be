"""Files appear atomically: written to a temporary name beside the target, flushed,
then renamed, so a killed job leaves the old file or the new one, never half of one.
JSON is strict (NaN and infinity are refused)."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import math
import tempfile
from pathlib import Path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it into place."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise _named(e, path) from e
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results must be readable like any file
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise _named(e, path) from e
        raise


def _named(e: OSError, path: Path) -> OSError:
    """The same error naming the file being written (a full disk says only 'No space left')."""
    return type(e)(e.errno, f"{e.strerror or e} while writing {path}", str(path))


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


def _np():
    import numpy as np
    return np


def json_safe(x):
    """Replace NaN/inf by None recursively (precursor.json is strict JSON)."""
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, (float, _np().floating)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, _np().integer):
        return int(x)
    if isinstance(x, _np().bool_):
        return bool(x)
    return x


def read_json(path: str | os.PathLike, error: type[Exception], unreadable: str, invalid: str):
    """The JSON value in ``path``; ``error`` naming the file when it cannot be read (message
    ends with ``unreadable``) or is not JSON (``invalid``)."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise error(f"{path} cannot be read ({e.strerror or e}){unreadable}") from e
    except json.JSONDecodeError as e:
        raise error(f"{path} is not valid JSON ({e}){invalid}") from e


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 hex digest of a file, read in 4 MB blocks (weights can be gigabytes)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()
