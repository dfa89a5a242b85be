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
"""
from __future__ import annotations

from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


class LoadError(RuntimeError):
    """A checkpoint or tokenizer cannot be loaded; the message names source and revision."""


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
        model = GPTNeoXForCausalLM.from_pretrained(
            where, config=config, dtype=getattr(torch, DTYPES[dtype]), trust_remote_code=False,
            use_safetensors=None, weights_only=True, **kw)
    except Exception as e:  # noqa: BLE001
        raise LoadError(f"{source} @ {revision}: cannot load the weights ({type(e).__name__}: {e})") from e
    return model.to(device).eval()


def load_tokenizer(source: str, kind: str, revision: str, cache_dir: str | None = None):
    """The tokenizer (same for every Pythia revision): local ``root/stepN`` if it has
    tokenizer files, else ``root``; hub: the repository at ``revision``."""
    from transformers import AutoTokenizer

    where, kw = _where(source, kind, revision, cache_dir)
    if kind == "local" and not any((Path(where) / f).is_file() for f in TOKENIZER_FILES):
        where = str(Path(source).expanduser())
        if not any((Path(where) / f).is_file() for f in TOKENIZER_FILES):
            raise LoadError(f"{source}: no tokenizer files ({', '.join(TOKENIZER_FILES)}) in {source}/{revision}/ "
                            f"or {source}/")
    try:
        return AutoTokenizer.from_pretrained(where, trust_remote_code=False, **kw)
    except Exception as e:  # noqa: BLE001
        raise LoadError(f"{source} @ {revision}: cannot load the tokenizer ({type(e).__name__}: {e})") from e


def cached_revision_bytes(repo_id: str, revision: str, cache_dir: str | None = None) -> int | None:
    """Disk size of one cached hub revision (None if not cached)."""
    from huggingface_hub import scan_cache_dir
    try:
        info = scan_cache_dir(cache_dir)
    except Exception:  # noqa: BLE001 - no cache yet
        return None
    for repo in info.repos:
        if repo.repo_id == repo_id and repo.repo_type == "model":
            for rev in repo.revisions:
                if revision in rev.refs:
                    return int(rev.size_on_disk)
    return None


def delete_cached_revision(repo_id: str, revision: str, cache_dir: str | None = None) -> int:
    """Delete the cached snapshot of ``repo_id`` at branch ``revision`` (and its blobs when
    no other cached revision uses them) with huggingface_hub's cache API. Returns the bytes
    freed (0 when the revision is not cached)."""
    from huggingface_hub import scan_cache_dir
    try:
        info = scan_cache_dir(cache_dir)
    except Exception:  # noqa: BLE001 - no cache directory: nothing to delete
        return 0
    hashes = [rev.commit_hash for repo in info.repos if repo.repo_id == repo_id and repo.repo_type == "model"
              for rev in repo.revisions if revision in rev.refs]
    if not hashes:
        return 0
    strategy = info.delete_revisions(*hashes)
    freed = int(strategy.expected_freed_size)
    strategy.execute()
    return freed
