"""Multiple-choice scoring by log-likelihood and hidden states at the last prompt token.

Tokenisation: prompt and option are encoded separately without special tokens (no BOS:
Pythia's tokenizer adds none, and a prepended BOS changes RankMe, since every prompt then
shares a first token) and
concatenated, ids = enc(prompt) + enc(option). Every (item, option) pair is one
sequence; sequences are right-padded into batches (rotary positions start at 0 in every
row, padding is masked and never read).

Precision: the forward pass runs in float32 at least (``loading.for_scoring`` casts a
half-precision load up; ``score`` refuses a half-precision model), and the logits of the
option positions are computed in float64 from the final hidden state (``embed_out``'s
weight cast to float64, then log-softmax in float64). A bf16 forward with bf16 logits
rounds each logit to 8 significant bits (0.05-0.1 nats per token at Pythia's logit
scale); tests/test_pythia.py compares both paths with a float64 reference.

Option scores, computed in float64 from the logits::

    lp_k      = log softmax(logits[t-1])[option token k]    (t = position of token k)
    sum       = sum_k lp_k                (log p(option | prompt), nats)
    mean      = sum / n_option_tokens     (per-token mean, length-normalised)

The prediction of an item under a scoring is argmax over its options (first index on
ties). Both scorings are reported; the setting ``pythia.scoring`` picks the one called "accuracy".

Hidden states: GPT-NeoX with ``output_hidden_states=True`` returns L + 1 tensors (checked
in tests/test_pythia.py against forward hooks):

=================  ==============================================================
embed              index 0: token embeddings (GPT-NeoX has no position embedding)
block0..block{L-2}  index k: output of transformer block k - 1 (0-based), before any LN
block{L-1}         output of the last block *before* the final LayerNorm (not among
                   the returned tensors; taken with a forward hook on that block)
ln_final           index L: the last block's output *after* the final LayerNorm
=================  ==============================================================

All are read at the last prompt token (the position that predicts the first option
token); the prompt alone decides it, so it is taken from the item's first option row.
"""
from __future__ import annotations

import numpy as np
import torch

from .hidden import layer_names
from .scoring import collect, option_index, padded_batch

__all__ = ["choice_stats", "collect", "encode", "layer_names", "option_index", "padded_batch", "score"]


def encode(tokenizer, items) -> list[tuple[list[int], list[list[int]]]]:
    """[(prompt ids, [option ids, ...])] for every item (no special tokens)."""
    out = []
    for it in items:
        p = tokenizer(it.prompt, add_special_tokens=False)["input_ids"]
        opts = [tokenizer(o, add_special_tokens=False)["input_ids"] for o in it.options]
        if not p or any(len(o) == 0 for o in opts):
            raise ValueError(f"item {it.id}: prompt or an option encodes to no tokens")
        out.append((list(p), [list(o) for o in opts]))
    return out


def score(model, encoded, batch_size: int = 16, device: str = "cpu") -> dict:
    """Scores and last-prompt-token hidden states for encoded items.

    Returns {"sum": [np.float64 (n_opt,)], "mean": [...], "n_tokens": [np.int64 (n_opt,)],
    "hidden": {layer name: torch.float32 (N, d)}, "last_token": np.int64 (N,)}.
    ``model`` must be float32 or float64 (see the module doc on precision).
    """
    if any(p.dtype in (torch.float16, torch.bfloat16) for p in model.parameters()):
        raise ValueError("score() needs a float32 (or float64) model: cast a half-precision load with "
                         "geoanatomy.pythia.loading.for_scoring first")
    n_layer = model.config.num_hidden_layers
    names = layer_names(n_layer)
    rows = [(i, j, p + o, len(p), len(o)) for i, (p, opts) in enumerate(encoded) for j, o in enumerate(opts)]
    order = sorted(range(len(rows)), key=lambda r: (-len(rows[r][2]), r))   # long first, deterministic
    sums = [np.zeros(len(opts)) for _, opts in encoded]
    ntok = [np.array([len(o) for o in opts], dtype=np.int64) for _, opts in encoded]
    d = model.config.hidden_size
    hidden = {n: torch.zeros(len(encoded), d, dtype=torch.float32) for n in names}
    captured = {}
    unembed = model.get_output_embeddings()                    # d -> V (embed_out)
    W64 = unembed.weight.detach().to(torch.float64)            # (V, d), once per call
    b64 = None if getattr(unembed, "bias", None) is None else unembed.bias.detach().to(torch.float64)
    hook = model.gpt_neox.layers[-1].register_forward_hook(
        lambda mod, inp, out: captured.__setitem__("h", out[0] if isinstance(out, tuple) else out))
    try:
        for b0 in range(0, len(order), batch_size):
            batch = [rows[r] for r in order[b0:b0 + batch_size]]
            ids, mask = padded_batch([r[2] for r in batch])
            # The base model, not the LM head over all positions: logits are needed only at
            # the option positions (the full (B, T, V) tensor would be ~1 GB for long prompts).
            out = model.gpt_neox(input_ids=ids.to(device), attention_mask=mask.to(device),
                                 output_hidden_states=True)
            hs = list(out.hidden_states)                       # L+1 x (B, T, d)
            if len(hs) != n_layer + 1:
                raise RuntimeError(f"expected {n_layer + 1} hidden states, got {len(hs)}")
            states = hs[:-1] + [captured["h"], hs[-1]]         # embed, block0..block{L-1}, ln_final
            # One unembedding for every option-predicting position of the batch (a per-row
            # call re-reads the d x V matrix each time: memory-bound, ~20x slower on CPU).
            bi, ti, tgt = option_index(batch, device)
            h64 = hs[-1][bi, ti].to(torch.float64)                                    # (n_opt_tokens, d)
            logits = h64 @ W64.T if b64 is None else h64 @ W64.T + b64                     # (n_opt_tokens, V)
            lps = torch.log_softmax(logits, -1).gather(-1, tgt[:, None])[:, 0].cpu()      # (n_opt_tokens,)
            collect(batch, lps, sums, hidden, names, states, len(encoded))
    finally:
        hook.remove()
    means = [s / n for s, n in zip(sums, ntok)]
    last = np.array([p[-1] for p, _ in encoded], dtype=np.int64)
    return {"sum": sums, "mean": means, "n_tokens": ntok, "hidden": hidden, "last_token": last}


def choice_stats(scores: list[np.ndarray], answers: list[int]) -> dict:
    """Accuracy and log P(correct | options) under one scoring.

    accuracy       mean over items of [argmax_k score_k == answer]
    logprob_choice mean over items of score_answer - logsumexp_k score_k (float64, nats):
                   the log-probability of the correct option renormalised over the
                   options; chance (an input-blind uniform guess) = mean log(1/n_options)
    """
    acc = np.mean([int(np.argmax(s) == a) for s, a in zip(scores, answers)])
    lc = np.mean([s[a] - np.logaddexp.reduce(s) for s, a in zip(scores, answers)])
    return {"accuracy": float(acc), "logprob_choice": float(lc)}
