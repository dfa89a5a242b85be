"""Load Pythia checkpoints with Hugging Face transformers; clean the hub cache.

Sources (``settings.source_kind``):

* hub id ``org/name``: ``GPTNeoXForCausalLM.from_pretrained(id, revision="stepN")``
  (downloads into the HF cache unless it is there; set HF_HUB_OFFLINE=1 to forbid
  network access and use the cache only);
* local directory ``root``: ``root/stepN/`` holds ``config.json`` and the weights
  (``model.safetensors`` or ``pytorch_model.bin``, sharded or not), as written by
  ``save_pretrained`` or copied out of a hub snapshot.

Safety: ``trust_remote_code=False`` always; ``use_safetensors=None`` makes transformers
prefer ``*.safetensors`` where a revision has them and fall back to ``*.bin`` loaded with
``torch.load(weights_only=True)`` (``weights_only=True`` is passed explicitly).
Only GPT-NeoX checkpoints are accepted (the layer naming in ``scoring`` depends on it).

Precision: the weights load in ``pythia.dtype`` (the fingerprint is taken there);
``for_scoring`` then casts a half-precision model to float32, so every forward pass and
every hidden state is float32 at least, whatever the load dtype (scoring applies the
unembedding in float64 on top).

Fetching revisions, the hub's metadata (LFS sha256 of the weight files) and cleaning the
cache live in ``geoanatomy.hf.hub``, which the scanner uses too; they are imported here
under the names the branch has always used.
"""
from __future__ import annotations

from pathlib import Path

from ..hf.hub import (HUB_SMALL_FILES, HUB_WEIGHT_FILES, LoadError, cached_revision_bytes,  # noqa: F401
                      cached_weight_files, default_hub_api, delete_cached_revision, fetch_revision,
                      hub_weight_hashes, revision_files)
from ..hf.loading import TOKENIZER_FILES, tokenizer_folder, weights_match_config
from ..hf.scoring import for_scoring  # noqa: F401 (the branch's name for the cast to float32)

DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def _where(source: str, kind: str, revision: str, cache_dir: str | None) -> tuple[str, dict]:
    """(path or id, from_pretrained kwargs) for one revision."""
    if kind == "local":
        path = Path(source).expanduser() / revision
        if not (path / "config.json").is_file():
            raise LoadError(f"{source}: no {revision}/config.json (pythia.revisions asks for {revision})")
        return str(path), {"local_files_only": True}
    if kind == "hub":
        return source, {"revision": revision, "cache_dir": cache_dir}
    raise LoadError(f"{source}: unknown source kind {kind!r}")


def load_model(source: str, kind: str, revision: str, dtype: str = "float32", device: str = "cpu",
               cache_dir: str | None = None):
    """A GPT-NeoX causal LM at ``revision`` in eval mode on ``device``."""
    import torch
    from transformers import AutoConfig, GPTNeoXForCausalLM
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()                     # job logs: one line per revision

    where, kw = _where(source, kind, revision, cache_dir)
    try:
        config = AutoConfig.from_pretrained(where, trust_remote_code=False, **kw)
    except Exception as e:  # noqa: BLE001 - report which source/revision failed
        raise LoadError(f"{source} @ {revision}: cannot read the model config ({type(e).__name__}: {e})") from e
    if config.model_type != "gpt_neox":
        raise LoadError(f"{source} @ {revision}: model_type {config.model_type!r}; the Pythia branch "
                        f"expects GPT-NeoX checkpoints")
    try:
        model, info = GPTNeoXForCausalLM.from_pretrained(
            where, config=config, dtype=getattr(torch, DTYPES[dtype]), trust_remote_code=False,
            use_safetensors=None, weights_only=True, output_loading_info=True, **kw)
    except Exception as e:  # noqa: BLE001
        raise LoadError(f"{source} @ {revision}: cannot load the weights ({type(e).__name__}: {e})") from e
    weights_match_config(info, f"{source} @ {revision}", LoadError)
    return model.to(device).eval()


def load_tokenizer(source: str, kind: str, revision: str, cache_dir: str | None = None):
    """The tokenizer (same for every Pythia revision): local ``root/stepN`` if it has
    tokenizer files, else ``root``; hub: the repository at ``revision``."""
    from transformers import AutoTokenizer

    where, kw = _where(source, kind, revision, cache_dir)
    if kind == "local":
        folder = tokenizer_folder(source, revision)
        if folder is None:
            raise LoadError(f"{source}: no tokenizer files ({', '.join(TOKENIZER_FILES)}) in {source}/{revision}/ "
                            f"or {source}/")
        where = str(folder)
    try:
        return AutoTokenizer.from_pretrained(where, trust_remote_code=False, **kw)
    except Exception as e:  # noqa: BLE001
        raise LoadError(f"{source} @ {revision}: cannot load the tokenizer ({type(e).__name__}: {e})") from e
