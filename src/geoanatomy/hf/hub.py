"""The Hugging Face hub, as the Pythia branch and the checkpoint scanner both use it: fetching a
revision into the cache (``fetch_revision``: config and tokenizer first, then the weights),
the hub's metadata (``revision_files``, ``hub_weight_hashes``: the LFS sha256 of every
revision's weight files from ``HfApi.list_repo_tree``, no file downloaded), the weight files'
fingerprint (``weight_files``, ``files_fingerprint``, ``common_format``), and the cache
(``cached_revision_bytes``, ``cached_weight_files``, ``delete_cached_revision``).

The client is injectable (``api=``) and ``default_hub_api`` returns None offline
(HF_HUB_OFFLINE=1), so tests run against a fake hub and an offline run falls back to
fingerprints after loading. Nothing here loads a model or runs code from the hub.
"""
from __future__ import annotations

import hashlib
from pathlib import Path


class LoadError(RuntimeError):
    """A checkpoint or tokenizer cannot be loaded or fetched; the message names source and revision."""


def weight_files(files: dict[str, str], fmt: str | None = None) -> dict[str, str]:
    """{path: sha256} of a revision's files -> its weight files: ``fmt`` "safetensors"
    (``*.safetensors``) or "bin" (``pytorch_model*.bin``); None = what transformers would
    load (the safetensors files if any, else the .bin files)."""
    st = {p: s for p, s in files.items() if p.endswith(".safetensors")}
    pt = {p: s for p, s in files.items() if p.split("/")[-1].startswith("pytorch_model") and p.endswith(".bin")}
    if fmt == "safetensors":
        return st
    if fmt == "bin":
        return pt
    return st or pt


def files_fingerprint(files: dict[str, str], fmt: str | None = None) -> str | None:
    """One sha256 for a revision's weight files ({path: LFS sha256}, see ``weight_files``);
    None without any."""
    w = weight_files(files, fmt)
    if not w or any(not s for s in w.values()):
        return None
    h = hashlib.sha256()
    for p in sorted(w):
        h.update(p.encode() + b"\0" + str(w[p]).encode() + b"\n")
    return h.hexdigest()


def common_format(listings: dict[str, dict[str, str]]) -> str | None:
    """The weight format every listed revision has ("safetensors" preferred, else "bin"), so
    that file hashes compare like with like; None when no single format covers them all."""
    with_weights = [f for f in listings.values() if weight_files(f)]
    for fmt in ("safetensors", "bin"):
        if with_weights and all(weight_files(f, fmt) for f in with_weights):
            return fmt
    return None


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
