"""Shared test setup: one thread everywhere (2-core CI machine), repo paths."""
import os
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    import torch
    torch.set_num_threads(1)


@pytest.fixture
def repo() -> Path:
    return REPO
