"""Shared test setup: one thread everywhere (2-core CI machine), repo paths, tiny configs
and one trained tiny run.

Tests that train a model are marked ``slow``; ``pytest -m "not slow"`` is the fast loop.
No test depends on another's side effects: the session run below is read-only for its
users (``copy_of_trained_run`` hands out a private copy to tests that write).
"""
import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import pytest  # noqa: E402

from geoanatomy.measures import MEASURES  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

# A run that trains in about a second: 40 steps, 10 checkpoints, 32 evaluation samples.
TINY = {
    "grid": [{"tasks": ["add"], "levels": ["L1"], "sizes": ["nano"]}],
    "train": {"steps": 40, "warmup": 5, "checkpoints": {"n_log": 5, "log_end": 0.2, "n_uniform": 4}},
    "eval": {"n_samples": 32},
    "summary": {"power_populations": 10, "power_multiples": [1]},     # a small power report
}
# Cheap settings for the expensive measures and the probes (seconds, not minutes).
TINY_MEASURES = {
    "measures": {"n_points": 4, **{m.config_key: dict(m.tiny) for m in MEASURES.values()}},   # each entry's tiny
    "probes": {"n_samples": 40, "positions": "all"},
}


def tiny_bpe_tokenizer(texts, vocab_size: int):
    """A byte-level BPE tokenizer trained on ``texts`` (GPT-2 / Pythia style, ``<|endoftext|>``
    as BOS and EOS), for tests of the Hugging Face branch without downloads."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>")


def tiny_user_config(task: str = "add", level: str = "L1", size: str = "nano", **over) -> dict:
    """The tiny config (unresolved) for one run, with ``over`` merged in (nested dicts merge)."""
    from geoanatomy.config import deep_merge
    return deep_merge({**TINY, "grid": [{"tasks": [task], "levels": [level], "sizes": [size]}]}, over)


def tiny_config(task: str = "add", level: str = "L1", size: str = "nano", **over) -> dict:
    """The tiny config for one run, resolved (validated, defaults filled in)."""
    from geoanatomy.config import resolve
    return resolve(tiny_user_config(task, level, size, **over))


def quiet(*a, **k):
    pass


def safetensors_content(path: Path) -> tuple[dict, dict]:
    """(tensors by name, metadata) of a safetensors file: what two checkpoints are compared on
    (the file header's key order is not stable between writes, so whole-file bytes are not)."""
    from safetensors import safe_open
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def same_safetensors(a: tuple[dict, dict], b: tuple[dict, dict]) -> bool:
    """Whether two ``safetensors_content`` results hold the same tensors and metadata."""
    import torch
    return a[1] == b[1] and a[0].keys() == b[0].keys() and all(torch.equal(a[0][k], b[0][k]) for k in a[0])


def smk(workdir: Path, *args, check=True) -> subprocess.CompletedProcess:
    """Run Snakemake on this repository's Snakefile in ``workdir`` (this interpreter's
    environment, one thread per job); a failure raises with Snakemake's output when ``check``."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
           "--directory", str(workdir), *args]
    p = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=900)
    if check and p.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{p.stdout}\n{p.stderr}")
    return p


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    import torch
    torch.set_num_threads(1)


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """(cfg, spec, run_dir) of a tiny copy_L1_nano run, trained and with metrics.csv.
    Read-only: a test that writes into a run folder uses ``copy_of_trained_run``."""
    from geoanatomy.config import run_spec
    from geoanatomy.stages.metrics import run as metrics_run
    from geoanatomy.stages.train import run as train_run
    d = tmp_path_factory.mktemp("trained")
    cfg = tiny_config("copy", "L1", "nano", results_dir=str(d),
                      train={"steps": 24, "warmup": 4, "checkpoints": {"n_log": 5, "log_end": 0.25, "n_uniform": 4}},
                      **TINY_MEASURES)
    spec = run_spec(cfg, "copy_L1_nano")
    run_dir = d / spec.name
    train_run(spec, run_dir, device="cpu", log=quiet)
    metrics_run(spec, run_dir, device="cpu", log=quiet)
    return cfg, spec, run_dir


@pytest.fixture
def copy_of_trained_run(trained_run, tmp_path):
    """(cfg, spec, run_dir) of a private copy of the session's trained run."""
    from geoanatomy.config import resolve
    cfg, spec, run_dir = trained_run
    dst = tmp_path / run_dir.name
    shutil.copytree(run_dir, dst)
    return resolve({**copy.deepcopy(cfg), "results_dir": str(tmp_path)}), spec, dst


# ------------------------------------------------------------------ a Hugging Face hub, offline
def fake_hub_cache(cache, repo_id: str, revs: dict) -> Path:
    """A Hugging Face hub cache as huggingface_hub lays it out: blobs/<sha256>, refs/<branch>
    (a commit hash), snapshots/<commit>/<file> -> ../../blobs/<sha256>. ``revs``: {revision:
    [files it holds]} (a file's name is its name in the revision)."""
    import hashlib
    repo = Path(cache) / ("models--" + repo_id.replace("/", "--"))
    for d in ("blobs", "refs", "snapshots"):
        (repo / d).mkdir(parents=True, exist_ok=True)
    for rev, files in revs.items():
        commit = hashlib.sha1(f"{repo_id}@{rev}".encode()).hexdigest()
        (repo / "refs" / rev).write_text(commit)
        snap = repo / "snapshots" / commit
        snap.mkdir(exist_ok=True)
        for f in files:
            data = Path(f).read_bytes()
            blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
            blob.write_bytes(data)
            if not (snap / Path(f).name).exists():
                (snap / Path(f).name).symlink_to(os.path.relpath(blob, snap))
    return repo


class FakeHub:
    """Stands in for huggingface_hub.HfApi: ``list_repo_tree`` answers from a table
    {revision: {path: LFS sha256 or None}} with real ``RepoFile`` objects (LFS metadata as
    the hub API returns it); unknown branches raise. Records every call."""

    def __init__(self, table):
        self.table, self.calls = table, []

    def list_repo_tree(self, repo_id, path_in_repo=None, *, recursive=False, expand=False, revision=None,
                       repo_type=None, token=None):
        from huggingface_hub.hf_api import RepoFile
        self.calls.append((repo_id, revision))
        if revision not in self.table:
            raise LookupError(f"{repo_id}: no revision {revision}")
        out = []
        for path, sha in self.table[revision].items():
            lfs = None if sha is None else {"size": 1000, "oid": sha, "pointerSize": 134}
            out.append(RepoFile(path=path, size=1000, oid=f"{abs(hash((revision, path))):040x}"[:40], lfs=lfs))
        return out
