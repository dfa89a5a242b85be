"""What a scan reads: a list of checkpoint sources, one curve over all of them.

A source is

* a **folder** of ``stepN/`` or ``checkpoint-N/`` sub-folders (``find_checkpoints``), or
* a **hub revision** ``repo@revision`` (``EleutherAI/pythia-160m@step1000``; in YAML also
  ``{repo: ..., revision: ..., step: N}``): one checkpoint, fetched into the Hugging Face cache
  through the hub module (``hf.hub.fetch_revision``). Its step is read
  from the revision name (``stepN``, ``checkpoint-N``, ``stepN-tokens...`` as OLMo names them)
  unless ``step:`` gives it.

On the command line: ``geoanatomy scan SRC [SRC ...]`` (each a folder or ``repo@revision``),
or one YAML file::

    run: pythia-160m             # the run name in the table (default: the file's stem)
    cache_dir: /scratch/hf       # the Hugging Face cache (default: HF_HOME's)
    keep_cache: false            # true: leave what the scan downloaded in the cache
    sources:
      - EleutherAI/pythia-160m@step1000
      - {repo: EleutherAI/pythia-160m, revision: step2000}
      - runs/more-checkpoints    # a folder, relative to the YAML file

Two sources that give one step are refused (naming both), as are sources that differ in
architecture (``ARCH_FIELDS``: checked on every checkpoint's config.json before any weights
are downloaded or any model is built).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..hf.probes import ScanError

HUB_REF = re.compile(r"^(?P<repo>[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+)@(?P<rev>[A-Za-z0-9_.\-/]+)$")
REVISION_STEP = re.compile(r"^(?:step|checkpoint-)(0|[1-9][0-9]*)(?:[-_].*)?$")
YAML_KEYS = {"run", "cache_dir", "keep_cache", "sources"}
ENTRY_KEYS = {"repo", "revision", "step", "folder"}


@dataclass(frozen=True)
class Source:
    """One entry of a source list: a folder (``where`` its path) or a hub revision (``where``
    the repository id, ``revision`` its branch, ``step`` its training step)."""
    kind: str                          # "folder" | "hub"
    where: str
    revision: str | None = None
    step: int | None = None

    @property
    def label(self) -> str:
        return self.where if self.kind == "folder" else f"{self.where}@{self.revision}"


@dataclass
class SourceList:
    """The parsed list and the settings that came with it (a YAML file's)."""
    sources: list[Source]
    run: str | None = None
    cache_dir: str | None = None
    keep_cache: bool = False
    origin: str = "command line"
    base: Path = field(default_factory=Path.cwd)

    @property
    def single_folder(self) -> Path | None:
        """The folder, when the list is one folder (the classic ``geoanatomy scan DIR``)."""
        if len(self.sources) == 1 and self.sources[0].kind == "folder":
            return Path(self.sources[0].where)
        return None

    def default_run(self) -> str:
        if self.run:
            return self.run
        if self.origin != "command line":
            return Path(self.origin).stem
        first = self.sources[0]
        return Path(first.where).resolve().name if first.kind == "folder" else first.where.split("/")[-1]

    def default_out(self) -> Path:
        if self.single_folder is not None:
            return self.single_folder / "geoanatomy_scan"
        if self.origin != "command line":
            return Path(self.origin).with_name(Path(self.origin).stem + "_geoanatomy_scan")
        raise ScanError("several sources or a hub revision: give the output folder (--out)")


def _step_of(revision: str, where: str) -> int:
    m = REVISION_STEP.match(revision)
    if not m:
        raise ScanError(f"{where}: cannot read a step from revision {revision!r} (stepN, checkpoint-N or "
                        f"stepN-...); give it as {{repo: ..., revision: {revision}, step: N}} in a YAML source list")
    return int(m.group(1))


def parse_entry(entry, base: Path, where: str) -> Source:
    """One source from a string (a folder, or ``repo@revision``) or a YAML mapping; ``where``
    names it in errors (the file and the entry's index)."""
    if isinstance(entry, dict):
        extra = set(entry) - ENTRY_KEYS
        if extra:
            raise ScanError(f"{where}: unknown key(s) {sorted(extra)}; a source is {{repo, revision, step}} or "
                            f"{{folder}}")
        if "folder" in entry:
            if set(entry) != {"folder"}:
                raise ScanError(f"{where}: a folder source takes only `folder`")
            return _folder(str(entry["folder"]), base, where)
        if not isinstance(entry.get("repo"), str) or not isinstance(entry.get("revision"), str):
            raise ScanError(f"{where}: a hub source needs `repo` and `revision` (strings), got {entry}")
        step = entry.get("step")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
            raise ScanError(f"{where}: step must be a non-negative integer, got {step!r}")
        if not HUB_REF.match(f"{entry['repo']}@{entry['revision']}"):
            raise ScanError(f"{where}: {entry['repo']!r} is not a hub repository id (owner/name)")
        rev = entry["revision"]
        return Source("hub", entry["repo"], rev, _step_of(rev, where) if step is None else step)
    if not isinstance(entry, (str, Path)):
        raise ScanError(f"{where}: a source is a folder, `repo@revision` or a mapping, got {entry!r}")
    s = str(entry)
    p = Path(s).expanduser()
    if (p if p.is_absolute() else base / p).is_dir():
        return _folder(s, base, where)
    m = HUB_REF.match(s)
    if m:
        return Source("hub", m.group("repo"), m.group("rev"), _step_of(m.group("rev"), where))
    raise ScanError(f"{where}: {s!r} is neither a folder nor a hub revision (owner/name@revision)")


def _folder(s: str, base: Path, where: str) -> Source:
    p = Path(s).expanduser()
    p = p if p.is_absolute() else base / p
    if not p.is_dir():
        raise ScanError(f"{where}: no such folder {p}")
    return Source("folder", str(p))


def read_sources_file(path: str | Path) -> SourceList:
    """A YAML source list (module doc); errors name the file, the key or the entry."""
    import yaml
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ScanError(f"{path}: cannot read it as YAML ({e})") from e
    if isinstance(doc, list):
        doc = {"sources": doc}
    if not isinstance(doc, dict):
        raise ScanError(f"{path}: expected a mapping with `sources:` (or a list of sources)")
    extra = set(doc) - YAML_KEYS
    if extra:
        raise ScanError(f"{path}: unknown key(s) {sorted(extra)}; allowed: {sorted(YAML_KEYS)}")
    entries = doc.get("sources")
    if not isinstance(entries, list) or not entries:
        raise ScanError(f"{path}: `sources` must be a non-empty list")
    for k, typ in (("run", str), ("cache_dir", str), ("keep_cache", bool)):
        if doc.get(k) is not None and not isinstance(doc[k], typ):
            raise ScanError(f"{path}: `{k}` must be a {typ.__name__}, got {doc[k]!r}")
    base = path.resolve().parent
    sources = [parse_entry(e, base, f"{path}: sources[{i}]") for i, e in enumerate(entries)]
    cache = doc.get("cache_dir")
    if cache is not None and not Path(cache).expanduser().is_absolute():
        cache = str(base / Path(cache).expanduser())
    return SourceList(sources, run=doc.get("run"), cache_dir=cache, keep_cache=bool(doc.get("keep_cache", False)),
                      origin=str(path), base=base)


def source_list(src) -> SourceList:
    """A ``SourceList`` from what ``scan`` was given: a folder, a ``repo@revision``, a YAML file
    (``.yaml``/``.yml``), a list of those strings, or a ``SourceList``."""
    if isinstance(src, SourceList):
        return src
    items = list(src) if isinstance(src, (list, tuple)) else [src]
    if not items:
        raise ScanError("no sources given")
    if len(items) == 1 and str(items[0]).endswith((".yaml", ".yml")) and Path(str(items[0])).is_file():
        return read_sources_file(items[0])
    if any(str(x).endswith((".yaml", ".yml")) for x in items) and len(items) > 1:
        raise ScanError("a YAML source list is given alone (it lists every source)")
    if len(items) == 1 and not HUB_REF.match(str(items[0])) and not Path(str(items[0])).expanduser().is_dir():
        raise ScanError(f"{items[0]}: no such folder")
    return SourceList([parse_entry(x, Path(""), f"source {i + 1} ({x})") for i, x in enumerate(items)])
