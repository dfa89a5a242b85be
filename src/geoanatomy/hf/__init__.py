"""Hugging Face causal LMs for the monitor, the scanner and the Pythia branch: named hidden
states, safe local loading and multiple-choice scoring for any architecture.

Hidden states (``forward_hidden``): ``output_hidden_states=True`` returns L + 1 tensors for
the decoder-only models of transformers (GPT-2, GPT-NeoX, Llama, ...): the embedding output,
the output of blocks 1 .. L-1, and the last block's output *after* the final norm. The last
block's output before the norm is taken with a forward hook on it, so every model gets the
same names (``layer_names``; the Pythia branch uses them too), the pipeline's own
(``geoanatomy.sizes.layer_names``: one vocabulary for every table, with its TransformerLens hook
``sizes.transformer_lens_hook``)::

    embed, block0 .. block{L-1}, ln_final

(``block{i}``: the output of block i, 0-based, before the final norm; ``ln_final``: after it.)
The block list is found as the ``nn.ModuleList`` of length L in the model (``transformer.h``,
``gpt_neox.layers``, ``model.layers``); where there is none, ``block{L-1}`` is left out.

Loading (``load_causal_lm``): local folders only, ``trust_remote_code=False`` always,
``*.safetensors`` preferred and ``*.bin`` read with ``torch.load(weights_only=True)``.
This package imports nothing else of geoanatomy but ``sizes`` (the layer names): the Pythia
branch, the scanner and the monitor build on it.
"""
from .hidden import block_list, forward_hidden, hidden_names, layer_names, n_layers, unwrap
from .loading import DTYPES, ScanLoadError, load_causal_lm, load_tokenizer_for, model_type, tokenizer_folder
from .scoring import for_scoring, logits64, prompt_states, score_any, score_items

__all__ = ["DTYPES", "ScanLoadError", "block_list", "for_scoring", "forward_hidden", "hidden_names", "layer_names",
           "load_causal_lm",
           "load_tokenizer_for", "logits64", "model_type", "n_layers", "prompt_states", "score_any", "score_items",
           "tokenizer_folder", "unwrap"]
