"""Safe local loading of Hugging Face causal LMs and tokenizers (package doc)."""
from __future__ import annotations

from pathlib import Path

import torch

DTYPES = ("float32", "bfloat16", "float16")


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

    from ..pythia.loading import LoadError, load_model
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
    from ..pythia.loading import LoadError, load_tokenizer
    try:
        if tokenizer is not None:
            from transformers import AutoTokenizer
            return AutoTokenizer.from_pretrained(str(tokenizer), trust_remote_code=False, local_files_only=True)
        return load_tokenizer(str(root), "local", folder)
    except LoadError as e:
        raise ScanLoadError(f"{e}; give the tokenizer folder with --tokenizer") from e
    except Exception as e:  # noqa: BLE001
        raise ScanLoadError(f"tokenizer {tokenizer}: cannot load it ({type(e).__name__}: {e})") from e
