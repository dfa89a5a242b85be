"""What a model that never reads the input can do: chance accuracy and the input-blind
log-probability, fitted on the *training* distribution (torch-free).

Every behavioural event is judged against these levels, so they must come from the
distribution the model is trained on, not from the few evaluation answers: with 200
evaluation answers the most frequent answer of mod L3 (p = 97) looks like 3% of the
answers while the true chance is 1/97 = 1.03%.

Samples: ``n`` answers of a fixed, seeded stream of training inputs (held-out inputs
excluded, as in training), split in two halves A and B, and ``n / 2`` answers of held-out
inputs H. Predictors are fitted on A only, so one that memorises gains nothing; they are
scored on the data the model's number is compared with: H for the held-out curves
(accuracy, log-probability), B for the training-sample loss (the plateau exit).

chance_accuracy
    exact-match accuracy on H of the best constant answer (the most common whole answer
    of A). first_token_chance: the same for the first answer token alone.
input-blind log-probability (``logprob_per_token``, scored on H; ``train_logprob_per_token``,
scored on B)
    the best predictor that sees the earlier *answer* tokens but not the input: for
    answer token j, p(a_j | j, a_{j-k} .. a_{j-1}) with counts from A (add-1/2 smoothing
    over the vocabulary), k = 0 .. ``max_order``; the k with the highest mean
    log-probability per token on the scored sample is used (``order``). In sort the answer
    never decreases, so order >= 1 beats the position-only marginal (order 0) by a wide
    margin; copy's digits are independent and order 0 is the best on held-out answers
    (a long context on a small input space would learn which completions are held out).
first_token_logprob
    the same for answer token 0 on H (it has no earlier answer token: the marginal).
"""
from __future__ import annotations

import numpy as np

from .tasks import VOCAB, TaskData, stable_seed

N_SAMPLE = 200_000
MAX_ORDER = 4


def training_answers(data: TaskData, n: int = N_SAMPLE) -> np.ndarray:
    """Answers (n, n_answer) of a fixed seeded stream of training inputs (no held-out input)."""
    spec = data.spec
    rng = np.random.default_rng(stable_seed(data.seed, spec.task, spec.level, "baselines"))
    return data.answer(data.filter_training(rng, spec.draw(rng, n)))


def _context_ids(answers: np.ndarray, j: int, k: int) -> np.ndarray:
    """An integer id per row for the context (a_{j-k} .. a_{j-1}) of answer position j."""
    V = len(VOCAB)
    ctx = np.zeros(len(answers), dtype=np.int64)
    for i in range(max(0, j - k), j):
        ctx = ctx * V + answers[:, i]
    return ctx


def order_logprob(fit: np.ndarray, score: np.ndarray, k: int, alpha: float = 0.5) -> np.ndarray:
    """Per-position mean log-probability (n_answer,) on ``score`` of the order-k answer-only
    predictor fitted on ``fit`` (both (N, n_answer))."""
    V = len(VOCAB)
    out = np.empty(fit.shape[1])
    for j in range(fit.shape[1]):
        cf, cs = _context_ids(fit, j, k), _context_ids(score, j, k)
        keys_f = cf * V + fit[:, j]
        uniq, counts = np.unique(keys_f, return_counts=True)
        ctx_u, ctx_counts = np.unique(cf, return_counts=True)
        keys_s = cs * V + score[:, j]
        i = np.clip(np.searchsorted(uniq, keys_s), 0, len(uniq) - 1)
        n_pair = np.where(uniq[i] == keys_s, counts[i], 0)
        ic = np.clip(np.searchsorted(ctx_u, cs), 0, len(ctx_u) - 1)
        n_ctx = np.where(ctx_u[ic] == cs, ctx_counts[ic], 0)
        out[j] = float(np.mean(np.log((n_pair + alpha) / (n_ctx + alpha * V))))
    return out


def mode_accuracy(fit: np.ndarray, score: np.ndarray) -> float:
    """Exact-match accuracy on ``score`` (N, k) of the most frequent row of ``fit`` (M, k)."""
    vals, c = np.unique(fit, axis=0, return_counts=True)
    return float((score == vals[np.argmax(c)]).all(1).mean())


def _best_order(fit, score, max_order):
    per_order = {k: order_logprob(fit, score, k) for k in range(min(max_order, fit.shape[1] - 1) + 1)}
    best = max(per_order, key=lambda k: (float(per_order[k].mean()), -k))
    return best, per_order


def training_baselines(data: TaskData, n: int = N_SAMPLE, max_order: int = MAX_ORDER) -> dict:
    """Chance levels and the input-blind log-probability of a run (module doc), fitted on the
    training distribution. Deterministic for a given task, level, seed and data settings."""
    a = training_answers(data, n)
    half = len(a) // 2
    fit, score_train = a[:half], a[half:]
    held = data.heldout_sample(half, "baselines")[:, -a.shape[1]:]
    best, per_order = _best_order(fit, held, max_order)
    best_tr, per_order_tr = _best_order(fit, score_train, max_order)
    return {
        "chance_accuracy": mode_accuracy(fit, held),
        "first_token_chance": mode_accuracy(fit[:, :1], held[:, :1]),
        "logprob_per_token": float(per_order[best].mean()),
        "order": int(best),
        "first_token_logprob": float(per_order[0][0]),
        "marginal_logprob_per_token": float(per_order[0].mean()),
        "logprob_per_token_by_order": {str(k): float(v.mean()) for k, v in per_order.items()},
        "train_logprob_per_token": float(per_order_tr[best_tr].mean()),
        "train_order": int(best_tr),
        "n_fit": int(len(fit)), "n_score_heldout": int(len(held)), "n_score_train": int(len(score_train)),
        "source": "fitted on a fixed sample of training answers; scored on held-out answers "
                  "(train_*: on a second training sample)",
    }
