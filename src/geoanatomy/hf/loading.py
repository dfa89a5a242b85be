"""Safe local loading of Hugging Face causal LMs and tokenizers (package doc)."""
from __future__ import annotations

from pathlib import Path

import torch

DTYPES = ("float32", "bfloat16", "float16")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


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
    code, ``*.safetensors`` preferred, ``*.bin`` read with ``torch.load(weights_only=True)``)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    if dtype not in DTYPES:
        raise ScanLoadError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    hf_logging.disable_progress_bar()
    path = Path(root) / folder
    model_type(path)                                   # names the folder when config.json is unreadable
    config = AutoConfig.from_pretrained(str(path), trust_remote_code=False, local_files_only=True)
    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            str(path), config=config, dtype=getattr(torch, dtype), trust_remote_code=False,
            use_safetensors=None, weights_only=True, local_files_only=True, output_loading_info=True)
    except Exception as e:  # noqa: BLE001
        raise ScanLoadError(f"{path}: cannot load the weights ({type(e).__name__}: {e})") from e
    weights_match_config(info, path, ScanLoadError)
    return model.to(device).eval()


def weights_match_config(info: dict, where, error=ValueError) -> None:
    """Refuse a load whose weights do not fit the config (``from_pretrained(...,
    output_loading_info=True)``'s report): a weight the config's model has no place for
    (dropped in silence: a third layer under a config of two) or a parameter the weights do
    not hold (initialised at random and measured as if trained), naming the keys."""
    for kind, what in (("missing_keys", "the config's model has parameters the weights do not hold (they would be "
                                        "initialised at random)"),
                       ("unexpected_keys", "the weights hold tensors the config's model has no place for (they would "
                                           "be dropped)"),
                       ("mismatched_keys", "weights of another shape than the config's")):
        keys = [k if isinstance(k, str) else str(k[0]) for k in (info or {}).get(kind) or []]
        if keys:
            raise error(f"{where}: {what}: {', '.join(sorted(keys)[:6])}{' ...' if len(keys) > 6 else ''} "
                        f"({len(keys)} in all); the config and the weights are of different models")


def tokenizer_folder(root: str | Path, folder: str) -> Path | None:
    """``root/folder`` if it holds tokenizer files (``TOKENIZER_FILES``), else ``root`` if it
    does, else None (a checkpoint series keeps one tokenizer at its root)."""
    for where in (Path(root).expanduser() / folder, Path(root).expanduser()):
        if any((where / f).is_file() for f in TOKENIZER_FILES):
            return where
    return None


def load_tokenizer_for(root: str | Path, folder: str, tokenizer: str | None = None):
    """The tokenizer: ``tokenizer`` (a folder) when given, else ``tokenizer_folder(root, folder)``
    (local files only, no remote code)."""
    from transformers import AutoTokenizer
    where = Path(tokenizer) if tokenizer is not None else tokenizer_folder(root, folder)
    if where is None:
        raise ScanLoadError(f"{root}: no tokenizer files ({', '.join(TOKENIZER_FILES)}) in {root}/{folder}/ "
                            f"or {root}/; give the tokenizer folder with --tokenizer")
    try:
        return AutoTokenizer.from_pretrained(str(where), trust_remote_code=False, local_files_only=True)
    except Exception as e:  # noqa: BLE001
        raise ScanLoadError(f"tokenizer {where}: cannot load it ({type(e).__name__}: {e})") from e
