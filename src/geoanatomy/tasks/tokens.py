"""The shared vocabulary (32 token ids) and the digit helpers every task's format uses.

The ids are fixed: digits 0-9, the separators, the study's eight task tokens, PAD/BOS/EOS/UNK,
then three reserved slots. A task registered beyond the eight (``tasks.registry``) takes the
next reserved slot for its token (``add_task_token``), so no other token's id moves and the
recorded sequences of every other task stay byte for byte; a fourth new task is refused
(the model's embedding has 32 rows).
"""
from __future__ import annotations

import numpy as np

DIGITS = [str(d) for d in range(10)]
SPECIAL = ["=", "+", "*", ",", "<", ">", "EQ"]
TASK_TOKENS = ["COPY", "REV", "CMP", "PAR", "ADD", "MOD", "SORT", "MUL"]   # grows by add_task_token
PAD = ["PAD", "BOS", "EOS", "UNK"]
RESERVED = ("RSV1", "RSV2", "RSV3")       # the slots a new task's token takes, in registration order
VOCAB: list[str] = DIGITS + SPECIAL + TASK_TOKENS + PAD + list(RESERVED)  # 32 tokens
assert len(VOCAB) == 32
VOCAB_SIZE = len(VOCAB)  # every task shares this vocabulary (the model's embedding size)
TOK = {t: i for i, t in enumerate(VOCAB)}
SEP = TOK["="]


def add_task_token(token: str) -> int:
    """The id of task token ``token``: its own when the vocabulary holds it, else the next
    reserved slot's (module doc); ValueError naming the token when none is left."""
    if token in TOK:
        return TOK[token]
    free = [i for i, t in enumerate(VOCAB) if t in RESERVED]
    if not free:
        raise ValueError(f"task token {token!r}: the vocabulary's {len(RESERVED)} reserved slots are taken "
                         f"({[t for t in TASK_TOKENS[-len(RESERVED):]]}); a new task needs one")
    i = free[0]
    del TOK[VOCAB[i]]
    VOCAB[i] = token
    TOK[token] = i
    TASK_TOKENS.append(token)
    return i


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
