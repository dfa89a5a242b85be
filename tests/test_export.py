"""``geoanatomy export``: a run's checkpoints as Hugging Face GPT-2 folders. Checkpoints are
written as the trainer writes them (``checkpoints.save_weights`` with the trainer's metadata)
from the run's seeded model moved to O(1) random weights (so every parameter, bias and
transpose matters, and exact GELU differs visibly from GPT-2's tanh form); transformers loads
the folders and its logits equal ours to float32 rounding (atol 1e-5); the tokenizer gives our
ids; ``geoanatomy scan`` reads the folder; bad input is one line naming the path."""
import json
import os
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow   # every test here reads a trained, exported run (a module fixture)

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
import torch  # noqa: E402

from geoanatomy import __version__  # noqa: E402
from geoanatomy import export as ex  # noqa: E402
from geoanatomy.checkpoints import ckpt_path, load_weights, read_meta, save_weights  # noqa: E402
from geoanatomy.cli import main as cli_main  # noqa: E402
from geoanatomy.config import run_spec  # noqa: E402
from geoanatomy.model import GPT, ModelConfig  # noqa: E402
from geoanatomy.stages.common import seeded_model, task_data  # noqa: E402
from geoanatomy.tasks import VOCAB  # noqa: E402
from conftest import quiet, tiny_config  # noqa: E402

STEPS = [0, 3, 10]
ATOL = 1e-5          # float32 rounding for logits up to ~15 (measured here: 0; both use torch sdpa)


def _meta(spec, model) -> dict:
    """The metadata stages.train gives every checkpoint."""
    return {"run": spec.name, "settings_hash": spec.train_hash(), "model_config": model.cfg.to_dict(),
            "run_spec": spec.train_dict(), "geoanatomy_version": __version__}


def _write_run(root: Path, name="add_L1_nano", steps=STEPS, dtype="float32", scale=0.3, meta_over=None) -> Path:
    """root/<name>/checkpoints/step_*.safetensors: the run's seeded model plus seeded noise of
    std ``scale`` (a new draw per step; LayerNorm weights around 1)."""
    task, level, size = name.split("_")
    spec = run_spec(tiny_config(task, level, size, results_dir=str(root)), name)
    model = seeded_model(spec)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(1)
    ck = root / name / "checkpoints"
    for s in steps:
        with torch.no_grad():
            for k, p in model.named_parameters():
                p.copy_(init[k] + scale * torch.randn(p.shape, generator=g))
        save_weights(ck, s, model, {**_meta(spec, model), **(meta_over or {})}, dtype)
    return root / name


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return _write_run(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def exported(run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "hf"
    rec = ex.export_run(run_dir, out, log=quiet)
    return out, rec


def _ours(run_dir: Path, step: int) -> GPT:
    """Our model at ``step``, loaded from the run's checkpoint."""
    mc = json.loads(read_meta(ckpt_path(run_dir / "checkpoints", step))["model_config"])
    model = GPT(ModelConfig(**mc)).eval()
    load_weights(ckpt_path(run_dir / "checkpoints", step), model)
    return model


def _sequences(run_dir: Path, n=16) -> torch.Tensor:
    spec = run_spec(tiny_config("add", "L1", "nano", results_dir=str(run_dir.parent)), run_dir.name)
    return torch.as_tensor(task_data(spec).eval_set(n))                         # (n, S) task sequences


def _hf(folder: Path, **config_over):
    cfg = transformers.GPT2Config.from_pretrained(folder, local_files_only=True, **config_over)
    return transformers.GPT2LMHeadModel.from_pretrained(folder, config=cfg, local_files_only=True,
                                                        use_safetensors=True).eval()


@pytest.mark.slow
def test_transformers_logits_equal_ours_on_task_sequences(run_dir, exported):
    out, rec = exported
    seq = _sequences(run_dir)
    assert sorted(p.name for p in out.iterdir()) == sorted([f"checkpoint-{s}" for s in STEPS] + [ex.MANIFEST])
    for s in STEPS:
        ours = _ours(run_dir, s)
        hf = _hf(out / f"checkpoint-{s}")
        assert hf.lm_head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr()     # tied, as ours
        with torch.no_grad():
            a, b = ours(seq), hf(input_ids=seq).logits
            full = torch.randint(0, len(VOCAB), (3, ours.cfg.block_size), generator=torch.Generator().manual_seed(s))
            fa, fb = ours(full), hf(input_ids=full).logits                # every position of the block
        assert a.std() > 1.0                      # logits up to ~15: the comparison means something
        torch.testing.assert_close(b, a, atol=ATOL, rtol=0)
        torch.testing.assert_close(fb, fa, atol=ATOL, rtol=0)
        assert rec["checkpoints"][f"checkpoint-{s}"]["max_abs_logit_diff"] < ATOL
        # the same weights under GPT-2's tanh GELU are visibly another function
        with torch.no_grad():
            tanh = _hf(out / f"checkpoint-{s}", activation_function="gelu_new")(input_ids=seq).logits
        assert (tanh - a).abs().max() > 1e-3
    cfg = json.loads((out / "checkpoint-0" / "config.json").read_text())
    assert (cfg["n_positions"], cfg["n_embd"], cfg["n_layer"], cfg["n_head"], cfg["vocab_size"]) == (64, 128, 2, 4, 32)
    assert cfg["activation_function"] == "gelu" and cfg["layer_norm_epsilon"] == 1e-5 and cfg["tie_word_embeddings"]
    assert cfg["architectures"] == ["GPT2LMHeadModel"]


@pytest.mark.slow
def test_tokenizer_encodes_task_sequences_to_our_ids(run_dir, exported):
    out, _ = exported
    tok = transformers.AutoTokenizer.from_pretrained(out / "checkpoint-10", local_files_only=True)
    assert len(tok) == len(VOCAB) and tok.convert_tokens_to_ids(VOCAB) == list(range(len(VOCAB)))
    for row in _sequences(run_dir, 8).tolist():
        text = " ".join(VOCAB[i] for i in row)
        assert tok(text)["input_ids"] == row                           # no special tokens added
        assert tok.decode(row) == text
    assert (tok.pad_token, tok.bos_token, tok.eos_token, tok.unk_token) == ("PAD", "BOS", "EOS", "UNK")
    assert tok("ADD 2 ? = 1")["input_ids"][2] == VOCAB.index("UNK")
    assert json.loads((out / "checkpoint-10" / "tokenizer_config.json").read_text())["tokenizer_class"] \
        == "PreTrainedTokenizerFast"


def test_record_names_run_steps_and_hashes(run_dir, exported):
    out, rec = exported
    assert json.loads((out / ex.MANIFEST).read_text()) == rec
    spec = run_spec(tiny_config("add", "L1", "nano", results_dir=str(run_dir.parent)), run_dir.name)
    assert (rec["run"], rec["settings_hash"], rec["steps"]) == (spec.name, spec.train_hash(), STEPS)
    assert rec["source"] == str(run_dir.resolve()) and rec["tokenizer"]["vocab"] == VOCAB
    for s in STEPS:
        c = rec["checkpoints"][f"checkpoint-{s}"]
        assert c["source_sha256"] == ex.sha256_file(ckpt_path(run_dir / "checkpoints", s))
        assert c["files"] == {p.name: ex.sha256_file(p) for p in sorted((out / f"checkpoint-{s}").iterdir())}


@pytest.mark.slow
def test_scan_reads_the_export(run_dir, exported, tmp_path):
    from geoanatomy.scan import scan
    from geoanatomy.table import read_table
    out, _ = exported
    seq = _sequences(run_dir, 12)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(" ".join(VOCAB[i] for i in row) for row in seq.tolist()) + "\n")
    pre = scan(out, str(prompts), tmp_path / "scan", device="cpu", log=quiet)
    df = read_table(tmp_path / "scan" / "metrics.csv")
    assert sorted(set(df["step"])) == STEPS
    assert pre["model"]["n_params"] == _ours(run_dir, 0).n_params()                # tied weights counted once
    assert pre["model"]["layer_names"] == ["embed", "block0", "block1", "ln_final"]
    loss = df[df.measure == "loss"].set_index("step")["value"]
    for s in STEPS:                               # scan's probe loss is our model's next-token loss
        with torch.no_grad():
            lp = torch.log_softmax(_ours(run_dir, s)(seq).double(), -1)[:, :-1]
        want = -lp.gather(-1, seq[:, 1:, None]).mean().item()
        assert loss[s] == pytest.approx(want, rel=1e-5)


def test_rerun_keeps_identical_folders_and_adds_missing_steps(run_dir, tmp_path):
    out = tmp_path / "hf"
    ex.export_run(run_dir, out, steps=[3], log=quiet)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-3", ex.MANIFEST]
    mtimes = {p: p.stat().st_mtime_ns for p in (out / "checkpoint-3").iterdir()}
    (out / ".checkpoint-0.k1ll3d.tmp").mkdir()        # what a killed export leaves: removed, never read
    (out / ".checkpoint-0.k1ll3d.tmp" / "config.json").write_text("{}")
    lines = []
    rec = ex.export_run(run_dir, out, steps="all", log=lines.append)
    assert rec["steps"] == STEPS and sum("unchanged" in ln for ln in lines) == 1
    assert {p: p.stat().st_mtime_ns for p in (out / "checkpoint-3").iterdir()} == mtimes
    assert sorted(p.name for p in out.iterdir()) == sorted([f"checkpoint-{s}" for s in STEPS] + [ex.MANIFEST])
    # killed after a folder's rename, before its record: the folder is recognised and recorded again
    del rec["checkpoints"]["checkpoint-10"]
    (out / ex.MANIFEST).write_text(json.dumps(rec))
    lines.clear()
    assert ex.export_run(run_dir, out, steps=[10], log=lines.append)["steps"] == STEPS
    assert "unchanged" in lines[0]
    (out / "geoanatomy_scan").mkdir()               # a scan's default output inside OUT is left alone
    lines.clear()
    ex.export_run(run_dir, out, log=lines.append)
    assert sum("unchanged" in ln for ln in lines) == len(STEPS)


def test_compact_checkpoints_export_their_values(tmp_path):
    rd = _write_run(tmp_path, "copy_L1_nano", steps=[0, 4], dtype="bfloat16")
    rec = ex.export_run(rd, log=quiet)
    assert rec["source_dtype"] == "bfloat16" and (rd / "hf" / "checkpoint-4").is_dir()
    seq = torch.randint(0, len(VOCAB), (4, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(_hf(rd / "hf" / "checkpoint-4")(input_ids=seq).logits, _ours(rd, 4)(seq),
                                   atol=ATOL, rtol=0)


def test_architecture_it_cannot_express_is_refused(tmp_path, monkeypatch):
    rd = _write_run(tmp_path, "copy_L1_nano", steps=[0], meta_over={"model_config": {
        **ModelConfig(n_layer=2, d_model=128, n_head=4).to_dict(), "norm": "rms"}})
    with pytest.raises(ex.ExportError, match=r"norm='rms'.*no GPT-2 counterpart"):
        ex.export_run(rd, tmp_path / "out", log=quiet)
    assert not (tmp_path / "out").exists()
    # the logits check refuses a mapping that does not reproduce the model (here the tanh GELU)
    rd = _write_run(tmp_path, "rev_L1_nano", steps=[0])
    monkeypatch.setattr(ex, "ACTIVATION", "gelu_new")
    with pytest.raises(ex.ExportError, match="logits differ"):
        ex.export_run(rd, tmp_path / "out2", log=quiet)
    assert list((tmp_path / "out2").iterdir()) == []                      # no folder, no temporary left


def _cli(capsys, *argv):
    try:
        rc = cli_main(["export", *map(str, argv)])
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def _one_line_error(rc, err, path):
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("geoanatomy export: "), err
    assert str(path) in lines[0] and "Traceback" not in err


def test_cli_bad_input_is_one_line_naming_the_path(run_dir, tmp_path, capsys):
    rc, _, err = _cli(capsys, tmp_path / "nothing")
    _one_line_error(rc, err, tmp_path / "nothing")
    (tmp_path / "mod_L3_nano").mkdir()
    (tmp_path / "mod_L3_nano" / "metrics.csv").write_text("x\n")
    rc, _, err = _cli(capsys, tmp_path / "mod_L3_nano")
    _one_line_error(rc, err, tmp_path / "mod_L3_nano")
    rc, _, err = _cli(capsys, run_dir, "--out", tmp_path / "o", "--steps", "0,7")
    _one_line_error(rc, err, ckpt_path(run_dir / "checkpoints", 7))
    assert not (tmp_path / "o").exists()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine\n")
    rc, _, err = _cli(capsys, run_dir, "--out", tmp_path / "other")
    _one_line_error(rc, err, tmp_path / "other")
    rc, _, err = _cli(capsys, run_dir, "--steps", "3,x")
    assert rc == 2 and "give 'all' or step numbers" in err


def test_cli_refuses_an_out_of_other_checkpoints(tmp_path, capsys):
    rd = _write_run(tmp_path, "add_L1_nano", steps=[0, 3])
    out = tmp_path / "hf"
    rc, stdout, _ = _cli(capsys, rd, "--out", out, "--steps", "0,3")
    assert rc == 0 and "2 checkpoints (2 new)" in stdout
    # the run retrained with other weights at step 3: its folder is not overwritten
    spec = run_spec(tiny_config("add", "L1", "nano", results_dir=str(tmp_path)), "add_L1_nano")
    model = seeded_model(spec)
    save_weights(rd / "checkpoints", 3, model, _meta(spec, model))
    before = (out / "checkpoint-3" / "model.safetensors").read_bytes()
    rc, _, err = _cli(capsys, rd, "--out", out)
    _one_line_error(rc, err, out / "checkpoint-3")
    assert (out / "checkpoint-3" / "model.safetensors").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-0", "checkpoint-3", ex.MANIFEST]
    # another run's (or other settings') export
    rd2 = _write_run(tmp_path / "b", "add_L1_nano", steps=[0], meta_over={"settings_hash": "f" * 16})
    rc, _, err = _cli(capsys, rd2, "--out", out)
    _one_line_error(rc, err, out)


def test_cli_help_documents_every_option(capsys):
    rc, out, _ = _cli(capsys, "--help")
    assert rc == 0 and out.startswith("usage: geoanatomy export")
    for opt in ("RUN_DIR", "--out", "--steps"):
        line = next(ln for ln in out.splitlines() if ln.strip().startswith(opt))
        assert len(line.split()) > 2, line                                  # option and its help
    assert "geoanatomy export results/" in out                              # an example


@pytest.mark.slow
def test_export_of_a_trained_run(trained_run, tmp_path, capsys):
    _, spec, rd = trained_run
    rc, _, err = _cli(capsys, rd, "--out", tmp_path / "hf")
    assert rc == 0, err
    rec = json.loads((tmp_path / "hf" / ex.MANIFEST).read_text())
    assert rec["run"] == spec.name and rec["settings_hash"] == spec.train_hash()
    seq = torch.as_tensor(np.asarray(task_data(spec).eval_set(32)))
    for s in rec["steps"]:
        with torch.no_grad():
            torch.testing.assert_close(_hf(tmp_path / "hf" / f"checkpoint-{s}")(input_ids=seq).logits,
                                       _ours(rd, s)(seq), atol=ATOL, rtol=0)
