"""Model facts that need no torch (read at Snakefile parse time): sizes, layer names,
parameter counts. It imports nothing: the vocabulary size is the tasks' fact
(``tasks.VOCAB_SIZE``), passed in.

``SIZES``: name -> (n_layer, d_model, n_head), roughly geometric from the study's ~405K
to its ~151M parameters, with large at ~85M. Parameter count with tied embeddings
(pinned in tests/test_model.py against the built model)::

    n_params = L (12 d^2 + 13 d) + 2 d + (V + T) d
"""
SIZES: dict[str, tuple[int, int, int]] = {
    "nano": (2, 128, 4),       # 0.41M  (the study's smallest: ~405K)
    "micro": (3, 192, 6),      # 1.35M
    "small": (6, 256, 8),      # 4.76M
    "medium": (8, 448, 7),     # 19.4M
    "large": (12, 768, 12),    # 85.1M  (the study: ~85M)
    "xlarge": (12, 1024, 16),  # 151.3M (the study: ~151M)
}

def layer_names(n_layer: int) -> list[str]:
    """Names of the hidden states a model returns, input side first:
    ``embed`` (token + position embedding), ``block0`` .. ``block{n-1}`` (residual stream
    after each block), ``ln_final`` (after the final LayerNorm, what the head reads)."""
    return ["embed"] + [f"block{i}" for i in range(n_layer)] + ["ln_final"]


# the names of an earlier version of the Hugging Face path (monitor, scanner, Pythia branch):
# layerK (1-based, the output of block K) and final_ln_post; read as the one vocabulary above
LEGACY_LAYERS = "layerK (K >= 1) = block{K-1}, final_ln_post = ln_final"


def canonical_layer(layer: str) -> str:
    """A layer name in the one vocabulary of every table (``layer_names``): ``embed``,
    ``block{i}``, ``ln_final``, other rows' names unchanged; the Hugging Face path's earlier
    names (``LEGACY_LAYERS``) read as their equivalents, so a config that says
    ``final_ln_post`` keeps meaning the same layer."""
    if layer == "final_ln_post":
        return "ln_final"
    if layer.startswith("layer") and layer[5:].isdigit() and int(layer[5:]) >= 1:
        return f"block{int(layer[5:]) - 1}"
    return layer


def transformer_lens_hook(layer: str) -> str:
    """The TransformerLens hook name of a layer of this project's tables, for a run exported
    to GPT-2 (``geoanatomy export``) and loaded in TransformerLens (``TransformerBridge`` or
    ``HookedTransformer``): ``embed`` -> ``blocks.0.hook_resid_pre`` (token + position
    embedding), ``block{i}`` -> ``blocks.{i}.hook_resid_post``, ``ln_final`` ->
    ``ln_final.hook_out`` (after the final LayerNorm's affine map, what the head reads);
    "" for rows that are not a residual-stream layer (output, all_params, heads, ...)."""
    if layer == "embed":
        return "blocks.0.hook_resid_pre"
    if layer == "ln_final":
        return "ln_final.hook_out"
    if layer.startswith("block") and layer[5:].isdigit():
        return f"blocks.{int(layer[5:])}.hook_resid_post"
    return ""


def n_params(size: str, vocab_size: int, block_size: int = 64) -> int:
    """Parameter count of a size without building it: L(12d^2 + 13d) + 2d + (V + T)d, for a
    vocabulary of ``vocab_size`` tokens (the tasks' one: ``tasks.VOCAB_SIZE``)."""
    L, d, _ = SIZES[size]
    return L * (12 * d * d + 13 * d) + 2 * d + (vocab_size + block_size) * d
