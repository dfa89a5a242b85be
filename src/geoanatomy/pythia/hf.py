"""Hugging Face causal LMs for the monitor and the scanner: named hidden states, safe local
loading and multiple-choice scoring for any architecture.

Hidden states (``forward_hidden``): ``output_hidden_states=True`` returns L + 1 tensors for
the decoder-only models of transformers (GPT-2, GPT-NeoX, Llama, ...): the embedding output,
the output of blocks 1 .. L-1, and the last block's output *after* the final norm. The last
block's output before the norm is taken with a forward hook on it, so every model gets the
names of the Pythia branch (``pythia.scoring.layer_names``)::

    embed, layer1 .. layer{L}, final_ln_post

The block list is found as the ``nn.ModuleList`` of length L in the model (``transformer.h``,
``gpt_neox.layers``, ``model.layers``); where there is none, ``layer{L}`` is left out.

Loading (``load_causal_lm``): local folders only, ``trust_remote_code=False`` always,
``*.safetensors`` preferred and ``*.bin`` read with ``torch.load(weights_only=True)``;
GPT-NeoX checkpoints go through ``pythia.loading.load_model`` (the Pythia branch's loader).
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import torch

from .scoring import layer_names as pythia_layer_names
from .scoring import collect, option_index, padded_batch

DTYPES = ("float32", "bfloat16", "float16")


def unwrap(model):
    """The module under DDP / DataParallel / torch.compile wrappers."""
    for attr in ("module", "_orig_mod"):
        while hasattr(model, attr) and isinstance(getattr(model, attr), torch.nn.Module):
            model = getattr(model, attr)
    return model


def n_layers(model) -> int:
    return int(model.config.num_hidden_layers)


def block_list(model):
    """The model's list of transformer blocks (an ``nn.ModuleList`` of length L), or None."""
    L = n_layers(model)
    for _, mod in model.named_modules():
        if isinstance(mod, torch.nn.ModuleList) and len(mod) == L:
            return mod
    return None


def hidden_names(model) -> list[str]:
    """Names of the states ``forward_hidden`` returns for this model (module doc)."""
    L = n_layers(model)
    names = pythia_layer_names(L)
    return names if block_list(model) is not None else names[:L] + names[L + 1:]


@contextlib.contextmanager
def _capture_last_block(model):
    blocks = block_list(model)
    captured: dict = {}
    if blocks is None:
        yield captured
        return
    hook = blocks[-1].register_forward_hook(
        lambda mod, inp, out: captured.__setitem__("h", out[0] if isinstance(out, tuple) else out))
    try:
        yield captured
    finally:
        hook.remove()


def forward_hidden(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
    """(logits (B, T, V), names, states: list of (B, T, d)) of a HF causal LM (module doc)."""
    L = n_layers(model)
    with _capture_last_block(model) as cap:
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    hs = list(out.hidden_states)
    if len(hs) != L + 1:
        raise RuntimeError(f"expected {L + 1} hidden states from {type(model).__name__}, got {len(hs)}")
    if "h" in cap:
        states = hs[:-1] + [cap["h"], hs[-1]]
    else:
        states = hs
    return out.logits, hidden_names(model), states


# ------------------------------------------------------------------------------ loading
class ScanLoadError(RuntimeError):
    """A checkpoint or tokenizer cannot be loaded; the message names the folder."""


def model_type(path: str | Path) -> str:
    """``model_type`` of a checkpoint folder's config.json (no code is run)."""
    from transformers import AutoConfig
    try:
        return AutoConfig.from_pretrained(str(path), trust_remote_code=False, local_files_only=True).model_type
    except Exception as e:  # noqa: BLE001 - name the folder
        raise ScanLoadError(f"{path}: cannot read config.json ({type(e).__name__}: {e})") from e


def load_causal_lm(root: str | Path, folder: str, dtype: str = "float32", device: str = "cpu"):
    """The causal LM in ``root/folder`` in eval mode on ``device`` (local files only, no remote
    code, safetensors or ``torch.load(weights_only=True)``). GPT-NeoX: ``pythia.loading.load_model``."""
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    from .loading import LoadError, load_model
    if dtype not in DTYPES:
        raise ScanLoadError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    hf_logging.disable_progress_bar()
    path = Path(root) / folder
    if model_type(path) == "gpt_neox":
        try:
            return load_model(str(root), "local", folder, dtype, device)
        except LoadError as e:
            raise ScanLoadError(str(e)) from e
    config = AutoConfig.from_pretrained(str(path), trust_remote_code=False, local_files_only=True)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(path), config=config, dtype=getattr(torch, dtype), trust_remote_code=False,
            use_safetensors=None, weights_only=True, local_files_only=True)
    except Exception as e:  # noqa: BLE001
        raise ScanLoadError(f"{path}: cannot load the weights ({type(e).__name__}: {e})") from e
    return model.to(device).eval()


def load_tokenizer_for(root: str | Path, folder: str, tokenizer: str | None = None):
    """The tokenizer: ``tokenizer`` (a folder) when given, else ``root/folder`` or ``root``
    (``pythia.loading.load_tokenizer``, local files only, no remote code)."""
    from .loading import LoadError, load_tokenizer
    try:
        if tokenizer is not None:
            from transformers import AutoTokenizer
            return AutoTokenizer.from_pretrained(str(tokenizer), trust_remote_code=False, local_files_only=True)
        return load_tokenizer(str(root), "local", folder)
    except LoadError as e:
        raise ScanLoadError(f"{e}; give the tokenizer folder with --tokenizer") from e
    except Exception as e:  # noqa: BLE001
        raise ScanLoadError(f"tokenizer {tokenizer}: cannot load it ({type(e).__name__}: {e})") from e


# ------------------------------------------------------------------------------ scoring
def for_scoring(model):
    """``pythia.loading.for_scoring``: half-precision models cast to float32 (every forward
    pass and hidden state float32 at least); float32/float64 models unchanged."""
    try:
        from .loading import for_scoring as pythia_for_scoring
    except ImportError:  # an older pythia.loading: the same cast
        if any(p.dtype in (torch.float16, torch.bfloat16) for p in model.parameters()):
            model = model.to(torch.float32)
        return model
    return pythia_for_scoring(model)


def logits64(model, h: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """Logits (n, V) in float64 from final hidden states h (n, d): the output embedding
    applied in float64, as ``pythia.scoring`` does, when it reproduces the model's own
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
    """``pythia.scoring.score`` for any HF causal LM: the same return dict (option log-prob
    sums and means in float64 (``logits64``), hidden states at the last prompt token, last
    prompt tokens).
    The scanner calls ``pythia.scoring.score`` itself for GPT-NeoX (tests check both agree)."""
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
    """``pythia.scoring.score`` for GPT-NeoX (the Pythia branch's own code), ``score_any`` otherwise."""
    if getattr(model.config, "model_type", None) == "gpt_neox":
        from .scoring import score
        return score(model, encoded, batch_size, device)
    return score_any(model, encoded, batch_size, device)


@torch.no_grad()
def prompt_states(model, prompts: list[list[int]], batch_size: int = 16, device: str = "cpu") -> dict:
    """Next-token loss and last-token hidden states of token-id prompts.

    Returns {"nll_sum": float64 total of -log p(token t | tokens < t) over every prompt token
    after the first, "n_tokens": how many, "per_prompt": float64 (N,) mean loss per prompt (NaN
    for one-token prompts), "hidden": {name: float32 (N, d)} at each prompt's last token,
    "last_token": int64 (N,)}. Prompts are right-padded; padding is masked and never read."""
    names = hidden_names(model)
    order = sorted(range(len(prompts)), key=lambda i: (-len(prompts[i]), i))
    per = np.full(len(prompts), np.nan)
    total, count = 0.0, 0
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
            n = len(prompts[i])
            if n > 1:
                lp = torch.log_softmax(logits64(model, states[-1][b, :n - 1], logits[b, :n - 1]), -1)
                nll = -lp.gather(-1, ids[b, 1:n].to(device)[:, None])[:, 0]
                per[i] = float(nll.mean())
                total += float(nll.sum())
                count += n - 1
            for name, h in zip(names, states):
                if name not in hidden:
                    hidden[name] = torch.zeros(len(prompts), h.shape[-1], dtype=torch.float32)
                hidden[name][i] = h[b, n - 1].float().cpu()
    last = np.array([p[-1] for p in prompts], dtype=np.int64)
    return {"nll_sum": total, "n_tokens": count, "per_prompt": per, "hidden": hidden, "last_token": last}
