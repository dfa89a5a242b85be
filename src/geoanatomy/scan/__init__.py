"""``geoanatomy scan SOURCE...``: the geometric events of any Hugging Face causal-LM
checkpoints, one curve over a list of sources (``scan.sources``: folders and hub revisions
``repo@revision``, on the command line or in one YAML file; hub revisions are fetched, checked
and evicted by ``scan.hub``).

A folder: ``DIR/stepN/`` or ``DIR/checkpoint-N/`` sub-folders (as the Pythia hub revisions and
the ``transformers.Trainer`` write them), each with ``config.json`` and weights
(``model.safetensors`` / ``pytorch_model.bin``, sharded or not); the tokenizer in the
checkpoint folder, in ``DIR`` or given with ``--tokenizer``. A probe set:

* a shipped benchmark by name (``pythia.settings.BENCHMARKS``: syntax, deduction3, ...):
  multiple-choice items scored by option log-likelihood (``hf.choice``), so there is an
  accuracy and an acquisition step;
* a ``.jsonl`` file of ``{"prompt": ..., "completion": ...}`` lines (the prompt-completion
  format of TRL and the Trainer's instruction datasets): only the completion is scored, the
  prompt is context, as a model trained with its prompt labels masked (-100) was trained; the
  accuracy is the exact match of the completion under teacher forcing (chance taken as 0), so
  there is an acquisition step under the pipeline's event rules;
* any other text file, one prompt a line (blank lines skipped): no answers, so no accuracy;
  the behaviour curve is the probe-set loss, the mean next-token loss over the prompts.

A probe file must be UTF-8 (else an error naming the byte and line). When more than
``hf.probes.UNKNOWN_WARN_SHARE`` (5%) of its tokens are the tokenizer's unknown token, a
warning says so (the share is in scan.json and precursor.json either way).

Per checkpoint, ``measure_model`` (the function the Pythia extraction can call, module
``pythia.extract`` keeps its own loop) gives the rows of the long table (``geoanatomy.table``):

benchmark  accuracy, accuracy_norm, accuracy_sum, accuracy_mean, logprob, logprob_per_token,
           logprob_choice (exactly the Pythia branch's rows), layer "output", position "options"
prompts    loss: mean next-token loss over every prompt token after the first (float64),
           layer "output", position "tokens", variant "probe"
completions  loss over the completion tokens (variant "probe"), accuracy (exact match),
           token_accuracy, accuracy_norm (= accuracy), position "completion"
both       rankme (variants uncentred / centred) and mean_share at every layer (``geoanatomy.hf``
           names, the pipeline's: embed, block0..block{L-1}, ln_final), position "last_prompt" (each
           prompt's last token), N = prompts / items (RankMe is capped at min(N, d))

Outputs in ``OUT`` (default ``DIR/geoanatomy_scan``): ``metrics.csv``, ``precursor.json``
(``precursor.record.report_record``), ``trajectory.png``, ``scan.json`` (provenance and timings) and
``partial/<checkpoint>.json``, one per measured checkpoint: a rerun reuses every partial
whose settings (probe set content, dtype, batch size, eps, scoring) and weight files (names,
sizes, content sha256) are unchanged and whose own seal checks, so an interrupted scan resumes
where it stopped and an edited partial is measured again.

Refused before any model is built (and before a hub revision's weights are downloaded): a
step given by two sources, checkpoints of more than one architecture (model type,
layers, width from config.json) and a config.json describing more than ``MAX_PARAMS``
parameters. Named in the log, scan.json and precursor.json: folders that look like
checkpoints but are not used (``checkpoint-abc``, ``step-5``, no config.json) and checkpoints
with non-finite weights (not measured).

Precision: weights load in ``--dtype`` and are cast to float32 for measuring
(``hf.for_scoring``); log-probabilities and losses are float64 (the output
embedding applied in float64, ``geoanatomy.hf.logits64``), RankMe in float64.

Safety: folders are read as local files only (every load passes ``local_files_only=True``; no
environment variable is changed, so one process can scan folders and hub revisions); hub
revisions come through the Hugging Face cache, their weight sha256 checked against the hub's
listing; ``trust_remote_code=False``,
safetensors or ``torch.load(weights_only=True)`` only (``geoanatomy.hf.load_causal_lm``).
"""
from __future__ import annotations

import gc
import json
import platform
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ..files import atomic_write_json, json_safe, sha256_file
from ..precursor.seal import write_sealed
from ..spec import settings_hash
from ..table import read_table, write_table
from .hub import HubFetch
from .sources import Source, SourceList, source_list

_UNIT = {"benchmark": "items", "prompts": "prompts", "completions": "prompt/completion pairs"}

CKPT_DIR = re.compile(r"^(?:step|checkpoint-)(0|[1-9][0-9]*)$")
LOOKS_LIKE = re.compile(r"^(?:step|checkpoint)[-_]?", re.I)      # a folder meant as a checkpoint
# 2: the cache is keyed on the weight files' content hashes; 3: the pipeline's layer names
# (block{i}, ln_final), so no cached partial keeps the old ones
SCAN_VERSION = 3
MAX_PARAMS = 20_000_000_000        # refuse to build a model larger than this (from config.json)


from ..hf.probes import (ProbeSet, ScanError, benchmark_rows, geometry_rows_of,  # noqa: F401,E402 (re-exported)
                              load_probe_set, measure_model)


# ---------------------------------------------------------------------------- the folder
def find_checkpoints(root: str | Path, skipped: list | None = None) -> list[tuple[int, str]]:
    """[(step, folder name)] of ``root``'s ``stepN`` / ``checkpoint-N`` sub-folders holding a
    config.json, by step. Two folders with one step (``step5`` and ``checkpoint-5``) are an error.
    Folders that look like checkpoints but are not used (``checkpoint-abc``, ``step-5``, one
    without config.json) are appended to ``skipped`` as (name, reason)."""
    root = Path(root)
    if not root.is_dir():
        raise ScanError(f"{root}: no such folder")
    found: dict[int, str] = {}
    for d in sorted(root.iterdir()):
        m = CKPT_DIR.match(d.name)
        if not d.is_dir():
            continue
        if not m:
            if LOOKS_LIKE.match(d.name) and skipped is not None:
                skipped.append((d.name, "not named stepN or checkpoint-N (N a step without leading zeros)"))
            continue
        if not (d / "config.json").is_file():
            if skipped is not None:
                skipped.append((d.name, "no config.json"))
            continue
        s = int(m.group(1))
        if s in found:
            raise ScanError(f"{root}: {found[s]}/ and {d.name}/ are both step {s}; keep one")
        found[s] = d.name
    if not found:
        raise ScanError(f"{root}: no checkpoint sub-folders (stepN/ or checkpoint-N/ with a config.json)")
    return sorted(found.items())


def config_size(folder: Path) -> dict:
    """(model_type, layers, width, an upper estimate of parameters) from config.json alone, before
    any model is built: 12 L d^2 + 2 V d + P d (blocks, untied embeddings, positions)."""
    try:
        c = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise ScanError(f"{folder}/config.json: cannot read it ({e})") from e
    get = lambda *ks: next((c[k] for k in ks if isinstance(c.get(k), int) and not isinstance(c.get(k), bool)), None)
    L = get("n_layer", "num_hidden_layers", "num_layers")
    d = get("n_embd", "hidden_size", "d_model")
    V = get("vocab_size") or 0
    P = get("n_positions", "max_position_embeddings") or 0
    if L is None or d is None or L < 1 or d < 1:
        raise ScanError(f"{folder}/config.json: no layer count or width (n_layer/num_hidden_layers, "
                        f"n_embd/hidden_size)")
    return {"model_type": c.get("model_type"), "n_layer": L, "d_model": d,
            "n_head": get("n_head", "num_attention_heads", "n_heads"), "vocab_size": V or None,
            "n_ctx": P or None, "tokenizer": _tokenizer_identity(folder),
            "params_bound": 12 * L * d * d + 2 * V * d + P * d}


# what a curve's meaning depends on: folders that differ in any of these are not one model's
# training (2 vs 4 heads; a 32- vs 64-token vocabulary, whose loss differs by log V, not learning)
ARCH_FIELDS = (("model type", "model_type"), ("layers", "n_layer"), ("width", "d_model"),
               ("attention heads", "n_head"), ("vocabulary size", "vocab_size"), ("context length", "n_ctx"),
               ("tokenizer", "tokenizer"))
_TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model", "vocab.txt")


def _tokenizer_identity(folder: Path) -> str | None:
    """sha256 (12 digits) of the tokenizer files a checkpoint folder holds; None without any."""
    import hashlib
    files = [folder / n for n in _TOKENIZER_FILES if (folder / n).is_file()]
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:12]


def check_one_architecture(root: Path, sizes: dict) -> None:
    """ScanError naming the first field of ``ARCH_FIELDS`` in which the checkpoint folders
    differ, with both values and a folder of each (a folder without a tokenizer is not
    compared on it)."""
    for what, key in ARCH_FIELDS:
        by: dict = {}
        for f, v in sizes.items():
            if key == "tokenizer" and v.get(key) is None:
                continue
            by.setdefault(v.get(key), []).append(f)
        if len(by) > 1:
            shown = "; ".join(f"{val!r} in {', '.join(fs[:3])}{' ...' if len(fs) > 3 else ''}"
                              for val, fs in by.items())
            raise ScanError(f"{root}: the checkpoints differ in {what} ({key}): {shown}. One curve cannot mix"
                            " them (what a curve means depends on it); scan each model's folders on their own")


def _determines_weights(name: str) -> bool:
    return name == "config.json" or name.endswith((".safetensors", ".index.json")) or name.startswith("pytorch_model")


def weights_identity(folder: Path) -> list:
    """(name, size, sha256) of the files that determine a checkpoint: config.json and the
    weight files (``*.safetensors``, ``pytorch_model*``, shard indexes). A content hash, so a
    copy (``cp -a``) or a touched file is still recognised and an edited one is not."""
    return [[f.name, f.stat().st_size, sha256_file(f)] for f in sorted(folder.iterdir())
            if f.is_file() and _determines_weights(f.name)]


def _load_partial(path: Path, key: str, ident: list) -> dict | None:
    """A cached checkpoint result, if it was made with these settings from these weight files
    and is unedited (its seal checks); else None (the checkpoint is measured again)."""
    from ..precursor.seal import seal_problem
    try:
        d = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(d, dict) or seal_problem(d) or d.get("numbers_key") != key or d.get("weights") != ident:
        return None
    for r in d["rows"]:                 # strict JSON stored NaN as null
        if r["value"] is None:
            r["value"] = float("nan")
    return d


def train_rows(rows: list[dict]) -> list[dict]:
    """The training probe's behaviour rows as the training-fit event reads them: its accuracy and
    chance-normalised accuracy renamed ``train_accuracy`` / ``train_accuracy_norm``, variant
    "train" (the monitor's names for its train_probe)."""
    return [{**r, "measure": f"train_{r['measure']}", "variant": "train"} for r in rows
            if r["measure"] in ("accuracy", "accuracy_norm") and r["layer"] == "output"]


def _source_field(sl: SourceList, resolved: bool = False):
    """What scan.json and precursor.json record as the source: the folder (one folder, as
    before), else the list of source labels."""
    if sl.single_folder is not None:
        return str(sl.single_folder.resolve() if resolved else sl.single_folder)
    return [x.label if x.kind == "hub" or not resolved else str(Path(x.where).resolve()) for x in sl.sources]


# what a scan hands the registry's signals (measures.signals.INPUTS): the weights of each
# checkpoint and the trailing window of the ones before it; it computes every signal whose
# inputs lie within these (measures.signal_registry.offered)
SIGNAL_INPUTS = frozenset({"weights", "window"})


@dataclass
class Checkpoint:
    """One checkpoint of a source list: its step, a name unique in the scan (the partial file's),
    the source it comes from and, once on disk, ``root / folder`` (a hub revision's is its
    snapshot in the Hugging Face cache)."""
    step: int
    name: str
    source: Source
    root: Path
    folder: str


def _checkpoints(sl: SourceList, skipped: list) -> list[Checkpoint]:
    """Every source's checkpoints by step; a step given by two sources is refused, naming both."""
    out: dict[int, Checkpoint] = {}
    several = len(sl.sources) > 1
    for src in sl.sources:
        if src.kind == "folder":
            root = Path(src.where)
            found: list = []
            got = find_checkpoints(root, found)
            skipped += [((f"{root.name}/{n}" if several else n), w) for n, w in found]
            new = [Checkpoint(st, f"{root.name}--{f}" if several else f, src, root, f) for st, f in got]
        else:
            name = f"{src.where.replace('/', '--')}@{src.revision.replace('/', '--')}"
            new = [Checkpoint(src.step, name, src, Path(), "")]
        for c in new:
            if c.step in out:
                a, b = out[c.step], c
                raise ScanError(f"step {c.step} is given twice: by {a.source.label}"
                                f"{'/' + a.folder if a.source.kind == 'folder' else ''} and by {b.source.label}"
                                f"{'/' + b.folder if b.source.kind == 'folder' else ''}; keep one")
            out[c.step] = c
    return [out[k] for k in sorted(out)]


def scan(root, probe: str, out_dir: str | Path | None = None, *, run: str | None = None,
         tokenizer: str | None = None, n_items: int | None = None, seed: int = 0, device: str = "auto",
         dtype: str = "float32", batch_size: int = 16, eps: float = 1e-7, scoring: str = "sum",
         layer: str | None = None, cfg_events: dict | None = None, log=print, signals=(),
         cache_dir: str | None = None, keep_cache: bool | None = None, hub=None,
         train_probe: str | None = None) -> dict:
    """Scan checkpoints (module doc) into one curve; returns the precursor dict. ``root``: a
    folder, a ``repo@revision``, a YAML source list, or a list of folders and revisions
    (``scan.sources``). ``signals``: registry signals read off the weights alone (those whose
    inputs lie within ``SIGNAL_INPUTS``) added to every checkpoint's rows. Hub revisions: ``cache_dir`` the Hugging
    Face cache, ``keep_cache`` leaves what the scan downloaded there (default: evicted once
    measured), ``hub`` an ``HfApi``-like client for the integrity check (default
    ``hf.hub.default_hub_api()``: None offline, then the check is recorded as not made).
    ``train_probe``: a second probe set with answers (completions or a benchmark) drawn from the
    *training* data: its accuracy becomes ``train_accuracy`` / ``train_accuracy_norm`` rows
    (variant "train") and precursor.json gains the training-fit event
    (``train_acquisition_step``) and ``generalisation_delay`` (grokking's delay)."""
    from ..measures.signal_registry import computations, requested
    signals = tuple(signals or ())
    try:
        wanted = requested(signals, SIGNAL_INPUTS, "--signals")
    except ValueError as e:
        raise ScanError(f"{e} (a scan reads the weights alone; the monitor offers the probe-reading ones)") from None
    sl = source_list(root)
    has_hub = any(x.kind == "hub" for x in sl.sources)
    import torch
    import transformers

    from ..runtime import pick_device
    from ..hf import for_scoring, load_causal_lm, load_tokenizer_for
    from ..precursor.record import report_record
    from ..plots import plot_report

    out_dir = Path(out_dir) if out_dir is not None else sl.default_out()
    run = run or sl.default_run()
    device = pick_device(device)
    skipped: list = []
    ckpts = _checkpoints(sl, skipped)
    for name, why in skipped:
        log(f"[scan] {run}: skipped {name}/: {why}")
    part_dir = out_dir / "partial"
    fetch = HubFetch(sl, part_dir, log, cache_dir=cache_dir, keep_cache=keep_cache, hub=hub) if has_hub else None
    if fetch is not None:
        for c in ckpts:                         # config and tokenizer only: nothing large before the checks
            if c.source.kind == "hub":
                c.root, c.folder = fetch.small(c.source)
    sizes = {c.name: config_size(c.root / c.folder) for c in ckpts}       # before any model is built
    big = {f: v["params_bound"] for f, v in sizes.items() if v["params_bound"] > MAX_PARAMS}
    if big:
        f, n = next(iter(big.items()))
        c = next(c for c in ckpts if c.name == f)
        raise ScanError(f"{c.root / c.folder}/config.json describes a model of up to {n:.3g} parameters (more than "
                        f"{MAX_PARAMS:.3g}); refusing to build it")
    shown = {c.name: (c.folder if sl.single_folder is not None else
                      (c.source.label if c.source.kind == "hub" else f"{c.source.where}/{c.folder}")) for c in ckpts}
    check_one_architecture(sl.single_folder or sl.origin, {shown[k]: v for k, v in sizes.items()})
    last = ckpts[-1]
    tok = load_tokenizer_for(last.root, last.folder, tokenizer)
    probe_set = load_probe_set(probe, tok, n_items, seed, log=log)
    train_set = load_probe_set(train_probe, tok, n_items, seed, log=log) if train_probe else None
    if train_set is not None and train_set.kind == "prompts":
        raise ScanError(f"--train-probe {train_probe}: a training-fit event needs answers (a .jsonl of prompt/"
                        f"completion pairs or a benchmark), not a prompt file")
    key = settings_hash({"probe": probe_set.identity(), "dtype": dtype, "batch_size": batch_size, "eps": eps,
                         "scoring": scoring, "version": SCAN_VERSION,
                         **({"train_probe": train_set.identity()} if train_set is not None else {}),
                         **({"signals": list(signals)} if signals else {})})
    from ..measures import signals as sig
    window = sig.SignalWindow()
    where = sl.single_folder or ", ".join(x.label for x in sl.sources[:3]) + (" ..." if len(sl.sources) > 3 else "")
    log(f"[scan] {run}: {len(ckpts)} checkpoints in {where}, probe set {probe_set.name} ({probe_set.kind}, "
        f"{len(probe_set.encoded)} {_UNIT[probe_set.kind]}), device {device}")
    rows: list[dict] = []
    timing: dict = {}
    model_info = None
    non_finite: list[str] = []
    t_all = time.time()
    for ck in ckpts:
        step, folder = ck.step, ck.name
        hubsrc = ck.source.kind == "hub"
        ident = fetch.expected_identity(ck) if hubsrc else weights_identity(ck.root / ck.folder)
        part = _load_partial(part_dir / f"{folder}.json", key, ident)
        if part is not None:
            window = sig.SignalWindow()      # the update window restarts after a reused checkpoint
            rows += part["rows"]
            timing[folder] = part["timing"]
            model_info = model_info or part.get("model")
            log(f"[scan] {run} {folder}: reused {part_dir / (folder + '.json')}")
            if hubsrc:
                fetch.done(ck.source, reused=True)
            continue
        t0 = time.time()
        if hubsrc:
            ck.root, ck.folder = fetch.weights(ck.source)                # integrity-checked
            ident = fetch.identity_on_disk(ck)
        model = for_scoring(load_causal_lm(ck.root, ck.folder, dtype, device))     # float32 at least
        t_load = time.time() - t0
        if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
            non_finite.append(folder)
            log(f"[scan] {run} {folder}: WARNING: non-finite weights (NaN or inf); not measured, listed in "
                f"scan.json and precursor.json as non_finite_checkpoints")
            del model
            if hubsrc:
                fetch.done(ck.source)
            continue
        c = model.config
        from ..hf import hidden_names
        info = {"model_type": c.model_type, "n_params": int(sum(p.numel() for p in model.parameters())),
                "n_layer": int(c.num_hidden_layers), "d_model": int(c.hidden_size),
                "layer_names": hidden_names(model)}
        model_info = model_info or info
        t0 = time.time()
        r = measure_model(model, probe_set, run=run, step=step, batch_size=batch_size, device=device, eps=eps,
                          scoring=scoring)
        if train_set is not None:
            r += train_rows(measure_model(model, train_set, run=run, step=step, batch_size=batch_size,
                                          device=device, eps=eps, scoring=scoring))
        if any("window" in x.reads for x in wanted):
            window.feed(step, model, None)
        state = sig.SignalState(model=model, step=step, window=window)
        keep = {x.measure for x in wanted}
        r += [{"run": run, "step": step, **x} for c in computations(wanted) for x in c.rows(state)
              if x["measure"] in keep]
        t_meas = time.time() - t0
        del model
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        tm = {"load_s": round(t_load, 3), "measure_s": round(t_meas, 3)}
        write_sealed(part_dir / f"{folder}.json", json_safe({
            "numbers_key": key, "folder": folder, "step": step, "weights": ident, "timing": tm,
            "model": info, "rows": r}))
        if hubsrc:
            fetch.done(ck.source)
        rows += r
        timing[folder] = tm
        log(f"[scan] {run} {folder}: load {t_load:.1f} s, measure {t_meas:.1f} s")
    if not rows:
        raise ScanError(f"{where}: no checkpoint could be measured (non-finite weights in {non_finite})")
    rows.sort(key=lambda x: x["step"])                 # stable: the row order within a step is kept
    write_table(out_dir / "metrics.csv", rows)
    df = read_table(out_dir / "metrics.csv")
    pre = report_record(df, run=run, kind="scan", n_params=model_info["n_params"], cfg_events=cfg_events,
                       layer=layer, position="last_prompt", eps=eps,
                       extra={"source": _source_field(sl), "probe_set": {"name": probe_set.name, "kind": probe_set.kind,
                                                                  "n": len(probe_set.encoded),
                                                                  "unknown_token_share": probe_set.unknown_share},
                              "scoring": scoring if probe_set.kind == "benchmark" else None,
                              **({"train_probe_set": {"name": train_set.name, "kind": train_set.kind,
                                                      "n": len(train_set.encoded)}} if train_set is not None else {}),
                              "model": model_info, "non_finite_checkpoints": non_finite,
                              "skipped_folders": [{"folder": n, "reason": w} for n, w in skipped]})
    for w in pre.get("warnings") or []:
        log(f"[scan] {run}: warning: {w}")
    pre = write_sealed(out_dir / "precursor.json", pre)
    plot_report(df, pre, out_dir / "trajectory.png")
    probe_info = {"name": probe_set.name, "kind": probe_set.kind, "n": len(probe_set.encoded),
                  "sha256": probe_set.identity(), "unknown_token_share": probe_set.unknown_share}
    atomic_write_json(out_dir / "scan.json", json_safe({
        "run": run, "source": _source_field(sl, resolved=True), "checkpoints": [c.name for c in ckpts],
        "steps": [c.step for c in ckpts], **({"hub": fetch.record()} if fetch is not None else {}),
        "probe_set": probe_info, "device": device, "dtype": dtype, "batch_size": batch_size, "eps": eps,
        "scoring": scoring, "numbers_key": key, "model": model_info, "timing": timing,
        "non_finite_checkpoints": non_finite, "skipped_folders": [{"folder": n, "reason": w} for n, w in skipped],
        "wall_seconds": round(time.time() - t_all, 2),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
        "safety": ("local files (hub revisions through the Hugging Face cache, weight sha256 checked against the "
                   "hub's listing where it answers), trust_remote_code=False, safetensors or "
                   "torch.load(weights_only=True)")}))
    rm = pre["measures"]["rankme"]
    beh = pre["behaviour"]
    what = (f"acquisition {pre['acquisition_step']}" if beh["kind"] == "accuracy"
            else f"probe loss {beh['loss']['init']:.3f} -> {beh['loss']['final']:.3f} (no accuracy)")
    if "train_acquisition_step" in pre:
        what += (f"; training set fitted at step {pre['train_acquisition_step']}"
                 + (f", {pre['generalisation_delay']} steps before acquisition" if pre["generalisation_delay"]
                    is not None else "") if pre["train_acquisition_step"] is not None else
                 "; training set not fitted")
    log(f"[scan] {run}: {what}; RankMe {rm['layer']} collapse {rm.get('collapse_step')}, floor "
        f"{rm.get('floor_step')}, recovery {rm.get('recovery_step')}; wrote {out_dir}")
    return pre
