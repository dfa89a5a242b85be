"""A run's checkpoints as Hugging Face GPT-2 folders (``geoanatomy export``), so other tools
(transformers, ``geoanatomy scan``, anything that reads a ``GPT2LMHeadModel``) can open them.

Layout of ``OUT`` (default ``RUN_DIR/hf``)::

    checkpoint-N/            one per exported checkpoint (the transformers.Trainer layout,
                             which ``geoanatomy scan`` reads)
        config.json          GPT2Config, every field written (not only those off the defaults)
        model.safetensors    GPT2LMHeadModel weights, float32 (lm_head tied to wte, stored once)
        tokenizer.json ...   the tasks' vocabulary as a WordLevel tokenizer (PreTrainedTokenizerFast)
    geoanatomy_export.json   the run, its settings hash, model config, steps, sha256 of every
                             source and written file, the check below per checkpoint

The mapping (``geoanatomy.model`` -> transformers GPT-2): ``wte``, ``wpe``, ``blocks.i`` ->
``transformer.h.i``, ``ln_f``; our ``nn.Linear`` weights (out, in) become GPT-2's ``Conv1D``
weights (in, out), transposed; the fused qkv projection ``c_attn`` has the same q, k, v order
and head split in both. Config: learned absolute positions (``n_positions`` = block size),
exact-erf GELU (``activation_function="gelu"``; GPT-2's own ``gelu_new`` is the tanh form),
LayerNorm eps read from the model, scores scaled by 1/sqrt(head size), no dropout, tied
embeddings. A model config field the mapping does not know is refused by name, and every
exported checkpoint is checked before it is written: the transformers model's logits on a
seeded batch of token sequences must equal ours to float32 rounding (``max_abs_logit_diff`` in
the record), else nothing is written.

Safety: checkpoints are read with ``geoanatomy.checkpoints`` (safetensors only); no remote
code, no download. Each ``checkpoint-N/`` is built in a hidden temporary folder beside it and
renamed into place, so an interrupted export leaves whole folders only. A rerun into the same
``OUT`` keeps folders whose content is what it would write and adds the missing steps; a
folder with other content, or an ``OUT`` of another run, is an error naming the path.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from .checkpoints import (checkpoint_dir, ckpt_path, iter_checkpoints, list_checkpoints, pruned_record,
                          read_meta)
from .files import atomic_write_bytes, atomic_write_json, atomic_write_text, sha256_file
from .tasks import TOK, VOCAB

MANIFEST = "geoanatomy_export.json"
EXPORT_VERSION = 1
FOLDER = "checkpoint-{step}"
_TMP = re.compile(r"^\.checkpoint-\d+\..*\.tmp$")
# ModelConfig fields the GPT-2 mapping reproduces (attn_impl picks a kernel, not a function)
KNOWN_MODEL_FIELDS = ("n_layer", "d_model", "n_head", "vocab_size", "block_size", "attn_impl")
# model.MLP applies torch's F.gelu (exact erf form): transformers' "gelu" is that function
ACTIVATION = "gelu"
CHECK_BATCH = 4            # sequences of the logits check, each block_size long
CHECK_TOL = 1e-4           # max |logit difference| allowed, relative to max(1, max |logit|)
RUN_FILES = ("train.json", "checkpoints/train_log.csv")   # hashed into the record when present


class ExportError(ValueError):
    """The run cannot be exported as asked; the message names the path and the fix."""


# ------------------------------------------------------------------------------ the run
def run_steps(run_dir: str | Path) -> list[int]:
    """The checkpoint steps of a run folder (``RUN_DIR/checkpoints/step_NNNNNN.safetensors``);
    a folder without any is refused by name."""
    d = Path(run_dir)
    if not d.is_dir():
        raise ExportError(f"{d}: {'no such folder' if not d.exists() else 'not a folder'}; give a run "
                          f"folder results/<run> holding checkpoints/step_NNNNNN.safetensors")
    steps = list_checkpoints(checkpoint_dir(d))
    if not steps:
        why = (f"its analysis checkpoints were removed ({pruned_record(d)})" if pruned_record(d).exists()
               else f"it holds no {checkpoint_dir(d)}/step_NNNNNN.safetensors")
        raise ExportError(f"{d}: not a trained run folder: {why}")
    return steps


def select_steps(run_dir: str | Path, available: list[int], steps=None) -> list[int]:
    """``steps`` (None / "all": every checkpoint; else step numbers) checked against the run's."""
    if steps is None or steps == "all":
        return list(available)
    want = sorted({int(s) for s in steps})
    missing = [s for s in want if s not in available]
    if missing:
        have = ", ".join(map(str, available[:8])) + (f", ... {available[-1]}" if len(available) > 8 else "")
        raise ExportError(f"{ckpt_path(checkpoint_dir(run_dir), missing[0])}: no such checkpoint (step "
                          f"{missing[0]}{' and ' + str(len(missing) - 1) + ' more' if len(missing) > 1 else ''}); "
                          f"the run has steps {have}")
    return want


def model_config_of(path: Path, meta: dict) -> dict:
    """The ``model_config`` a checkpoint's metadata records, refused when the GPT-2 mapping
    cannot reproduce it (a field it does not know)."""
    if "model_config" not in meta:
        raise ExportError(f"{path}: no model_config in its metadata (not written by geoanatomy's trainer)")
    mc = json.loads(meta["model_config"])
    unknown = [f"{k}={mc[k]!r}" for k in mc if k not in KNOWN_MODEL_FIELDS]
    if unknown:
        raise ExportError(f"{path}: model_config field(s) {', '.join(unknown)} have no GPT-2 counterpart in "
                          f"this exporter (it maps {', '.join(KNOWN_MODEL_FIELDS)}); not exported")
    if mc["vocab_size"] != len(VOCAB):
        raise ExportError(f"{path}: vocab_size {mc['vocab_size']} is not the tasks' {len(VOCAB)} tokens; "
                          f"the tokenizer cannot be written")
    return mc


# ------------------------------------------------------------------------------ GPT-2
def gpt2_config(model):
    """The ``transformers.GPT2Config`` that reproduces ``model`` (a ``geoanatomy.model.GPT``)."""
    import torch
    from transformers import GPT2Config
    c = model.cfg
    eps = {m.eps for m in model.modules() if isinstance(m, torch.nn.LayerNorm)}
    if len(eps) != 1:
        raise ExportError(f"the model's LayerNorms have different eps {sorted(eps)}; GPT-2 has one")
    return GPT2Config(
        vocab_size=c.vocab_size, n_positions=c.block_size, n_embd=c.d_model, n_layer=c.n_layer, n_head=c.n_head,
        n_inner=model.blocks[0].mlp.c_fc.out_features if c.n_layer else 4 * c.d_model,
        activation_function=ACTIVATION, layer_norm_epsilon=eps.pop(), resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False,
        reorder_and_upcast_attn=False, add_cross_attention=False, tie_word_embeddings=True, use_cache=True,
        bos_token_id=TOK["BOS"], eos_token_id=TOK["EOS"], pad_token_id=TOK["PAD"],
        architectures=["GPT2LMHeadModel"], dtype="float32")


_RULES = [  # our state-dict name -> (GPT-2 name, transposed: nn.Linear (out, in) -> Conv1D (in, out))
    (re.compile(r"^(wte|wpe|ln_f)\.(weight|bias)$"), r"transformer.\1.\2", False),
    (re.compile(r"^blocks\.(\d+)\.(ln_[12])\.(weight|bias)$"), r"transformer.h.\1.\2.\3", False),
    (re.compile(r"^blocks\.(\d+)\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight$"),
     r"transformer.h.\1.\2.weight", True),
    (re.compile(r"^blocks\.(\d+)\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.bias$"),
     r"transformer.h.\1.\2.bias", False),
]


def gpt2_state_dict(model) -> dict:
    """``GPT2LMHeadModel`` weights of ``model`` (float32, CPU, contiguous), ``lm_head.weight``
    left out: it is tied to ``transformer.wte.weight`` as ours is to ``wte.weight``."""
    import torch
    if model.lm_head.weight is not model.wte.weight:
        raise ExportError("the model's lm_head is not tied to wte; the GPT-2 export assumes tied embeddings")
    for name, lin in model.named_modules():     # GPT-2's Conv1D always has a bias: a missing one is zero
        if isinstance(lin, torch.nn.Linear) and lin.bias is None and name != "lm_head":
            raise ExportError(f"the model's {name} has no bias; this exporter maps biased projections only")
    out = {}
    for k, v in model.state_dict().items():
        if k == "lm_head.weight":
            continue
        for pat, repl, transpose in _RULES:
            if pat.match(k):
                t = v.detach().to("cpu", torch.float32)
                out[pat.sub(repl, k)] = (t.t() if transpose else t).contiguous()
                break
        else:
            raise ExportError(f"the model's parameter {k!r} has no GPT-2 counterpart; not exported")
    return out


def task_tokenizer(block_size: int):
    """The tasks' vocabulary (``tasks.VOCAB``, same ids) as a WordLevel tokenizer over
    space-separated tokens, wrapped as ``PreTrainedTokenizerFast``; adds no special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.WordLevel(vocab={t: i for i, t in enumerate(VOCAB)}, unk_token="UNK"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)   # joins tokens with single spaces
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="UNK", pad_token="PAD", bos_token="BOS",
                                   eos_token="EOS", model_max_length=block_size, clean_up_tokenization_spaces=False)


def _portable_tokenizer_class(path: Path) -> None:
    """Name the tokenizer class ``PreTrainedTokenizerFast`` (transformers 4 and 5 both load it;
    transformers 5 writes its own new name, ``TokenizersBackend``, which 4 does not know)."""
    cfg = json.loads(path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    atomic_write_text(path, json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")


def check_logits(model, hf) -> float:
    """Max |logit difference| of ``model`` and the transformers model ``hf`` on CHECK_BATCH seeded
    random token sequences of full block length; refuses one beyond float32 rounding."""
    import torch
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, model.cfg.vocab_size, (CHECK_BATCH, model.cfg.block_size), generator=g)
    with torch.no_grad():
        ours = model(idx)
        theirs = hf(input_ids=idx).logits
    diff = float((ours - theirs).abs().max())
    bound = CHECK_TOL * max(1.0, float(ours.abs().max()))
    if not diff <= bound:
        raise ExportError(f"the GPT-2 model's logits differ from ours by {diff:.3g} (allowed {bound:.3g}): "
                          f"the architecture mapping does not reproduce this model; not exported")
    return diff


# ------------------------------------------------------------------------------ folders
def _same_file(a: Path, b: Path) -> bool:
    if a.suffix == ".safetensors":       # the header's key order differs between writes: compare content
        from safetensors import safe_open
        with safe_open(str(a), framework="pt") as fa, safe_open(str(b), framework="pt") as fb:
            return (fa.metadata() == fb.metadata() and set(fa.keys()) == set(fb.keys())
                    and all(fa.get_tensor(k).equal(fb.get_tensor(k)) for k in fa.keys()))
    return a.read_bytes() == b.read_bytes()


def _differences(new: Path, old: Path) -> list[str]:
    """Names of the files in which folder ``old`` differs from ``new`` (missing, extra, changed)."""
    a = {p.name for p in new.iterdir()}
    b = {p.name for p in old.iterdir()}
    changed = [n for n in sorted(a & b) if not (old / n).is_file() or not _same_file(new / n, old / n)]
    return sorted(a ^ b) + changed


def _file_hashes(folder: Path) -> dict:
    return {p.name: sha256_file(p) for p in sorted(folder.iterdir()) if p.is_file()}


def _check_out(run_dir: Path, out: Path, ident: dict) -> dict | None:
    """The existing record of ``out`` (None when ``out`` is new or empty); refuses an ``out``
    that is a file, inside the run's checkpoints, not an export folder, or another run's."""
    ck = checkpoint_dir(run_dir).resolve()
    o = out.resolve()
    if o == run_dir.resolve() or o == ck or ck in o.parents:
        raise ExportError(f"{out}: the export folder cannot be the run folder or inside its checkpoints; "
                          f"give --out another folder")
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out}: exists and is not a folder; give --out a new folder")
    if not out.exists() or not any(out.iterdir()):
        return None
    if not (out / MANIFEST).is_file():
        raise ExportError(f"{out}: exists with other content (no {MANIFEST}); give --out a new or empty folder")
    try:
        rec = json.loads((out / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ExportError(f"{out / MANIFEST}: unreadable ({e}); remove {out} or give --out another folder") from e
    for key, want in ident.items():
        if rec.get(key) != want:
            raise ExportError(f"{out}: holds an export of other checkpoints ({key} {rec.get(key)!r}, this run's "
                              f"{want!r}); remove it or give --out another folder")
    return rec


def export_run(run_dir: str | Path, out: str | Path | None = None, steps=None, log=print) -> dict:
    """Export the checkpoints ``steps`` (None / "all": every one) of ``run_dir`` to ``out``
    (default ``run_dir/hf``) as GPT-2 folders (module doc); returns the record written to
    ``out/geoanatomy_export.json``."""
    try:
        import torch
        import transformers
        from safetensors.torch import save as st_save
        from transformers import GPT2LMHeadModel
    except ImportError as e:
        raise ExportError(f"geoanatomy export needs transformers and tokenizers: pip install -e '.[pythia]' "
                          f"({e})") from e
    from .version import __version__
    from .model import GPT, ModelConfig

    run_dir = Path(run_dir)
    out = Path(out) if out is not None else run_dir / "hf"
    available = run_steps(run_dir)
    want = select_steps(run_dir, available, steps)
    ckdir = checkpoint_dir(run_dir)
    first = ckpt_path(ckdir, want[0])
    meta = read_meta(first)
    mc = model_config_of(first, meta)
    ident = {"run": meta.get("run"), "settings_hash": meta.get("settings_hash"), "model_config": mc}
    rec = _check_out(run_dir, out, ident)

    with torch.random.fork_rng(devices=[]):              # their random inits leave the caller's RNG alone
        model = GPT(ModelConfig(**mc)).eval()
        config = gpt2_config(model)
        hf = GPT2LMHeadModel(config).eval()
    tokenizer = task_tokenizer(mc["block_size"])
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.iterdir():                          # temporary folders of an interrupted export
        if stale.is_dir() and _TMP.match(stale.name):
            shutil.rmtree(stale)
    record = {
        "what": "a geoanatomy run's checkpoints as Hugging Face GPT-2 folders (geoanatomy export)",
        "export_version": EXPORT_VERSION, **ident,
        "source": str(run_dir.resolve()), "source_dtype": meta.get("dtype", "float32"),
        "layout": FOLDER.replace("{step}", "N"), "architecture": "GPT2LMHeadModel", "dtype": "float32",
        "tokenizer": {"kind": "WordLevel, whitespace-split", "vocab": list(VOCAB)},
        "logit_check": {"batch": CHECK_BATCH, "length": mc["block_size"], "tolerance": CHECK_TOL,
                        "relative_to": "max(1, max |logit|)"},
        "run_files": {f: sha256_file(run_dir / f) for f in RUN_FILES if (run_dir / f).is_file()},
        "steps": [], "checkpoints": {k: v for k, v in (rec or {}).get("checkpoints", {}).items()
                                      if (out / k).is_dir()},           # earlier exports still there
        "versions": {"geoanatomy": __version__, "checkpoint_geoanatomy": meta.get("geoanatomy_version"),
                     "torch": torch.__version__, "transformers": transformers.__version__},
        "safety": "read with geoanatomy.checkpoints (safetensors only); no remote code",
    }
    expect = {k: meta[k] for k in ("run", "settings_hash", "model_config") if k in meta}
    n_new = 0

    def save_record():
        record["checkpoints"] = dict(sorted(record["checkpoints"].items(), key=lambda kv: kv[1]["step"]))
        record["steps"] = [c["step"] for c in record["checkpoints"].values()]
        atomic_write_json(out / MANIFEST, record)
    for step in iter_checkpoints(ckdir, model, want, expect=expect):
        name = FOLDER.format(step=step)
        src = ckpt_path(ckdir, step)
        hf.load_state_dict({**(sd := gpt2_state_dict(model)), "lm_head.weight": sd["transformer.wte.weight"]},
                           strict=True)
        diff = check_logits(model, hf)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=out))
        try:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o777 & ~umask)                # mkdtemp makes 0700
            atomic_write_text(tmp / "config.json", config.to_json_string(use_diff=False))
            atomic_write_bytes(tmp / "model.safetensors", st_save(sd, metadata={"format": "pt"}))
            tokenizer.save_pretrained(str(tmp))
            _portable_tokenizer_class(tmp / "tokenizer_config.json")
            final = out / name
            if final.exists():
                bad = _differences(tmp, final) if final.is_dir() else [final.name]
                if bad:
                    raise ExportError(f"{final}: exists with different content ({', '.join(bad[:4])}); remove it "
                                      f"or give --out another folder")
                status = "unchanged"
            else:
                save_record()        # first: an OUT holding a folder of ours always holds the record
                os.rename(tmp, final)
                n_new += 1
                status = "written"
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
        record["checkpoints"][name] = {
            "step": step, "source_file": str(src.relative_to(run_dir)), "source_sha256": sha256_file(src),
            "max_abs_logit_diff": diff, "files": _file_hashes(final)}
        save_record()                                    # after each folder: the record says what is there
        log(f"[export] {ident['run']} step {step}: {status} {final}")
    n = len(want)
    log(f"[export] {ident['run']}: {n} checkpoint{'s' if n != 1 else ''} ({n_new} new) in {out}; open one with "
        f"transformers.GPT2LMHeadModel.from_pretrained('{out / FOLDER.format(step=want[-1])}')")
    return record
