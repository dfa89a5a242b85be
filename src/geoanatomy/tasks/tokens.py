"""The shared vocabulary (32 token ids) and the digit helpers every task's format uses."""
from __future__ import annotations

import numpy as np

DIGITS = [str(d) for d in range(10)]
SPECIAL = ["=", "+", "*", ",", "<", ">", "EQ"]
TASK_TOKENS = ["COPY", "REV", "CMP", "PAR", "ADD", "MOD", "SORT", "MUL"]
PAD = ["PAD", "BOS", "EOS", "UNK", "RSV1", "RSV2", "RSV3"]
VOCAB: list[str] = DIGITS + SPECIAL + TASK_TOKENS + PAD  # 32 tokens
assert len(VOCAB) == 32
VOCAB_SIZE = len(VOCAB)  # every task shares this vocabulary (the model's embedding size)
TOK = {t: i for i, t in enumerate(VOCAB)}
SEP = TOK["="]


def _digits(x: np.ndarray, width: int) -> np.ndarray:
    """Integers (N,) -> digit tokens (N, width), most significant first."""
    x = np.asarray(x, dtype=np.int64)
    pows = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return (x[:, None] // pows[None, :]) % 10


def _from_digits(d: np.ndarray) -> np.ndarray:
    """Digit tokens (N, width) -> integers (N,)."""
    w = d.shape[1]
    pows = 10 ** np.arange(w - 1, -1, -1, dtype=np.int64)
    return (d.astype(np.int64) * pows[None, :]).sum(1)


def _concat(*parts):
    return np.concatenate([np.asarray(p, dtype=np.int64) for p in parts], axis=1)


def _const(n: int, tok: str) -> np.ndarray:
    return np.full((n, 1), TOK[tok], dtype=np.int64)
