"""Faults: kill -9 mid-training (also mid-checkpoint-write), corrupted files, divergence,
malicious pickles. Each test fails if its protection is removed."""
import hashlib
import json
import os
import shutil
import pickle
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import safetensors.torch
import torch

from geoanatomy.checkpoints import CheckpointError, list_checkpoints, load_weights, save_weights
from geoanatomy.config import job_spec, resolve, run_spec
from geoanatomy.spec import JobSpec
from geoanatomy.stages.events import run as events_run
from geoanatomy.stages.metrics import run as metrics_run
from geoanatomy.table import TableError, read_table, write_table
from geoanatomy.stages.events import precursor_of_run
from geoanatomy.stages.common import build
from geoanatomy.stages.train import run as train_run


def cfg_for(steps=120, lr=1e-3, n_uniform=30, **extra):
    return resolve({"grid": [{"tasks": ["add"], "levels": ["L1"], "sizes": ["nano"]}],
                    "train": {"steps": steps, "warmup": 5, "lr": lr,
                              "checkpoints": {"n_log": 10, "log_end": 0.1, "n_uniform": n_uniform}},
                    "eval": {"n_samples": 32}, **extra})


def quiet(*a, **k):
    pass


# Run the training CLI in a child that SIGKILLs itself at its N-th file rename: the
# temporary file of an atomic write is complete, its rename has not happened (a kill in the
# middle of a checkpoint write). The patch lives only in that child process.
KILL_AT_RENAME = """
import os, signal, sys
n, count, real = int(sys.argv[1]), [0], os.replace
def replace(src, dst):
    count[0] += 1
    if count[0] >= n:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst)
os.replace = replace
from geoanatomy.cli import main
sys.exit(main(sys.argv[2:]))
"""


def cli_train(job: JobSpec, results: Path, kill_at_rename: int | None = None):
    """Start the training CLI as a child process (results_dir = results)."""
    job = JobSpec(job.stage, job.run, str(results), "cpu", job.blocks)
    args = ["train", "--spec", job.to_json(), "--threads", "1"]
    pre = ["-c", KILL_AT_RENAME, str(kill_at_rename)] if kill_at_rename else ["-m", "geoanatomy.cli"]
    return subprocess.Popen([sys.executable, *pre, *args], env=dict(os.environ, OMP_NUM_THREADS="1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_kill9_at_random_points_then_identical_table(tmp_path):
    cfg = cfg_for()
    spec = run_spec(cfg, "add_L1_nano")
    sj = job_spec(cfg, "add_L1_nano", "train")
    # the reference trains through the same CLI path as the killed run, uninterrupted
    ref = tmp_path / "ref" / "add_L1_nano"
    assert cli_train(sj, tmp_path / "ref").wait(timeout=600) == 0
    metrics_run(spec, ref, device="cpu", log=quiet)

    killed = tmp_path / "killed"
    rng = random.Random(0)
    kills = 0
    # 1) a kill in the middle of a checkpoint write (after the temp file, before its rename)
    p = cli_train(sj, killed, kill_at_rename=14)
    p.wait(timeout=300)
    assert p.returncode == -signal.SIGKILL
    kills += 1
    ck = killed / "add_L1_nano" / "checkpoints"
    assert list(ck.glob(".*.tmp")), "the kill should leave a complete but unrenamed temp file"
    # 1b) a kill between the training-log write and the optimizer-state write (renames: weights,
    # log, optimizer per checkpoint): the resumed log must still hold every checkpoint's row
    p = cli_train(sj, tmp_path / "between", kill_at_rename=3 * 4 + 3)
    p.wait(timeout=300)
    assert cli_train(sj, tmp_path / "between").wait(timeout=600) == 0
    assert ((tmp_path / "between" / "add_L1_nano" / "checkpoints" / "train_log.csv").read_bytes()
            == (ref / "checkpoints" / "train_log.csv").read_bytes())
    # 2) kills at random times while training
    for _ in range(3):
        before = list_checkpoints(ck)
        p = cli_train(sj, killed)
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None and len(list_checkpoints(ck)) < len(before) + 3:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 0.3))
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=60)
            kills += 1
    assert kills >= 3
    p = cli_train(sj, killed)
    assert p.wait(timeout=600) == 0, p.stderr.read()
    run = killed / "add_L1_nano"
    assert json.loads((run / "train.json").read_text())["resumed_from"] > 0
    assert not list(ck.glob(".*.tmp"))
    # every checkpoint's weights are bit-identical to the uninterrupted run's, and so is the table
    assert list_checkpoints(ck) == list_checkpoints(ref / "checkpoints")
    for s in list_checkpoints(ck):
        a = safetensors.torch.load_file(str(ck / f"step_{s:06d}.safetensors"))
        b = safetensors.torch.load_file(str(ref / "checkpoints" / f"step_{s:06d}.safetensors"))
        assert all(torch.equal(a[k], b[k]) for k in b), s
    metrics_run(spec, run, device="cpu", log=quiet)
    assert (run / "metrics.csv").read_bytes() == (ref / "metrics.csv").read_bytes()


@pytest.mark.slow
def test_corrupted_checkpoint_names_file_and_fix(copy_of_trained_run):
    _, spec, tmp_path = copy_of_trained_run
    step = list_checkpoints(tmp_path / "checkpoints")[3]
    bad = tmp_path / "checkpoints" / f"step_{step:06d}.safetensors"
    bad.write_bytes(bad.read_bytes()[: len(bad.read_bytes()) // 2])          # truncated
    with pytest.raises(CheckpointError) as e:
        metrics_run(spec, tmp_path, device="cpu", log=quiet)
    assert str(bad) in str(e.value) and "clean-run" in str(e.value)
    assert (tmp_path / "train.json").exists()                                 # nothing deleted
    assert len(list_checkpoints(tmp_path / "checkpoints")) > 5


def test_corrupted_table_names_file(tmp_path, monkeypatch):
    # a complete file of the pre-manifest format (valid end marker) that lacks columns
    body = "run,step\nx,1\n"
    (tmp_path / "metrics.csv").write_text(body + f"# end of table: 1 rows, sha256 "
                                                 f"{hashlib.sha256(body.encode()).hexdigest()}\n")
    monkeypatch.setenv("GEOANATOMY_LEGACY_TABLES", "1")
    with pytest.warns(RuntimeWarning, match="read without a manifest"), \
            pytest.raises(TableError, match="metrics.csv.*lacks columns.*clean-run"):
        read_table(tmp_path / "metrics.csv")


def test_a_table_without_its_manifest_is_read_only_when_asked(tmp_path, monkeypatch):
    """An edited metrics.csv (accuracy zeroed) with its manifest deleted and the old end marker
    rewritten passed the legacy path silently; now it is refused unless GEOANATOMY_LEGACY_TABLES=1
    asks for that format, and then every read warns."""
    rows = [{"run": "r", "step": s, "measure": "accuracy", "layer": "output", "layer_index": -1,
             "position": "answer", "variant": "", "n_samples": 8, "value": 0.0, "settings": {}} for s in range(3)]
    from geoanatomy.table import to_csv
    body = to_csv(rows)
    (tmp_path / "metrics.csv").write_text(body + f"# end of table: 3 rows, sha256 "
                                                 f"{hashlib.sha256(body.encode()).hexdigest()}\n")
    monkeypatch.delenv("GEOANATOMY_LEGACY_TABLES", raising=False)
    with pytest.raises(TableError, match=r"has no manifest .*read only with GEOANATOMY_LEGACY_TABLES=1"):
        read_table(tmp_path / "metrics.csv")
    monkeypatch.setenv("GEOANATOMY_LEGACY_TABLES", "1")
    with pytest.warns(RuntimeWarning, match=r"read without a manifest \(end marker"):
        assert len(read_table(tmp_path / "metrics.csv")) == 3


def test_table_cut_anywhere_is_detected(tmp_path):
    rows = [{"run": "r", "step": s, "measure": "accuracy", "layer": "output", "layer_index": -1,
             "position": "answer", "variant": "", "n_samples": 8, "value": s / 10, "settings": {"a": s}}
            for s in range(6)]
    path = tmp_path / "metrics.csv"
    write_table(path, rows)
    text = path.read_bytes()
    assert len(read_table(path)) == 6
    line_ends = [i + 1 for i, b in enumerate(text) if b == ord("\n")]
    for cut in sorted(set(range(0, len(text), 7)) | set(line_ends[:-1])):   # every line boundary too
        path.write_bytes(text[:cut])
        with pytest.raises(TableError, match="metrics.csv"):
            read_table(path)
    # one changed digit with the manifest intact
    path.write_bytes(text.replace(b"0.3", b"0.4", 1))
    with pytest.raises(TableError, match="damaged"):
        read_table(path)
    # no manifest: refused, naming it
    path.write_bytes(text)
    (tmp_path / "metrics.csv-metadata.json").unlink()
    with pytest.raises(TableError, match="has no manifest metrics.csv-metadata.json"):
        read_table(path)


@pytest.mark.slow
def test_truncated_metrics_of_a_run_is_refused_before_any_result(copy_of_trained_run):
    cfg, spec, run = copy_of_trained_run
    text = (run / "metrics.csv").read_bytes()
    lines = text.splitlines(keepends=True)
    (run / "metrics.csv").write_bytes(b"".join(lines[: len(lines) // 2]))     # cut at a line boundary
    with pytest.raises(TableError, match="metrics.csv.*incomplete"):
        events_run(spec, run, cfg["events"], log=quiet)
    assert not (run / "precursor.json").exists()


@pytest.mark.slow
def test_foreign_checkpoint_is_refused_by_name(copy_of_trained_run):
    cfg, spec, run = copy_of_trained_run
    ck = run / "checkpoints"
    steps = list_checkpoints(ck)
    # a checkpoint file from elsewhere dropped in under a step this run never saved
    stray = ck / "step_000017.safetensors"
    shutil.copy(ck / f"step_{steps[2]:06d}.safetensors", stray)
    with pytest.raises(CheckpointError, match="not written by this run.s training.*step_000017.safetensors"):
        metrics_run(spec, run, device="cpu", log=quiet)
    stray.unlink()
    # a recorded step whose file holds another run's weights (metadata names the other run)
    model, _ = build(spec)
    load_weights(ck / f"step_{steps[3]:06d}.safetensors", model)
    save_weights(ck, steps[3], model, {"run": "mod_L1_nano", "settings_hash": "0" * 16})
    with pytest.raises(CheckpointError, match=f"step_{steps[3]:06d}.safetensors.*another run"):
        metrics_run(spec, run, device="cpu", log=quiet)


@pytest.mark.slow
def test_a_checkpoint_copied_over_another_is_refused_even_after_clean_run(copy_of_trained_run):
    """step_A copied over step_B of the same run (same run, same settings: only the step
    metadata and the recorded hash tell them apart): every reader refuses it, and so does the
    documented recovery (clean-run, then the training job again), instead of adopting it."""
    from geoanatomy.cli import main
    cfg, spec, run = copy_of_trained_run
    ck = run / "checkpoints"
    steps = list_checkpoints(ck)
    a, b = steps[3], steps[5]
    shutil.copy(ck / f"step_{a:06d}.safetensors", ck / f"step_{b:06d}.safetensors")
    with pytest.raises(CheckpointError, match=f"step_{b:06d}.safetensors holds the weights of step '{a}'"):
        metrics_run(spec, run, device="cpu", log=quiet)
    assert main(["clean-run", str(run)]) == 0                      # train.json goes, checkpoints stay
    with pytest.raises(CheckpointError, match=f"step_{b:06d}.safetensors holds the weights of step '{a}'"):
        train_run(spec, run, device="cpu", log=quiet)
    assert not (run / "train.json").exists()


@pytest.mark.slow
def test_an_edited_checkpoint_is_refused_by_its_recorded_hash(copy_of_trained_run):
    """Weights changed in place with the right step metadata: train.json's checkpoint_sha256
    (the content hash when training wrote it) no longer matches."""
    cfg, spec, run = copy_of_trained_run
    ck = run / "checkpoints"
    s = list_checkpoints(ck)[4]
    model, _ = build(spec)
    meta = load_weights(ck / f"step_{s:06d}.safetensors", model)
    with torch.no_grad():
        next(model.parameters()).mul_(1.001)
    save_weights(ck, s, model, {k: v for k, v in meta.items() if k not in ("step", "dtype") and not k.startswith("_")})
    with pytest.raises(CheckpointError, match=f"step_{s:06d}.safetensors is not the file training wrote"):
        metrics_run(spec, run, device="cpu", log=quiet)


@pytest.mark.slow
def test_an_unscheduled_checkpoint_of_the_same_run_is_not_adopted(copy_of_trained_run):
    """A same-run checkpoint saved at a step the schedule never wrote, then clean-run and the
    training job again: train.json lists the scheduled steps only, so readers name the file."""
    from geoanatomy.cli import main
    cfg, spec, run = copy_of_trained_run
    ck = run / "checkpoints"
    steps = list_checkpoints(ck)
    odd = next(x for x in range(1, steps[-1]) if x not in steps)
    model, _ = build(spec)
    meta = load_weights(ck / f"step_{steps[2]:06d}.safetensors", model)
    save_weights(ck, odd, model, {k: v for k, v in meta.items() if k not in ("step", "dtype") and not
                                  k.startswith("_")})
    assert main(["clean-run", str(run)]) == 0
    rec = train_run(spec, run, device="cpu", log=quiet)
    assert odd not in rec["checkpoint_steps"] and rec["checkpoint_steps"] == steps
    assert sorted(map(int, rec["checkpoint_sha256"])) == steps
    with pytest.raises(CheckpointError, match=f"not written by this run.s training.*step_{odd:06d}.safetensors"):
        metrics_run(spec, run, device="cpu", log=quiet)


@pytest.mark.slow
def test_metrics_of_another_run_is_refused(copy_of_trained_run, trained_run):
    cfg, spec, run = copy_of_trained_run
    df = read_table(run / "metrics.csv")
    rows = df.drop(df.index[df["step"] == df["step"].max()]).to_dict("records")   # one checkpoint fewer
    write_table(run / "metrics.csv", rows)
    with pytest.raises(TableError, match="does not cover the checkpoints of train.json"):
        events_run(spec, run, cfg["events"], log=quiet)


@pytest.mark.slow
def test_tables_rewritten_with_a_valid_manifest_are_still_checked(copy_of_trained_run):
    """A tool that writes the table format (manifest and all): a duplicated row, a dropped
    RankMe point, the step labels of two whole checkpoints swapped, or a table made with other
    evaluation settings is refused by name."""
    cfg, spec, run = copy_of_trained_run
    df = read_table(run / "metrics.csv")
    rows = df.to_dict("records")
    write_table(run / "metrics.csv", rows + [rows[5]])
    with pytest.raises(TableError, match="rows sharing one .step, measure, layer, position, variant.*duplicated"):
        events_run(spec, run, cfg["events"], log=quiet)
    i = next(i for i, r in enumerate(rows) if r["measure"] == "rankme" and r["layer"] == "ln_final" and r["step"] > 0)
    write_table(run / "metrics.csv", rows[:i] + rows[i + 1:])
    with pytest.raises(TableError, match=r"curve rankme ln_final .* lacks steps \[%d\].*dropped" % rows[i]["step"]):
        events_run(spec, run, cfg["events"], log=quiet)
    steps = sorted({r["step"] for r in rows})
    a, b = steps[3], steps[6]
    swap = [{**r, "step": {a: b, b: a}.get(r["step"], r["step"])} for r in rows]
    write_table(run / "metrics.csv", swap)
    with pytest.raises(TableError, match=r"labelled with a step whose weights they were not measured on.*step "
                                         r"%d .* holds a value of the weights of step %d" % (b, a)):
        events_run(spec, run, cfg["events"], log=quiet)
    write_table(run / "metrics.csv", rows)
    events_run(spec, run, cfg["events"], log=quiet)                       # intact: accepted
    spec48 = run_spec(resolve({**cfg, "eval": {**cfg["eval"], "n_samples": 48}}), spec.name)
    with pytest.raises(TableError, match=r"made with eval.n_samples \[%d\] but the config says 48" %
                       cfg["eval"]["n_samples"]):
        events_run(spec48, run, cfg["events"], log=quiet)


def test_bad_precursor_message_says_how_to_rebuild(tmp_path):
    from geoanatomy.analysis.load import SummaryInputError, load_precursor
    p = tmp_path / "precursor.json"
    p.write_text("{not json")
    with pytest.raises(SummaryInputError, match=r"rm .*precursor.json.*snakemake"):
        load_precursor(p)


def test_clean_run_deletes_only_derived_files(tmp_path):
    from geoanatomy.cli import main
    run = tmp_path / "results" / "add_L1_nano"
    (run / "checkpoints").mkdir(parents=True)
    for f in ("metrics.csv", "precursor.json", "trajectory.png", "train.json", "checkpoints/step_000001.safetensors"):
        (run / f).write_text("x")
    other = tmp_path / "results" / "mod_L1_nano"
    other.mkdir()
    (other / "metrics.csv").write_text("keep")
    assert main(["clean-run", str(run)]) == 0
    assert not (run / "metrics.csv").exists() and not (run / "train.json").exists()
    assert (run / "checkpoints" / "step_000001.safetensors").exists()
    assert (other / "metrics.csv").read_text() == "keep"


def test_malicious_pickle_checkpoint_is_refused(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "step_000001.safetensors"
    with open(path, "wb") as f:
        pickle.dump({"wte.weight": Evil()}, f)
    model, _ = build(run_spec(cfg_for(), "add_L1_nano"))
    with pytest.raises(CheckpointError, match=str(path)):
        load_weights(path, model)
    assert not marker.exists()
    torch.save({"x": Evil()}, tmp_path / "evil.pt")
    with pytest.raises(Exception):
        torch.load(tmp_path / "evil.pt", weights_only=True)   # the only torch.load form we allow
    assert not marker.exists()


def test_no_unsafe_loading_in_source():
    src = Path(__file__).resolve().parents[1] / "src"
    for f in src.rglob("*.py"):
        text = f.read_text()
        for line in text.splitlines():
            if "torch.load(" in line:
                assert "weights_only=True" in line, f"{f}: {line.strip()}"
            assert "trust_remote_code=True" not in line, f"{f}: {line.strip()}"
            assert "pickle.load" not in line, f"{f}: {line.strip()}"


@pytest.mark.slow
def test_diverging_run_is_marked_and_nan_safe(tmp_path):
    cfg = resolve({"grid": [{"tasks": ["add"], "levels": ["L1"], "sizes": ["nano"]}],
                   "train": {"steps": 40, "warmup": 1, "lr": 1e6, "grad_clip": 0,
                             "checkpoints": {"n_log": 5, "log_end": 0.1, "n_uniform": 8}},
                   "eval": {"n_samples": 32}})
    spec = run_spec(cfg, "add_L1_nano")
    s = train_run(spec, tmp_path, device="cpu", log=quiet)
    assert s["diverged"]
    metrics_run(spec, tmp_path, device="cpu", log=quiet)
    pre = precursor_of_run(spec, tmp_path, cfg["events"])[0]
    json.dumps(pre, allow_nan=False)                               # strict JSON: NaN became null
    assert pre["diverged"] and pre["difficulty"] == "diverged" and not pre["acquired"]
    assert pre["measures"]["rankme"]["precursor"] is False


def test_atomic_writes_get_normal_permissions(tmp_path):
    from geoanatomy.files import atomic_write_text
    umask = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "x.json", "{}")
    finally:
        os.umask(umask)
    assert (tmp_path / "x.json").stat().st_mode & 0o777 == 0o644
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("argv, message", [
    (["train", "--spec", "not json"], "geoanatomy train: --spec is not valid JSON"),
    (["train", "--spec", "{}"], "geoanatomy train: --spec lacks ['stage', 'run', 'results_dir']"),
    (["train", "--spec", '{"stage": "train", "run": {"x": 1}, "results_dir": "r"}'], "field 'run' is not a run spec"),
    (["summarize", "tables", "--results", "RESULTS", "--settings", '{"alpha": "x"}'],
     "config field 'summary.alpha': 'x' is not of type 'number'"),
    # two that exited 1 with no prefix
    (["metrics", "--spec", "TRAIN_SPEC"], "geoanatomy metrics: the --spec is for stage 'train', not 'metrics'"),
    (["train", "--config", "config.yaml"], "geoanatomy train: give --run NAME"),
    (["report", "compare", "RESULTS/a.csv", "RESULTS/a.csv"], "geoanatomy report compare: table "),
    (["report", "grid", "RESULTS/nowhere"], "geoanatomy report grid: "),        # once an empty table, exit 0
    (["scan", "RESULTS", "--probe", "x", "--n-items", "-1"], "argument --n-items: -1 is not >= 1"),  # dropped a prompt
])
def test_cli_errors_are_one_line_and_exit_2(tmp_path, argv, message):
    if "TRAIN_SPEC" in argv:
        from conftest import REPO
        from geoanatomy.config import job_spec, load_config
        spec = job_spec(load_config([str(REPO / "config.yaml")], workdir=str(REPO), check_device=False),
                        "mod_L3_nano", "train").to_json()
        argv = [spec if a == "TRAIN_SPEC" else a for a in argv]
    argv = [a.replace("RESULTS", str(tmp_path)) for a in argv]
    (tmp_path / "a.csv").write_text("claim,verdict\na,reproduced\n")        # a table without its manifest
    r = subprocess.run([sys.executable, "-m", "geoanatomy.cli", *argv], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_zero_probe_batch_size_is_refused_by_name(tmp_path):
    # once a bare "range() arg 3 must not be zero" from inside the scan
    r = subprocess.run([sys.executable, "-m", "geoanatomy.cli", "scan", str(tmp_path), "--probe", "x", "--batch-size",
                        "0"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "argument --batch-size: 0 is not >= 1" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("argv, message", [
    (["--nope"], "geoanatomy: error: the following arguments are required: COMMAND"),
    (["train", "--threads", "0"], "geoanatomy train: error: argument --threads: 0 is not >= 1"),
    (["summarize", "nope"], "geoanatomy summarize: error: argument part: invalid choice: 'nope'"),
    (["export", "--nope"], "geoanatomy export: error: the following arguments are required"),
    (["classes", "build"], "geoanatomy classes build: error: the following arguments are required"),
    (["pythia", "nope"], "geoanatomy pythia: error: argument cmd: invalid choice: 'nope'"),
    # device strings are checked against the machine before any work (a raw torch traceback,
    # a silent fallback to the config's device, or an echoed string before)
    (["train", "--config", "config.yaml", "--run", "mod_L3_nano", "--device", "gpu"],
     "geoanatomy train: error: argument --device: 'gpu' is not a device; use auto, cpu, cuda or cuda:N"),
    (["train", "--config", "config.yaml", "--run", "mod_L3_nano", "--device", ""],
     "geoanatomy train: error: argument --device: '' is not a device"),
    (["scan", "x", "--device", "cuda:99"], "geoanatomy scan: error: argument --device: 'cuda:99' is not available on"
                                          " this machine (torch"),
    (["pythia", "extract", "--device", "mps"], "geoanatomy pythia extract: error: argument --device: 'mps' is not a"
                                               " device"),
])
def test_a_usage_error_is_one_line_naming_the_argument(argv, message):
    r = subprocess.run([sys.executable, "-m", "geoanatomy.cli", *argv], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert message in r.stderr and "--help)" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_stage_run_before_training_is_one_line(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("grid:\n  - {tasks: [add], levels: [L1], sizes: [nano]}\nresults_dir: results\n")
    r = subprocess.run([sys.executable, "-m", "geoanatomy.cli", "metrics", "--config", str(cfg), "--run",
                        "add_L1_nano"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert ("geoanatomy metrics: no checkpoints in results/add_L1_nano/checkpoints: run the training job first"
            in r.stderr)


def test_a_full_disk_names_the_file_being_written(tmp_path, monkeypatch):
    import errno
    from geoanatomy import files

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(files.os, "fsync", full)
    target = tmp_path / "results" / "x.csv"
    with pytest.raises(OSError, match=r"No space left on device while writing .*results/x.csv") as e:
        files.atomic_write_text(target, "a,b\n")
    assert e.value.errno == errno.ENOSPC and not target.exists()
    assert not list(target.parent.glob(".*.tmp"))                     # no temporary file left behind


@pytest.mark.parametrize("cmd", [[], ["validate"], ["runs"], ["train"], ["metrics"], ["clean-run"], ["summarize"],
                                 ["scan"], ["export"], ["classes"], ["pythia"]])
def test_cli_help_is_for_users(cmd):
    """Every command's --help: no reST markup, every option described (an option alone on its
    line must have its description on the next one), examples where the top level lists them."""
    import re
    r = subprocess.run([sys.executable, "-m", "geoanatomy.cli", *cmd, "--help"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "``" not in r.stdout
    lines = r.stdout.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("options:")), len(lines))
    bare = [ln.strip() for i, ln in enumerate(lines[start:], start)
            if re.match(r"^  (-\w, )?--[\w-]+( [A-Z_]+| \{[^}]*\})?$", ln)
            and not (i + 1 < len(lines) and lines[i + 1].startswith("        "))]
    assert not bare, f"options without a description: {bare}"
    if not cmd:
        assert "examples:" in r.stdout and "geoanatomy train --config config.yaml --run mod_L3_nano" in r.stdout


def test_every_checkpoint_stage_logs_a_progress_line_per_checkpoint(copy_of_trained_run):
    """The README promises a progress line per checkpoint in each job's log; metrics, measures
    and probes had none until their last line."""
    from geoanatomy.checkpoints import list_checkpoints
    from geoanatomy.stages.measures import run as measures_run
    from geoanatomy.stages.metrics import run as metrics_run
    from geoanatomy.stages.probes import run as probes_run
    cfg, spec, run_dir = copy_of_trained_run
    n = len(list_checkpoints(run_dir / "checkpoints"))
    for stage, fn, kw in (("metrics", metrics_run, {}), ("measures", measures_run, {"cfg_measures": cfg["measures"]}),
                          ("probes", probes_run, {"cfg_probes": cfg["probes"]})):
        lines = []
        fn(spec, run_dir, device="cpu", log=lines.append, **kw)
        done = [ln for ln in lines if ln.startswith(f"[{stage}] {spec.name}: checkpoint step ")]
        assert done and len(done) <= n, (stage, lines)
        assert done[-1].split("(")[1].split(",")[0] == f"{len(done)}/{len(done)}", done[-1]
        if stage == "metrics":
            assert len(done) == n


def test_the_same_weights_and_settings_get_one_content_hash_whatever_the_key_order(tmp_path):
    """A checkpoint's metadata held JSON in the key order of the dict it came from, so a run
    trained through --config and through --spec got different content hashes for the same
    weights (one canonical encoding now)."""
    import torch
    from geoanatomy.checkpoints import save_weights, weights_sha256
    model = torch.nn.Linear(3, 2)
    a = {"run_spec": {"lr": 0.001, "steps": 10}, "settings_hash": "x"}
    b = {"settings_hash": "x", "run_spec": {"steps": 10, "lr": 0.001}}
    pa = save_weights(tmp_path, 1, model, a, path=tmp_path / "a.safetensors")
    pb = save_weights(tmp_path, 1, model, b, path=tmp_path / "b.safetensors")
    assert weights_sha256(pa) == weights_sha256(pb)


def test_a_hand_edited_train_json_is_refused_by_its_seal(copy_of_trained_run):
    """train.json is sealed like precursor.json: `diverged: true` written by hand into it was
    sealed into precursor.json by the events stage; now the stage refuses it by name."""
    from geoanatomy.errors import CheckpointError
    from geoanatomy.stages.events import run as events_run
    cfg, spec, run_dir = copy_of_trained_run
    rec = json.loads((run_dir / "train.json").read_text())
    assert "content_sha256" in rec
    rec["diverged"] = True
    (run_dir / "train.json").write_text(json.dumps(rec))
    with pytest.raises(CheckpointError, match=r"train\.json: its content does not match its content_sha256 seal"):
        events_run(spec, run_dir, cfg_events=cfg["events"], log=lambda m: None)


def test_a_stripped_seal_is_refused_unless_the_legacy_switch_is_set(copy_of_trained_run, monkeypatch):
    """A train.json whose seal key was deleted was accepted as unsealed (diverged: true sealed
    into precursor.json); now it is refused by the events stage and by open_run, unless
    GEOANATOMY_LEGACY_UNSEALED=1 says the record predates seals."""
    import geoanatomy
    from geoanatomy.errors import CheckpointError
    from geoanatomy.stages.events import run as events_run
    cfg, spec, run_dir = copy_of_trained_run
    rec = json.loads((run_dir / "train.json").read_text())
    rec.pop("content_sha256")
    rec["diverged"] = True
    (run_dir / "train.json").write_text(json.dumps(rec))
    with pytest.raises(CheckpointError,
                       match=r"train\.json: it has no content_sha256 seal .*GEOANATOMY_LEGACY_UNSEALED"):
        events_run(spec, run_dir, cfg_events=cfg["events"], log=lambda m: None)
    with pytest.raises(CheckpointError, match="has no content_sha256 seal"):
        geoanatomy.open_run(run_dir)
    monkeypatch.setenv("GEOANATOMY_LEGACY_UNSEALED", "1")
    assert geoanatomy.open_run(run_dir).name == spec.name


def test_an_optimizer_state_without_its_hash_record_is_not_resumed_from(copy_of_trained_run):
    from geoanatomy.checkpoints import check_resume_state, read_meta
    from geoanatomy.errors import CheckpointError
    cfg, spec, run_dir = copy_of_trained_run
    ck = run_dir / "checkpoints"
    meta = read_meta(ck / "optim.safetensors")
    check_resume_state(ck, int(meta["step"]), meta)                      # with its record: resumable
    (ck / "optim.sha256.json").unlink()
    with pytest.raises(CheckpointError, match=r"optim\.sha256\.json is missing: .*not resuming from it"):
        check_resume_state(ck, int(meta["step"]), meta)


def test_a_run_read_from_legacy_tables_says_so_in_its_record_and_the_summary(copy_of_trained_run, monkeypatch):
    """Tables of the earlier format are read only on request, and then every output says so:
    precursor.json lists them (legacy_tables) and the summary's run line counts those runs."""
    import warnings

    from geoanatomy.analysis.summarize import _n_line
    from geoanatomy.manifest import manifest_path
    cfg, spec, d = copy_of_trained_run
    p = d / "metrics.csv"
    body = p.read_text()
    p.write_text(body + f"# end of table: {body.count(chr(10)) - 1} rows, sha256 "
                        f"{hashlib.sha256(body.encode()).hexdigest()}\n")
    manifest_path(p).unlink()
    monkeypatch.setenv("GEOANATOMY_LEGACY_TABLES", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        pre = precursor_of_run(spec, d, cfg["events"])[0]
    assert pre["legacy_tables"] and "metrics.csv" in pre["legacy_tables"][0]
    assert "without a manifest" in _n_line([{**pre, "run": spec.name}])


def test_monitor_every_and_run_model_step_are_checked():
    """Monitor(every="10") iterated characters and every=2.5 failed with a TypeError at the first
    step; open_run(...).model(7.9) loaded step 7."""
    import torch

    from geoanatomy.monitor import Monitor, Probe
    probe = Probe(torch.randint(0, 10, (4, 6)))
    for bad in ("10", 2.5, [1, "2"], True):
        with pytest.raises(ValueError, match="every"):
            Monitor(probe, every=bad, log=None)
    assert Monitor(probe, every=[0, 5], log=None).every == [0, 5]


def test_a_precursor_record_with_impossible_values_is_refused():
    from geoanatomy.analysis.load import record_problems
    ok = {"run": "add_L1_nano", "task": "add", "level": "L1", "size": "nano", "seed": 0, "control": "",
          "final_accuracy": 0.5, "n_params": 100}
    assert not [p for p in record_problems(ok) if "final_accuracy" in p or "n_params" in p]
    bad = record_problems({**ok, "final_accuracy": 7.5, "n_params": -3})
    assert any("'final_accuracy' is 7.5, not a share in [0, 1]" in p for p in bad)
    assert any("'n_params' is -3, not a positive parameter count" in p for p in bad)


def test_run_model_refuses_a_fractional_step(copy_of_trained_run):
    import geoanatomy
    cfg, spec, run_dir = copy_of_trained_run
    run = geoanatomy.open_run(run_dir)
    s = run.steps[1]
    with pytest.raises(ValueError, match=rf"step must be a whole number, got {s + 0.9}"):
        run.model(s + 0.9)
    assert run.model(float(s)) is not None
