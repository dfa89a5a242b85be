"""Checkpoint files: safetensors weights with their config, optimizer state for resume.

Layout of ``<run_dir>/checkpoints/``::

    step_000100.safetensors   model weights at step 100 (metadata: run, step, model config);
                              train.json lists the steps training wrote and each file's sha256,
                              and every reader (``iter_checkpoints``) checks a file's step
                              metadata against its name and its bytes against that hash
    optim.safetensors         AdamW moments of the newest checkpoint (metadata: step)
                              (with compact analysis checkpoints, train.checkpoint_dtype float16 or
                              bfloat16, it also holds that checkpoint's full-precision weights,
                              so a resumed run continues exactly; one file, so the two agree)
    train_log.csv             step, train_loss, lr, grad_norm, sha256, float_path at every checkpoint so far

Resume (``resume_state``): the newest checkpoint that has both its weights and the optimizer
state; checkpoints of other settings, or of a pruned run, are removed first.

Every file is written to a temporary name and renamed, so a killed job leaves
either the old file or the new one, never a half-written one. Loading uses
safetensors only (no pickle), so a checkpoint cannot execute code.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import shutil
from pathlib import Path
from typing import Callable

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from .files import atomic_write_bytes, atomic_write_text

_STEP_RE = re.compile(r"^step_(\d{6,})\.safetensors$")


from .errors import CheckpointError  # noqa: E402  (defined torch-free; imported from here too)


def ckpt_path(ckpt_dir: Path, step: int) -> Path:
    return Path(ckpt_dir) / f"step_{step:06d}.safetensors"


def checkpoint_dir(run_dir: Path) -> Path:
    """A run's checkpoint folder: ``<run_dir>/checkpoints``."""
    return Path(run_dir) / "checkpoints"


def pruned_record(run_dir: Path) -> Path:
    """Where a run records that its analysis checkpoints were removed (``stages.prune``,
    keep_checkpoints: final): readers refuse the run, the trainer retrains it from step 0."""
    return Path(run_dir) / "pruned.json"


def list_checkpoints(ckpt_dir: Path) -> list[int]:
    """Steps of the weight files present in ``ckpt_dir``, sorted."""
    d = Path(ckpt_dir)
    if not d.is_dir():
        return []
    return sorted(int(m.group(1)) for p in d.iterdir() if (m := _STEP_RE.match(p.name)))


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def save_weights(ckpt_dir: Path, step: int, model: torch.nn.Module, meta: dict, dtype: str = "float32",
                 path: Path | None = None) -> Path:
    """Save model weights (tied tensors stored once) with ``meta`` as safetensors metadata,
    floating tensors in ``dtype`` (``meta["dtype"]`` says which); to ``path`` if given, else
    the step's checkpoint file."""
    sd = {k: v.detach().to("cpu", DTYPES[dtype] if v.is_floating_point() else v.dtype).contiguous()
          for k, v in model.state_dict().items() if k != "lm_head.weight"}  # tied to wte.weight
    # one canonical encoding (sorted keys): the same weights and settings get one content hash
    # whether the job came from --config or from a --spec JSON (their dicts' key orders differ)
    md = {k: (v if isinstance(v, str) else json.dumps(v, sort_keys=True)) for k, v in meta.items()}
    md["step"] = str(step)
    md["dtype"] = dtype
    p = path or ckpt_path(ckpt_dir, step)
    atomic_write_bytes(p, st_save(sd, metadata=md))
    return p


RECOVER = ("the optimizer state is kept for the two newest checkpoints only, so a run resumes from one of those;"
           " if neither is good, recompute it with `geoanatomy clean-run --checkpoints <run_dir>` and rerun the"
           " training job (same settings and seed, same numbers; see docs/bad-input.md, 'Recovering a run')")


def _read(path: Path) -> tuple[dict, dict]:
    """(tensors, metadata) of a safetensors file; the metadata also carries ``_sha256``, the
    file's ``content_sha256`` (not a key of the file)."""
    from safetensors import safe_open
    try:
        data = Path(path).read_bytes()
        tensors = st_load(data)
        with safe_open(str(path), framework="pt") as f:
            meta = dict(f.metadata() or {})
        meta["_sha256"] = content_sha256(tensors, meta)
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"checkpoint {path} is unreadable ({e}); {RECOVER}") from e
    return tensors, meta


def load_weights(path: Path, model: torch.nn.Module) -> dict:
    """Load weights into ``model`` (strict); returns the file's metadata."""
    tensors, meta = _read(path)
    tensors["lm_head.weight"] = tensors["wte.weight"]
    p0 = next(model.parameters())
    try:   # compact (half-precision) checkpoints are cast to the model's dtype
        model.load_state_dict({k: v.to(p0.device, p0.dtype if v.is_floating_point() else v.dtype)
                               for k, v in tensors.items()}, strict=True)
    except RuntimeError as e:
        raise CheckpointError(f"checkpoint {path} does not fit the model: {e}") from e
    return meta


def read_meta(path: Path) -> dict:
    return _read(path)[1]


def save_optimizer(ckpt_dir: Path, step: int, opt: torch.optim.Optimizer, model: torch.nn.Module | None = None) -> None:
    """AdamW state as flat tensors ``{i}.exp_avg``, ``{i}.exp_avg_sq``, ``{i}.step``; with
    ``model``, also its full-precision weights as ``weights.{name}`` (compact checkpoints)."""
    sd = opt.state_dict()
    flat = {}
    for i, st in sd["state"].items():
        for k, v in st.items():
            flat[f"{i}.{k}"] = (v if torch.is_tensor(v) else torch.tensor(v)).detach().to("cpu").contiguous()
    if model is not None:
        for k, v in model.state_dict().items():
            if k != "lm_head.weight":                                   # tied to wte.weight
                flat[f"weights.{k}"] = v.detach().to("cpu").contiguous()
    meta = {"step": str(step), "param_groups": json.dumps(sd["param_groups"])}
    # the hash is recorded before the file is written, beside the previous one: a kill between
    # the two writes leaves a record that still names the state on disk (old or new)
    rec = Path(ckpt_dir) / OPTIM_HASH
    try:
        kept = json.loads(rec.read_text()).get("states", [])[-1:] if rec.exists() else []
    except (OSError, ValueError, AttributeError):
        kept = []
    atomic_write_text(rec, json.dumps({"states": kept + [{"step": step, "sha256": content_sha256(flat, meta)}]}))
    cur = Path(ckpt_dir) / "optim.safetensors"
    if cur.exists():                 # the previous state stays: a damaged newest one is resumed past
        os.replace(cur, Path(ckpt_dir) / OPTIM_PREV)
    atomic_write_bytes(cur, st_save(flat, metadata=meta))


OPTIM_HASH = "optim.sha256.json"      # {"states": [{"step", "sha256"}]}: the last two optimizer states written
OPTIM_PREV = "optim.prev.safetensors"  # the optimizer state before the newest (same format)


def header_meta(path: Path) -> dict:
    """The metadata of a safetensors file from its header alone (no tensor read)."""
    from safetensors import safe_open
    try:
        with safe_open(str(path), framework="pt") as f:
            return dict(f.metadata() or {})
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"checkpoint {path} is unreadable ({e}); {RECOVER}") from e


def check_resume_state(ckpt_dir: Path, step: int, optim_meta: dict, optim_name: str = "optim.safetensors") -> None:
    """Before training resumes from ``step``: the optimizer state's content must be what training
    wrote (``OPTIM_HASH``) and the step's weights what the training log recorded; a flipped bit
    is refused here, naming the file, not found after the run has trained to its end."""
    ckpt_dir = Path(ckpt_dir)
    rec = ckpt_dir / OPTIM_HASH
    if not rec.exists() and os.environ.get("GEOANATOMY_LEGACY_UNSEALED") != "1":
        raise CheckpointError(f"{rec} is missing: the optimizer state {ckpt_dir / optim_name} cannot be shown to be "
                              f"the one training wrote; not resuming from it (GEOANATOMY_LEGACY_UNSEALED=1 resumes "
                              f"a run written before the record existed). {RECOVER}")
    if rec.exists():
        states = json.loads(rec.read_text()).get("states", [])
        want = {int(x["step"]): x["sha256"] for x in states}
        if want.get(step) != optim_meta.get("_sha256"):
            raise CheckpointError(
                f"{ckpt_dir / optim_name} is not the optimizer state training wrote at step {step}"
                f" (sha256 {str(optim_meta.get('_sha256'))[:12]}..., recorded"
                f" {', '.join(f'{str(h)[:12]}... at step {k}' for k, h in want.items())}); not resuming from it."
                f" {RECOVER}")
    logged = {r["step"]: r["sha256"] for r in read_train_log(ckpt_dir) if r.get("sha256")}
    if step in logged:
        got = read_meta(ckpt_path(ckpt_dir, step))["_sha256"]
        if got != logged[step]:
            raise CheckpointError(
                f"checkpoint {ckpt_path(ckpt_dir, step)} is not the file training wrote at step {step} (sha256"
                f" {got[:12]}..., the training log says {logged[step][:12]}...); not resuming from it. {RECOVER}")


def load_optimizer(ckpt_dir: Path, opt: torch.optim.Optimizer, name: str = "optim.safetensors") -> int:
    """Restore AdamW state from ``name``; returns the step it belongs to."""
    tensors, meta = _read(Path(ckpt_dir) / name)
    state: dict[int, dict] = {}
    for key, v in tensors.items():
        if key.startswith("weights."):
            continue
        i, k = key.split(".", 1)
        state.setdefault(int(i), {})[k] = v
    sd = opt.state_dict()
    dev = opt.param_groups[0]["params"][0].device
    for i, st in state.items():
        for k in st:
            if k != "step":
                st[k] = st[k].to(dev)
    sd["state"] = state
    sd["param_groups"] = json.loads(meta["param_groups"])
    opt.load_state_dict(sd)
    return int(meta["step"])


def load_resume_weights(ckpt_dir: Path, model: torch.nn.Module, name: str = "optim.safetensors") -> None:
    """Load the full-precision weights stored with the optimizer state (compact checkpoints)."""
    path = Path(ckpt_dir) / name
    tensors, _ = _read(path)
    w = {k[len("weights."):]: v for k, v in tensors.items() if k.startswith("weights.")}
    if not w:
        raise CheckpointError(f"{path} holds no full-precision weights (written by a run with float32 "
                              f"checkpoints?); recompute with `geoanatomy clean-run --checkpoints "
                              f"{Path(ckpt_dir).parent}`")
    w["lm_head.weight"] = w["wte.weight"]
    p0 = next(model.parameters())
    model.load_state_dict({k: v.to(p0.device) for k, v in w.items()}, strict=True)


def content_sha256(tensors: dict, meta: dict) -> str:
    """sha256 of a checkpoint's content: every tensor (name, dtype, shape, bytes) in name order,
    then the metadata as sorted JSON. Not of the file's bytes: safetensors writes its header's
    keys in no fixed order, so two writes of the same weights differ as files but not here."""
    h = hashlib.sha256()
    for k in sorted(tensors):
        t = tensors[k].detach().to("cpu").reshape(-1).contiguous()
        h.update(f"{k}|{t.dtype}|{tuple(tensors[k].shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    h.update(json.dumps({k: v for k, v in meta.items() if not k.startswith("_")}, sort_keys=True).encode())
    return h.hexdigest()


def weights_sha256(path: Path) -> str:
    """``content_sha256`` of a checkpoint file (what the training log and train.json record)."""
    return read_meta(path)["_sha256"]


def written_hashes(ckpt_dir: Path, steps, logged: dict | None = None) -> dict[str, str]:
    """{str(step): sha256} of the checkpoint files of ``steps`` (what train.json records as
    ``checkpoint_sha256``). Each file's ``step`` metadata is checked against its name, and its
    bytes against ``logged`` ({step: sha256 when training wrote it}, the training log's column):
    a file copied over another or edited since is an error naming it."""
    out = {}
    for step in steps:
        path = ckpt_path(ckpt_dir, step)
        meta = read_meta(path)
        check_step(path, step, meta)
        got = meta["_sha256"]
        want = (logged or {}).get(int(step))
        if want and want != got:
            raise CheckpointError(
                f"checkpoint {path} is not the file training wrote at step {int(step)} (sha256 {got[:12]}..., "
                f"the training log records {want[:12]}...); recompute the run with "
                f"`geoanatomy clean-run --checkpoints {Path(ckpt_dir).parent}` and rerun snakemake")
        out[str(int(step))] = got
    return out


def check_step(path: Path, step: int, meta: dict) -> None:
    """A checkpoint's ``step`` metadata must be the step its name says."""
    if meta.get("step") != str(int(step)):
        raise CheckpointError(
            f"checkpoint {path} holds the weights of step {meta.get('step')!r}, not of step {int(step)} "
            f"as its name says (a file copied over another); recompute the run with "
            f"`geoanatomy clean-run --checkpoints {Path(path).parent.parent}` and rerun snakemake")


def recorded_hashes(ckpt_dir: Path) -> dict:
    """train.json's ``checkpoint_sha256`` beside the checkpoint folder ({} when training has
    not finished or the run predates the field)."""
    rec = Path(ckpt_dir).parent / "train.json"
    if not rec.exists():
        return {}
    try:
        got = json.loads(rec.read_text()).get("checkpoint_sha256") or {}
    except (OSError, ValueError, AttributeError):
        return {}      # train.json's own checks (stages.common.run_record) name a bad file
    return got if isinstance(got, dict) else {}


def iter_checkpoints(ckpt_dir: Path, model: torch.nn.Module, steps=None, expect: dict | None = None):
    """Load each checkpoint of ``steps`` (default: all present, in order) into ``model``
    and yield its step; the model holds that checkpoint's weights until the next one.

    ``expect`` (e.g. {"run": ..., "settings_hash": ...}): metadata every checkpoint must
    carry; a checkpoint of another run or other settings is refused by name. Every file's
    ``step`` metadata must match its name, and its bytes the sha256 train.json recorded when
    training wrote it (``checkpoint_sha256``): a file copied over another, or edited, is
    refused by name."""
    hashes = recorded_hashes(ckpt_dir)
    for step in (list_checkpoints(ckpt_dir) if steps is None else steps):
        path = ckpt_path(ckpt_dir, step)
        meta = load_weights(path, model)
        for key, want in (expect or {}).items():
            if meta.get(key) != want:
                raise CheckpointError(
                    f"checkpoint {path} belongs to another run or other settings ({key} is "
                    f"{meta.get(key)!r}, this run's is {want!r}); remove it, or recompute the run with "
                    f"`geoanatomy clean-run {Path(ckpt_dir).parent}`")
        check_step(path, step, meta)
        want = hashes.get(str(int(step)))
        if hashes and want != meta["_sha256"]:
            raise CheckpointError(
                f"checkpoint {path} is not the file training wrote (sha256 {meta['_sha256'][:12]}..., "
                f"train.json records {str(want)[:12]}...); recompute the run with "
                f"`geoanatomy clean-run --checkpoints {Path(ckpt_dir).parent}` and rerun snakemake")
        yield step


# --------------------------------------------------------------- training log
# sha256: content_sha256 of the weights as written; float_path: how the step was trained ("single",
# or a packed trainer's batching: its float path differs from a run trained alone)
LOG_FIELDS = ["step", "train_loss", "lr", "grad_norm", "sha256", "float_path"]
LOG_NAME = "train_log.csv"


def write_train_log(ckpt_dir: Path, rows: list[dict]) -> None:
    """The training log (one row per checkpoint so far), written atomically."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=LOG_FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{r[k]:.9g}" if isinstance(r[k], float) else r[k]) for k in LOG_FIELDS if k in r})
    atomic_write_text(Path(ckpt_dir) / LOG_NAME, buf.getvalue())


def read_train_log(ckpt_dir: Path) -> list[dict]:
    """Rows of the training log; empty when there is none yet."""
    path = Path(ckpt_dir) / LOG_NAME
    if not path.exists():
        return []
    with open(path) as f:
        return [{"step": int(r["step"]), "train_loss": float(r["train_loss"]), "lr": float(r["lr"]),
                 "grad_norm": float(r["grad_norm"]), "sha256": r.get("sha256") or None,
                 "float_path": r.get("float_path") or None}
                for r in csv.DictReader(f)]


# --------------------------------------------------------------- resume
def _check_pruned(pruned: Path, ckdir: Path, settings_hash: str) -> None:
    """A prune record is acted on (the run's checkpoints removed, retrained from 0) only when it
    proves itself: it is this run's (its settings hash) and the steps it says it removed are
    gone. A stray or copied record beside complete checkpoints is refused, nothing deleted."""
    import json
    try:
        rec = json.loads(pruned.read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{pruned} is not a prune record ({e}); nothing was deleted: remove it if the "
                              f"checkpoints in {ckdir} are complete") from None
    theirs = rec.get("settings_hash") if isinstance(rec, dict) else None
    if theirs != settings_hash:
        raise CheckpointError(f"{pruned} was written for other settings (hash {theirs} != {settings_hash}); "
                              f"nothing was deleted: remove it if the checkpoints in {ckdir} are complete")
    still = [st for st in rec.get("removed_steps") or [] if ckpt_path(ckdir, int(st)).exists()]
    if still:
        raise CheckpointError(f"{pruned} says steps {still[:5]} were removed, but {ckpt_path(ckdir, still[0]).name} is "
                              f"there: the record is not true of {ckdir}; nothing was deleted (remove the stray "
                              f"{pruned.name} to resume from the checkpoints)")


def resume_state(run_dir: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, settings_hash: str,
                 compact: bool, name: str, log: Callable[[str], None]) -> tuple[int, list[dict]]:
    """Load the newest resumable state of ``run_dir``'s checkpoints into ``model`` and ``opt``;
    returns (the step to continue from, the training-log rows up to it); (0, []) for a fresh start.

    Resumable: the step the optimizer state names, when its weights are present (``compact``:
    the full-precision weights stored with the optimizer state). Before that: a pruned run
    (``pruned_record``) loses its checkpoints and retrains from step 0, temporary files of
    killed writes are removed, checkpoints of another ``settings_hash`` are discarded, and
    weights written after the last optimizer save are deleted. ``name`` and ``log``: the
    progress lines."""
    ckdir = checkpoint_dir(run_dir)
    pruned = pruned_record(run_dir)  # stages.prune removed the analysis checkpoints: none to resume
    if pruned.exists():
        _check_pruned(pruned, ckdir, settings_hash)    # the record must be this run's and true: else nothing removed
        log(f"[train] {name}: {pruned} says its analysis checkpoints were removed; retraining from step 0")
        shutil.rmtree(ckdir, ignore_errors=True)
        pruned.unlink()
    if ckdir.is_dir():  # temporary files of writes killed before their rename
        for tmp in ckdir.glob(".*.tmp"):
            tmp.unlink()
    have = list_checkpoints(ckdir)
    if not have:
        return 0, []
    hashes, unreadable = {}, []
    for c in have:
        try:
            hashes[c] = header_meta(ckpt_path(ckdir, c)).get("settings_hash")
        except CheckpointError:
            unreadable.append(c)
    foreign = [c for c in hashes if hashes[c] != settings_hash]
    if foreign and len(foreign) < len(hashes):
        raise CheckpointError(
            f"{ckdir} holds checkpoints another run wrote (other settings: hash {hashes[foreign[0]]} !="
            f" {settings_hash}): {', '.join(ckpt_path(ckdir, c).name for c in foreign[:5])}"
            f"{' ...' if len(foreign) > 5 else ''}. Nothing was deleted; move them out of the folder and rerun")
    if foreign and not unreadable:  # every checkpoint is of other settings: moved aside, never deleted
        dest = Path(run_dir) / "superseded" / f"checkpoints-{str(hashes[foreign[0]])[:12]}"
        k = 1
        while dest.exists():
            dest = dest.with_name(f"{dest.name.split('.')[0]}.{k}")
            k += 1
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(ckdir), str(dest))
        log(f"[train] {name}: checkpoints in {ckdir} were made with other settings "
            f"(hash {hashes[foreign[0]]} != {settings_hash}); moved to {dest} (nothing deleted); starting afresh")
        return 0, []
    # the newest optimizer state whose step's weights are there and both are what training wrote
    # (hash checked); a damaged newest one is resumed past, from the state before it
    problems, chosen = [], None
    for opt_name in ("optim.safetensors", OPTIM_PREV):
        f = ckdir / opt_name
        if not f.exists():
            continue
        try:
            meta = read_meta(f)
            st = int(meta["step"])
            if st not in hashes:
                problems.append(f"{ckpt_path(ckdir, st).name} {'unreadable' if st in unreadable else 'missing'}")
                continue
            check_resume_state(ckdir, st, meta, opt_name)
        except CheckpointError as e:
            problems.append(str(e).split("; not resuming")[0])
            continue
        chosen = (st, opt_name)
        break
    damaged_older = [c for c in unreadable if chosen is None or c <= chosen[0]]
    if damaged_older or (chosen is None and problems):
        raise CheckpointError(f"{ckdir}: no good state to resume from ({'; '.join(problems) or 'unreadable: '}"
                              f"{', '.join(ckpt_path(ckdir, c).name for c in damaged_older)}); nothing was deleted. "
                              f"{RECOVER}")
    if chosen is None:
        return 0, []
    s, opt_name = chosen
    if problems:                    # the newest state was damaged: it and what follows are moved aside
        aside = Path(run_dir) / "superseded" / "damaged"
        aside.mkdir(parents=True, exist_ok=True)
        for c in sorted(set(hashes) | set(unreadable)):
            if c > s:
                shutil.move(str(ckpt_path(ckdir, c)), str(aside / ckpt_path(ckdir, c).name))
        if opt_name != "optim.safetensors" and (ckdir / "optim.safetensors").exists():
            shutil.move(str(ckdir / "optim.safetensors"), str(aside / "optim.safetensors"))
        log(f"[train] {name}: the newest resume state is damaged ({problems[0]}); resuming from the previous good "
            f"one at step {s}; the damaged files moved to {aside}")
    if opt_name == OPTIM_PREV:     # the previous state becomes the current one, its hash the only record
        os.replace(ckdir / OPTIM_PREV, ckdir / "optim.safetensors")
        opt_name = "optim.safetensors"
        atomic_write_text(ckdir / OPTIM_HASH, json.dumps({"states": [
            {"step": s, "sha256": read_meta(ckdir / opt_name)["_sha256"]}]}))
    if compact:
        load_resume_weights(ckdir, model, opt_name)
    else:
        load_weights(ckpt_path(ckdir, s), model)
    load_optimizer(ckdir, opt, opt_name)
    log_rows = [r for r in read_train_log(ckdir) if r["step"] <= s]
    for extra in (c for c in have if c > s and ckpt_path(ckdir, c).exists()):  # written after the last optimizer save
        ckpt_path(ckdir, extra).unlink()
    log(f"[train] {name}: resuming from checkpoint step {s}")
    return s, log_rows
