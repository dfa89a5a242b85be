"""Named hidden states of any Hugging Face causal LM (``forward_hidden``; names in the
package doc) and the module under training wrappers (``unwrap``)."""
from __future__ import annotations

import contextlib

import torch


def layer_names(n_layer: int) -> list[str]:
    """embed, block0 .. block{L-1}, ln_final (L = n_layer): the names of the states
    ``forward_hidden`` returns (package doc), the pipeline's own (``sizes.layer_names``), so
    a monitor's, a scan's, a Pythia run's and a pipeline run's tables name layers alike."""
    from ..sizes import layer_names as names
    return names(n_layer)


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
    names = layer_names(L)
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
