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

Hub metadata (``hub_weight_hashes``): the LFS sha256 of every revision's weight files,
from ``HfApi.list_repo_tree(repo_id, revision=...)`` (each ``RepoFile`` carries
``lfs.sha256``; no file is downloaded). The client is injectable (``api=``) and
``default_hub_api`` returns None offline (HF_HUB_OFFLINE=1), so tests run against a fake
hub and an offline run falls back to fingerprints after loading.
"""
from __future__ import annotations

from pathlib import Path

from ..hf.loading import TOKENIZER_FILES, tokenizer_folder
from ..hf.scoring import for_scoring  # noqa: F401 (the branch's name for the cast to float32)

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


# what a scan fetches of a hub revision: the small files first (architecture and tokenizer are
# checked over every source before any weights are downloaded), then the weights
HUB_SMALL_FILES = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json", "vocab.json", "merges.txt", "tokenizer.model", "vocab.txt"]
HUB_WEIGHT_FILES = ["*.safetensors", "*.safetensors.index.json", "pytorch_model*.bin", "pytorch_model*.bin.index.json"]


def fetch_revision(repo_id: str, revision: str, cache_dir: str | None = None, *,
                   weights: bool | list[str] = True) -> Path:
    """The local snapshot folder of ``repo_id`` at branch ``revision`` in the Hugging Face cache
    (``huggingface_hub.snapshot_download``: downloaded unless cached; offline, HF_HUB_OFFLINE=1,
    only the cache is read). ``weights=False``: config and tokenizer files only; a list: those
    weight-file patterns (``HUB_WEIGHT_FILES`` when True). Nothing is
    loaded or run; the caller checks the weight files' sha256 against the hub's listing."""
    from huggingface_hub import snapshot_download
    patterns = HUB_SMALL_FILES + (list(weights) if isinstance(weights, list) else HUB_WEIGHT_FILES if weights else [])
    try:
        path = Path(snapshot_download(repo_id, revision=revision, cache_dir=cache_dir, allow_patterns=patterns))
    except Exception as e:  # noqa: BLE001 - name the source and revision
        raise LoadError(f"{repo_id} @ {revision}: cannot fetch it from the hub or the cache "
                        f"({type(e).__name__}: {e})"[:600]) from e
    if not (path / "config.json").is_file():
        raise LoadError(f"{repo_id} @ {revision}: no config.json in the revision ({path})")
    return path


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


def cached_weight_files(repo_id: str, revision: str, cache_dir: str | None = None) -> list[str]:
    """Names of the weight files (*.safetensors, pytorch_model*.bin) cached for ``repo_id`` at
    branch ``revision`` ([] when none: a revision with only its tokenizer cached counts as
    not downloaded)."""
    from huggingface_hub import scan_cache_dir
    try:
        info = scan_cache_dir(cache_dir)
    except Exception:  # noqa: BLE001 - no cache yet
        return []
    out = []
    for repo in info.repos:
        if repo.repo_id == repo_id and repo.repo_type == "model":
            for rev in repo.revisions:
                if revision in rev.refs:
                    out += [f.file_name for f in rev.files if f.file_name.endswith(".safetensors")
                            or (f.file_name.startswith("pytorch_model") and f.file_name.endswith(".bin"))]
    return sorted(out)


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


def default_hub_api():
    """``huggingface_hub.HfApi()``, or None when the hub may not be contacted (offline)."""
    from huggingface_hub import HfApi, constants
    if constants.HF_HUB_OFFLINE:
        return None
    return HfApi()


def _file_hash(entry) -> str | None:
    lfs = getattr(entry, "lfs", None)
    if lfs is not None:
        sha = getattr(lfs, "sha256", None) or (lfs.get("sha256") if isinstance(lfs, dict) else None)
        if sha:
            return f"lfs:{sha}"
    for attr, tag in (("xet_hash", "xet"), ("blob_id", "git")):
        v = getattr(entry, attr, None)
        if v:
            return f"{tag}:{v}"
    return None


def revision_files(api, repo_id: str, revision: str) -> dict[str, str | None]:
    """{path: content hash} of the files at the root of ``repo_id`` at ``revision`` (hub
    metadata only; LFS files give their sha256)."""
    out = {}
    for e in api.list_repo_tree(repo_id, revision=revision, recursive=False):
        if getattr(e, "size", None) is None and getattr(e, "lfs", None) is None and not hasattr(e, "blob_id"):
            continue                                   # a folder
        out[e.path] = _file_hash(e)
    return out


def hub_weight_hashes(repo_id: str, revisions: list[str], api=None, log=print) -> tuple[dict, dict]:
    """({revision: weight-files fingerprint or None}, info) from hub metadata, before any
    download. ``api``: an ``HfApi``-like client (``default_hub_api()`` when None); with no
    client (offline) every hash is None and info says why. A revision the hub cannot list
    gets None (it is then fingerprinted after loading, if selected)."""
    from .fingerprint import common_format, files_fingerprint
    api = default_hub_api() if api is None else api
    if api is None:
        return {r: None for r in revisions}, {"used": False, "reason": "offline (HF_HUB_OFFLINE): no hub metadata"}
    hashes, files, failed = {}, {}, {}
    for rev in revisions:
        try:
            f = revision_files(api, repo_id, rev)
        except Exception as e:  # noqa: BLE001 - one unlisted branch must not stop the plan
            hashes[rev], failed[rev] = None, f"{type(e).__name__}: {e}"[:300]
            continue
        files[rev] = f
    if failed and len(failed) == len(revisions):
        log(f"[pythia] {repo_id}: hub metadata unavailable ({next(iter(failed.values()))}); "
            f"duplicates are found after loading only")
        return hashes, {"used": False, "reason": "every metadata request failed", "failed": failed}
    # compare like with like: one weight format for every revision where one covers them all
    # (a branch with only pytorch_model.bin next to one with model.safetensors would otherwise
    # never match); mixed repositories fall back to what transformers loads per revision
    fmt = common_format(files)
    for rev, f in files.items():
        hashes[rev] = files_fingerprint(f, fmt)
    return hashes, {"used": True, "source": "HfApi.list_repo_tree (LFS sha256 of the weight files)",
                    "format": fmt or "mixed: per revision, safetensors where present", "failed": failed,
                    "files": files}
