"""Multiple-choice scoring and prompt losses of any Hugging Face causal LM in float64, the
GPT-NeoX scorer's ``hf.choice.score`` for architectures other than GPT-NeoX."""
from __future__ import annotations

import numpy as np
import torch

from .hidden import forward_hidden, hidden_names


def for_scoring(model):
    """The model with float32 parameters and buffers at least: a half-precision load is cast
    up in place, so every forward pass and hidden state is float32 at least; float32 and
    float64 models are returned unchanged."""
    if any(p.dtype in (torch.float16, torch.bfloat16) for p in model.parameters()):
        model = model.to(torch.float32)
    return model


@torch.no_grad()
def padded_batch(seqs: list[list[int]]):
    """Right-padded token ids (B, T) and attention mask (B, T) of sequences of ids."""
    T = max(len(q) for q in seqs)
    ids = torch.zeros(len(seqs), T, dtype=torch.long)
    mask = torch.zeros(len(seqs), T, dtype=torch.long)
    for b, seq in enumerate(seqs):
        ids[b, :len(seq)] = torch.tensor(seq)
        mask[b, :len(seq)] = 1
    return ids, mask


def option_index(batch, device="cpu"):
    """For rows (item, option, ids, prompt length, option length) of a padded batch: the batch
    index, the position predicting each option token, and that token ((n_opt_tokens,) each)."""
    bi = torch.tensor([b for b, r in enumerate(batch) for _ in range(r[4])], device=device)
    ti = torch.tensor([r[3] - 1 + k for r in batch for k in range(r[4])], device=device)
    tgt = torch.tensor([r[2][r[3] + k] for r in batch for k in range(r[4])], device=device)
    return bi, ti, tgt


def collect(batch, lps, sums, hidden: dict, names, states, n_items: int) -> None:
    """Option log-prob sums (per item and option) and, for each item's first option, the hidden
    state of every layer at the last prompt token (float32, created on first use)."""
    k0 = 0
    for b, (i, j, seq, lp, lo) in enumerate(batch):
        sums[i][j] = float(lps[k0:k0 + lo].sum())
        k0 += lo
        if j == 0:
            for name, h in zip(names, states):
                if name not in hidden:
                    hidden[name] = torch.zeros(n_items, h.shape[-1], dtype=torch.float32)
                hidden[name][i] = h[b, lp - 1].float().cpu()                     # (d,)


def logits64(model, h: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """Logits (n, V) in float64 from final hidden states h (n, d): the output embedding
    applied in float64, as ``hf.choice`` does, when it reproduces the model's own
    logits (a plain linear head); otherwise the model's logits cast to float64 (heads with
    extra operations, e.g. soft-capping)."""
    head = model.get_output_embeddings()
    if isinstance(head, torch.nn.Linear) and head.weight.shape[-1] == h.shape[-1]:
        W = head.weight.detach().to(torch.float64)
        out = h.to(torch.float64) @ W.T
        if head.bias is not None:
            out = out + head.bias.detach().to(torch.float64)
        if torch.allclose(out.to(logits.dtype), logits, rtol=1e-3, atol=1e-3):
            return out
    return logits.to(torch.float64)


@torch.no_grad()
def score_any(model, encoded, batch_size: int = 16, device: str = "cpu") -> dict:
    """Multiple-choice scores of any HF causal LM (the GPT-NeoX scorer's ``hf.choice.score``
    is the GPT-NeoX version, the same return dict (option log-prob
    sums and means in float64 (``logits64``), hidden states at the last prompt token, last
    prompt tokens).
    tests check both agree on GPT-NeoX."""
    names = hidden_names(model)
    rows = [(i, j, p + o, len(p), len(o)) for i, (p, opts) in enumerate(encoded) for j, o in enumerate(opts)]
    order = sorted(range(len(rows)), key=lambda r: (-len(rows[r][2]), r))
    sums = [np.zeros(len(opts)) for _, opts in encoded]
    ntok = [np.array([len(o) for o in opts], dtype=np.int64) for _, opts in encoded]
    hidden: dict = {}
    for b0 in range(0, len(order), batch_size):
        batch = [rows[r] for r in order[b0:b0 + batch_size]]
        ids, mask = padded_batch([r[2] for r in batch])
        logits, _, states = forward_hidden(model, ids.to(device), mask.to(device))
        bi, ti, tgt = option_index(batch, device)
        lg = logits64(model, states[-1][bi, ti], logits[bi, ti])                       # (n_opt_tokens, V)
        lps = torch.log_softmax(lg, -1).gather(-1, tgt[:, None])[:, 0].cpu()
        collect(batch, lps, sums, hidden, names, states, len(encoded))
    means = [s / n for s, n in zip(sums, ntok)]
    last = np.array([p[-1] for p, _ in encoded], dtype=np.int64)
    return {"sum": sums, "mean": means, "n_tokens": ntok, "hidden": hidden, "last_token": last}


def score_items(model, encoded, batch_size: int = 16, device: str = "cpu") -> dict:
    """``score_any``, under the name the scanner and the monitor call (one scorer for every
    architecture; the Pythia branch's GPT-NeoX scorer gives the same numbers, tests check)."""
    return score_any(model, encoded, batch_size, device)


@torch.no_grad()
def prompt_states(model, prompts: list[list[int]], batch_size: int = 16, device: str = "cpu",
                  starts: list[int] | None = None, state_at: list[int] | None = None) -> dict:
    """Next-token loss and hidden states of token-id sequences.

    ``starts[i]``: the first token of sequence i that is scored (default 1: every token after
    the first; a prompt/completion pair: the completion's first token, so the prompt is context
    only, like labels of -100). ``state_at[i]``: the token whose hidden states are taken
    (default the last; a pair: the prompt's last token).

    Returns {"nll_sum": float64 total of -log p(token t | tokens < t) over the scored tokens,
    "n_tokens": how many, "per_prompt": float64 (N,) mean loss per sequence (NaN when nothing
    is scored), "exact": bool (N,) every scored token the argmax (teacher forcing),
    "n_right_tokens": scored tokens that are the argmax, "hidden": {name: float32 (N, d)} at
    ``state_at``, "last_token": int64 (N,) the token at ``state_at``}. Sequences are
    right-padded; padding is masked and never read."""
    names = hidden_names(model)
    N = len(prompts)
    starts = [1] * N if starts is None else [max(1, int(x)) for x in starts]
    state_at = [len(p) - 1 for p in prompts] if state_at is None else [int(x) for x in state_at]
    order = sorted(range(N), key=lambda i: (-len(prompts[i]), i))
    per = np.full(N, np.nan)
    exact = np.zeros(N, dtype=bool)
    total, count, right = 0.0, 0, 0
    hidden: dict = {}
    for b0 in range(0, len(order), batch_size):
        idx = order[b0:b0 + batch_size]
        T = max(len(prompts[i]) for i in idx)
        ids = torch.zeros(len(idx), T, dtype=torch.long)
        mask = torch.zeros(len(idx), T, dtype=torch.long)
        for b, i in enumerate(idx):
            ids[b, :len(prompts[i])] = torch.tensor(prompts[i])
            mask[b, :len(prompts[i])] = 1
        logits, _, states = forward_hidden(model, ids.to(device), mask.to(device))
        for b, i in enumerate(idx):
            n, s0 = len(prompts[i]), starts[i]
            if n > s0:
                lg = logits64(model, states[-1][b, s0 - 1:n - 1], logits[b, s0 - 1:n - 1])
                tgt = ids[b, s0:n].to(device)
                nll = -torch.log_softmax(lg, -1).gather(-1, tgt[:, None])[:, 0]
                hit = lg.argmax(-1) == tgt
                per[i] = float(nll.mean())
                exact[i] = bool(hit.all())
                right += int(hit.sum())
                total += float(nll.sum())
                count += n - s0
            for name, h in zip(names, states):
                if name not in hidden:
                    hidden[name] = torch.zeros(N, h.shape[-1], dtype=torch.float32)
                hidden[name][i] = h[b, state_at[i]].float().cpu()
    last = np.array([p[a] for p, a in zip(prompts, state_at)], dtype=np.int64)
    return {"nll_sum": total, "n_tokens": count, "per_prompt": per, "exact": exact, "n_right_tokens": right,
            "hidden": hidden, "last_token": last}
