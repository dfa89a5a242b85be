"""Hub revisions in a scan: fetched through the hub module both outside-model branches use
(``hf.hub``), checked, evicted.

For every ``repo@revision`` of a source list (``scan.sources``):

1. **Small files first** (``hf.hub.fetch_revision(weights=False)``: config.json and
   the tokenizer), for every revision, so the architecture check runs over all sources before
   any weights are downloaded.
2. **Weights**, one revision at a time, just before it is measured: the format transformers
   loads (``*.safetensors`` where the revision has them, else ``pytorch_model*.bin``).
3. **Integrity**: the sha256 of every weight file on disk must equal the LFS sha256 the hub
   lists for it (``hf.hub.revision_files``, the metadata the Pythia branch plans
   with); a difference stops the scan naming the file and both hashes, and a revision this
   scan downloaded is evicted first. Offline (no hub client) the check cannot be made:
   scan.json says so per revision.
4. **Eviction**: a revision whose weights were not in the cache when the scan reached it is
   deleted from the cache once measured (``hf.hub.delete_cached_revision``), unless
   ``keep_cache``; one that was there before is left. The revisions downloaded and not yet
   evicted are kept in ``partial/downloads.json``, so an interrupted scan still evicts them.

A measured revision's partial result is keyed on (config.json, weight files) as
``[name, sha256]`` pairs: from the cache when the weights are there, else from the hub's
listing, so a resumed scan reuses it without downloading the weights again.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..files import atomic_write_json, sha256_file
from ..hf.probes import ScanError
from ..hf.hub import (HUB_WEIGHT_FILES, LoadError, cached_weight_files, default_hub_api, delete_cached_revision,
                      fetch_revision, revision_files, weight_files)


def _lfs(v: str | None) -> str | None:
    """The sha256 of a listed file's ``lfs:<sha256>`` hash (None for a git or xet id)."""
    return v[4:] if isinstance(v, str) and v.startswith("lfs:") else None


class HubFetch:
    """The hub side of one scan (module doc)."""

    def __init__(self, sl, part_dir: Path, log, *, cache_dir: str | None = None, keep_cache: bool | None = None,
                 hub=None):
        self.cache_dir = cache_dir if cache_dir is not None else sl.cache_dir
        self.keep = sl.keep_cache if keep_cache is None else bool(keep_cache)
        self.api = default_hub_api() if hub is None else hub
        self.log = log
        self.path = part_dir / "downloads.json"
        try:
            self.downloaded = set(json.loads(self.path.read_text()))
        except (OSError, json.JSONDecodeError):
            self.downloaded = set()
        self.listings: dict[str, dict | None] = {}
        self.integrity: dict[str, str] = {}
        self.on_disk: dict[str, list] = {}
        self.freed, self.evicted, self.kept = 0, [], []

    def _save(self) -> None:
        atomic_write_json(self.path, sorted(self.downloaded))

    def _fetch(self, src, weights) -> Path:
        try:
            return fetch_revision(src.where, src.revision, self.cache_dir, weights=weights)
        except LoadError as e:
            raise ScanError(str(e)) from e

    def listing(self, src) -> dict | None:
        """{path: hash} of the revision as the hub lists it; None offline or when it cannot list it."""
        if src.label not in self.listings:
            if self.api is None:
                self.listings[src.label] = None
                self.integrity[src.label] = "not checked: offline (HF_HUB_OFFLINE), no hub metadata"
            else:
                try:
                    self.listings[src.label] = revision_files(self.api, src.where, src.revision)
                except Exception as e:  # noqa: BLE001 - recorded, the scan goes on from the cache
                    self.listings[src.label] = None
                    self.integrity[src.label] = f"not checked: the hub did not list it ({type(e).__name__}: {e})"[:300]
        return self.listings[src.label]

    def small(self, src) -> tuple[Path, str]:
        """(root, folder) of the revision's snapshot with its config and tokenizer on disk."""
        if not cached_weight_files(src.where, src.revision, self.cache_dir):
            self.downloaded.add(src.label)            # its weights will come from the hub: evicted after
            self._save()
        snap = self._fetch(src, False)
        return snap.parent, snap.name

    def _config_pair(self, src) -> list:
        snap = self._fetch(src, False)
        return ["config.json", sha256_file(snap / "config.json")]

    def expected_identity(self, ck) -> list | None:
        """The revision's (config.json, weight files) as [name, sha256] pairs without downloading
        its weights: from the cache when they are there, else from the hub's listing; None when
        neither can say (offline and evicted)."""
        src = ck.source
        if cached_weight_files(src.where, src.revision, self.cache_dir):
            return self.identity_on_disk(ck, self._fetch(src, False))
        listed = self.listing(src)
        if listed is None:
            return None
        w = {p: _lfs(h) for p, h in weight_files(listed).items()}
        if not w or not all(w.values()):
            return None
        return [self._config_pair(src)] + [[p, w[p]] for p in sorted(w)]

    def identity_on_disk(self, ck, snap: Path | None = None) -> list:
        snap = snap if snap is not None else ck.root / ck.folder
        if ck.source.label not in self.on_disk:
            names = {f.name: f for f in snap.iterdir() if f.is_file()}
            w = weight_files({n: n for n in names})
            self.on_disk[ck.source.label] = [["config.json", sha256_file(snap / "config.json")]] + \
                [[n, sha256_file(names[n])] for n in sorted(w)]
        return self.on_disk[ck.source.label]

    def weights(self, src) -> tuple[Path, str]:
        """(root, folder) of the revision's snapshot with its weights on disk, checked against
        the hub's LFS sha256 where the hub lists them (module doc)."""
        listed = self.listing(src)
        patterns = HUB_WEIGHT_FILES
        if listed is not None and any(p.endswith(".safetensors") for p in listed):
            patterns = [p for p in HUB_WEIGHT_FILES if "safetensors" in p]     # not the .bin copies too
        snap = self._fetch(src, patterns)
        names = {f.name for f in snap.iterdir() if f.is_file()}
        if not weight_files({n: n for n in names}):
            raise ScanError(f"{src.label}: no weight files (*.safetensors, pytorch_model*.bin) in the revision "
                            f"({snap})")
        if listed is not None:
            want = {p: _lfs(h) for p, h in weight_files(listed).items()}
            for p, sha in sorted(want.items()):
                got = sha256_file(snap / p) if (snap / p).is_file() else None
                if sha is None or got != sha:
                    if src.label in self.downloaded:
                        delete_cached_revision(src.where, src.revision, self.cache_dir)
                        self.downloaded.discard(src.label)
                        self._save()
                    what = "missing" if got is None else f"sha256 {got[:16]}..."
                    raise ScanError(f"{src.label}: {p}: {what} in the cache, the hub lists "
                                    f"{'no LFS sha256' if sha is None else f'sha256 {sha[:16]}...'}; the revision "
                                    f"was not measured{' and was evicted' if got is not None else ''}")
            self.integrity[src.label] = "checked: every weight file's sha256 equals the hub's LFS sha256"
        return snap.parent, snap.name

    def done(self, src, reused: bool = False) -> None:
        """The revision is measured (or reused): evict it if this scan downloaded it."""
        if reused and src.label not in self.integrity:
            self.integrity[src.label] = ("reused from partial/: its weight files' sha256 equal the cache's or the "
                                         "hub's listing")
        if src.label in self.downloaded and not self.keep:
            self.freed += delete_cached_revision(src.where, src.revision, self.cache_dir)
            self.evicted.append(src.label)
            self.downloaded.discard(src.label)
            self._save()
        elif src.label not in self.downloaded and src.label not in self.kept:
            self.kept.append(src.label)
            self.log(f"[scan] {src.label}: was in the hub cache before this scan; left there")

    def record(self) -> dict:
        """What scan.json says of the hub revisions."""
        return {"cache_dir": self.cache_dir, "keep_cache": self.keep, "integrity": dict(sorted(self.integrity.items())),
                "evicted": self.evicted, "freed_bytes": self.freed, "kept_preexisting": self.kept,
                "still_downloaded": sorted(self.downloaded)}
