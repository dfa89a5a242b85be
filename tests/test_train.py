"""Training: exact resume after interruption, CPU determinism, stale checkpoints discarded."""
import hashlib
import json
from pathlib import Path

import pytest
import torch

from conftest import quiet, safetensors_content, same_safetensors, tiny_config
from geoanatomy.checkpoints import ckpt_path, list_checkpoints, load_weights
from geoanatomy.config import resolve, run_spec
from geoanatomy.stages.metrics import run as metrics_run
from geoanatomy.stages.common import build
from geoanatomy.stages.train import run as train_run


pytestmark = pytest.mark.slow  # every test here trains a model


def tiny_cfg(**train):
    return tiny_config(train=train)


def weights(run_dir: Path, step: int, spec):
    model, _ = build(spec)
    load_weights(run_dir / "checkpoints" / f"step_{step:06d}.safetensors", model)
    return {k: v.clone() for k, v in model.state_dict().items()}


class Killed(Exception):
    pass


def stop_after(step):
    """An on_checkpoint callback that interrupts training once checkpoint ``step`` is on disk."""
    def cb(s):
        if s >= step:
            raise Killed(s)
    return cb


def train_until(spec, run_dir, step):
    with pytest.raises(Killed):
        train_run(spec, run_dir, device="cpu", on_checkpoint=stop_after(step), log=quiet)


def test_resume_gives_identical_final_weights(tmp_path):
    cfg = tiny_cfg()
    spec = run_spec(cfg, "add_L1_nano")
    full = tmp_path / "full"
    train_run(spec, full, device="cpu", log=quiet)
    part = tmp_path / "part"
    train_until(spec, part, 16)                                        # "killed" after step 16
    assert not (part / "train.json").exists()
    s = train_run(spec, part, device="cpu", log=quiet)
    assert s["resumed_from"] == 16
    assert list_checkpoints(full / "checkpoints") == list_checkpoints(part / "checkpoints")
    a, b = weights(full, 40, spec), weights(part, 40, spec)
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert (full / "checkpoints" / "train_log.csv").read_bytes() == (part / "checkpoints" /
                                                                     "train_log.csv").read_bytes()


def test_resume_drops_weights_newer_than_optimizer_state(tmp_path):
    spec = run_spec(tiny_cfg(), "add_L1_nano")
    d = tmp_path / "r"
    train_until(spec, d, 16)
    # simulate a kill between the weight write and the optimizer-state write of step 24
    (d / "checkpoints" / "step_000024.safetensors").write_bytes(
        (d / "checkpoints" / "step_000016.safetensors").read_bytes())
    s = train_run(spec, d, device="cpu", log=quiet)
    assert s["resumed_from"] == 16
    ref = tmp_path / "ref"
    train_run(spec, ref, device="cpu", log=quiet)
    a, b = weights(ref, 24, spec), weights(d, 24, spec)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_changed_settings_move_old_checkpoints_aside_never_delete_them(tmp_path):
    d = tmp_path / "r"
    train_until(run_spec(tiny_cfg(), "add_L1_nano"), d, 16)
    before = sorted(p.name for p in (d / "checkpoints").glob("step_*.safetensors"))
    msgs = []
    s = train_run(run_spec(tiny_cfg(lr=3e-3), "add_L1_nano"), d, device="cpu", log=msgs.append)
    assert s["resumed_from"] == 0
    assert any("other settings" in m and "moved to" in m and "nothing deleted" in m for m in msgs)
    moved = list((d / "superseded").glob("checkpoints-*"))
    assert len(moved) == 1 and sorted(p.name for p in moved[0].glob("step_*.safetensors")) == before


def test_a_foreign_checkpoint_in_a_run_folder_is_refused_and_nothing_is_deleted(tmp_path):
    """One checkpoint of another run (other settings) copied in under a plausible name: the
    rerun refuses, naming it, and every good checkpoint is still there (it used to delete the
    folder and retrain from step 0)."""
    from geoanatomy.errors import CheckpointError
    spec = run_spec(tiny_cfg(), "add_L1_nano")
    d, other = tmp_path / "r", tmp_path / "o"
    train_until(spec, d, 16)
    train_until(run_spec(tiny_cfg(lr=3e-3), "add_L1_nano"), other, 8)
    (d / "checkpoints" / "step_000012.safetensors").write_bytes(
        (other / "checkpoints" / "step_000008.safetensors").read_bytes())
    good = {p.name: p.read_bytes() for p in (d / "checkpoints").glob("step_*.safetensors")}
    with pytest.raises(CheckpointError, match=r"another run wrote .*step_000012\.safetensors.*Nothing was deleted"):
        train_run(spec, d, device="cpu", log=quiet)
    assert {p.name: p.read_bytes() for p in (d / "checkpoints").glob("step_*.safetensors")} == good


@pytest.mark.parametrize("damage", ["flip optim.safetensors", "flip step_000016.safetensors",
                                    "truncate step_000016.safetensors"])
def test_a_damaged_newest_state_is_resumed_past_from_the_previous_good_one(tmp_path, damage):
    """A flipped bit or a truncated file in the newest resume state is found by its hash before
    training resumes; training resumes from the state before it (kept for that), the damaged
    files are moved aside (never deleted), and the run ends with the uninterrupted run's weights."""
    spec = run_spec(tiny_cfg(), "add_L1_nano")
    full = tmp_path / "full"
    train_run(spec, full, device="cpu", log=quiet)
    d = tmp_path / "r"
    train_until(spec, d, 16)
    how, target = damage.split()
    f = d / "checkpoints" / target
    b = bytearray(f.read_bytes())
    if how == "flip":
        b[-3] ^= 0x01                               # one bit of the last tensor's data
    else:
        b = b[: len(b) // 2]
    f.write_bytes(bytes(b))
    lines = []
    out = train_run(spec, d, device="cpu", log=lines.append)
    assert out["resumed_from"] < 16 and any("resuming from the previous good one" in ln for ln in lines)
    assert (d / "superseded" / "damaged" / target).exists()                       # moved aside, not deleted
    ck = d / "checkpoints"
    assert list_checkpoints(ck) == list_checkpoints(full / "checkpoints")
    last = list_checkpoints(ck)[-1]
    assert same_safetensors(safetensors_content(ckpt_path(ck, last)),
                            safetensors_content(ckpt_path(full / "checkpoints", last)))


def test_no_good_state_is_refused_and_nothing_deleted(tmp_path):
    from geoanatomy.errors import CheckpointError
    spec = run_spec(tiny_cfg(), "add_L1_nano")
    d = tmp_path / "r"
    train_until(spec, d, 16)
    for name in ("optim.safetensors", "optim.prev.safetensors"):
        f = d / "checkpoints" / name
        b = bytearray(f.read_bytes())
        b[-3] ^= 0x01
        f.write_bytes(bytes(b))
    steps = list_checkpoints(d / "checkpoints")
    with pytest.raises(CheckpointError, match="no good state to resume from"):
        train_run(spec, d, device="cpu", log=quiet)
    assert list_checkpoints(d / "checkpoints") == steps and not (d / "train.json").exists()


def test_same_seed_same_bytes(tmp_path):
    spec = run_spec(tiny_cfg(), "add_L1_nano")
    digests = []
    for name in ("a", "b"):
        d = tmp_path / name
        train_run(spec, d, device="cpu", log=quiet)
        metrics_run(spec, d, device="cpu", log=quiet)
        digests.append(hashlib.sha256((d / "metrics.csv").read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    other = run_spec(resolve({**tiny_cfg(), "seed": 1}), "add_L1_nano_s1")
    d = tmp_path / "c"
    train_run(other, d, device="cpu", log=quiet)
    metrics_run(other, d, device="cpu", log=quiet)
    assert hashlib.sha256((d / "metrics.csv").read_bytes()).hexdigest() != digests[0]


def test_loss_decreases_on_copy(tmp_path):
    cfg = resolve({"grid": [{"tasks": ["copy"], "levels": ["L1"], "sizes": ["nano"]}],
                   "train": {"steps": 120, "warmup": 10, "lr": 3e-3,
                             "checkpoints": {"n_log": 3, "log_end": 0.1, "n_uniform": 4}},
                   "eval": {"n_samples": 64}})
    spec = run_spec(cfg, "copy_L1_nano")
    train_run(spec, tmp_path, device="cpu", log=quiet)
    import csv
    rows = list(csv.DictReader(open(tmp_path / "checkpoints" / "train_log.csv")))
    assert float(rows[-1]["train_loss"]) < 0.5 * float(rows[0]["train_loss"])


def test_compact_checkpoints_resume_exactly_and_tables_stay_within_tolerance(tmp_path):
    """float16 analysis checkpoints: training is the same (the exact float32 weights ride with
    the optimizer state, so an interrupted run resumes bit for bit), each checkpoint file is
    half the size, and metrics.csv from them stays within the stated tolerance of the float32
    run's: accuracies within 1/N, log-probabilities within 0.01 nats, RankMe within 1%."""
    import numpy as np

    from geoanatomy.table import read_table
    full, half, part = tmp_path / "f32", tmp_path / "f16", tmp_path / "f16_part"
    s32 = run_spec(tiny_cfg(), "add_L1_nano")
    s16 = run_spec(tiny_cfg(checkpoint_dtype="float16"), "add_L1_nano")
    for spec, d in ((s32, full), (s16, half)):
        train_run(spec, d, device="cpu", log=quiet)
        metrics_run(spec, d, device="cpu", log=quiet)
    train_until(s16, part, 16)
    assert train_run(s16, part, device="cpu", log=quiet)["resumed_from"] == 16
    from safetensors.torch import load_file
    fa, fb = (load_file(str(d / "checkpoints" / "optim.safetensors")) for d in (half, part))
    assert any(k.startswith("weights.") for k in fa)                       # the exact float32 weights
    assert all(torch.equal(fa[k], fb[k]) for k in fa)                       # ... identical after a resume
    for s in (16, 24, 40):
        assert torch.equal(torch.cat([v.flatten().float() for v in weights(half, s, s16).values()]),
                           torch.cat([v.flatten().float() for v in weights(part, s, s16).values()])), s
    size = lambda d: (d / "checkpoints" / "step_000024.safetensors").stat().st_size  # noqa: E731
    assert size(half) < 0.55 * size(full)
    a, b = read_table(full / "metrics.csv"), read_table(half / "metrics.csv")
    key = ["step", "measure", "layer", "position", "variant"]
    m = a.merge(b, on=key, suffixes=("_32", "_16"))
    assert len(m) == len(a) == len(b)
    n = int(a["n_samples"].max())
    acc = m["measure"].str.startswith("accuracy") | (m["measure"] == "token_accuracy")
    assert (np.abs(m.loc[acc, "value_32"] - m.loc[acc, "value_16"]) <= 1.0 / n + 1e-12).all()
    lp = m["measure"].isin(["logprob", "logprob_per_token", "loss"])
    assert (np.abs(m.loc[lp, "value_32"] - m.loc[lp, "value_16"]) <= 0.01).all()
    rm = (m["measure"] == "rankme") & m["value_32"].notna()
    assert (np.abs(m.loc[rm, "value_32"] / m.loc[rm, "value_16"] - 1) <= 0.01).all()


def test_prune_keeps_final_refuses_readers_and_retraining_rebuilds_the_same_checkpoints(copy_of_trained_run):
    """keep_checkpoints: final. After pruning only the newest weights, the resume state and the
    log remain; a reader stops with the fix; retraining rebuilds identical checkpoints."""
    from geoanatomy.checkpoints import CheckpointError, ckpt_path, list_checkpoints
    from geoanatomy.stages.common import open_run
    from geoanatomy.stages.prune import run as prune_run
    from geoanatomy.stages.train import run as train_run
    from geoanatomy.errors import ConfigError
    from geoanatomy.stages.measures import run as measures_run
    from geoanatomy.stages.probes import run as probes_run
    cfg, spec, run_dir = copy_of_trained_run
    ck = run_dir / "checkpoints"
    steps = list_checkpoints(ck)
    before = {s: safetensors_content(ckpt_path(ck, s)) for s in steps}
    # refused, nothing removed: a config that keeps every checkpoint, then readers not finished
    # (by hand before measures and probes it once removed all but one checkpoint)
    with pytest.raises(ConfigError, match=r"keeps every checkpoint \(keep_checkpoints: 'all'\).*Nothing removed"):
        prune_run(spec, run_dir, "all", log=quiet)
    with pytest.raises(ConfigError, match=r"have not finished: .*measures\.csv, .*probes\.csv missing"):
        prune_run(spec, run_dir, "final", log=quiet)
    assert list_checkpoints(ck) == steps and not (run_dir / "pruned.json").exists()
    measures_run(spec, run_dir, cfg_measures=cfg["measures"], device="cpu", log=quiet)
    probes_run(spec, run_dir, cfg_probes=cfg["probes"], device="cpu", log=quiet)
    size_before = sum(p.stat().st_size for p in ck.iterdir())
    out = prune_run(spec, run_dir, "final", log=quiet)
    assert list_checkpoints(ck) == steps[-1:]
    assert (ck / "optim.safetensors").exists() and (ck / "train_log.csv").exists()
    rec = json.loads((run_dir / "pruned.json").read_text())
    assert rec["complete"] and rec["removed_steps"] == steps[:-1] and rec["kept_steps"] == steps[-1:]
    assert out["bytes_freed"] == size_before - sum(p.stat().st_size for p in ck.iterdir())
    with pytest.raises(CheckpointError, match="removed after its stages finished.*--forcerun train"):
        open_run(spec, run_dir, device="cpu")
    train_run(spec, run_dir, device="cpu", log=quiet)      # what `--forcerun train` runs
    assert not (run_dir / "pruned.json").exists()
    assert list_checkpoints(ck) == steps
    assert [s for s in steps if not same_safetensors(safetensors_content(ckpt_path(ck, s)), before[s])] == []
    open_run(spec, run_dir, device="cpu")


def test_a_stray_prune_record_beside_complete_checkpoints_deletes_nothing(copy_of_trained_run):
    """A pruned.json that is not true of the folder (its removed steps are there) or not this
    run's (another settings hash) is refused by name; every checkpoint stays (it once made
    training remove 17 good checkpoints and retrain from 0)."""
    from geoanatomy.checkpoints import header_meta
    from geoanatomy.errors import CheckpointError
    from geoanatomy.stages.train import run as train_run
    cfg, spec, run_dir = copy_of_trained_run
    ck = run_dir / "checkpoints"
    steps = list_checkpoints(ck)
    before = {s: ckpt_path(ck, s).read_bytes() for s in steps}
    h = header_meta(ckpt_path(ck, steps[-1]))["settings_hash"]
    (run_dir / "train.json").unlink()
    for rec, needle in (({"settings_hash": h, "removed_steps": steps[:-1]}, "the record is not true of"),
                        ({"settings_hash": "other", "removed_steps": []}, "written for other settings")):
        (run_dir / "pruned.json").write_text(json.dumps(rec))
        with pytest.raises(CheckpointError, match=needle):
            train_run(spec, run_dir, device="cpu", log=quiet)
        assert {s: ckpt_path(ck, s).read_bytes() for s in list_checkpoints(ck)} == before


def test_a_kill_between_the_optimizer_hash_and_the_optimizer_state_still_resumes(tmp_path):
    """The hash of a new optimizer state is recorded before the state is written, beside the
    previous one: a kill between the two leaves the old state on disk and a record that still
    names it, so the run resumes (the first version recorded after writing and refused)."""
    spec = run_spec(tiny_cfg(), "add_L1_nano")
    d = tmp_path / "r"
    train_until(spec, d, 16)
    rec = d / "checkpoints" / "optim.sha256.json"
    states = json.loads(rec.read_text())["states"]
    assert states[-1]["step"] == 16
    rec.write_text(json.dumps({"states": states[-1:] + [{"step": 24, "sha256": "0" * 64}]}))   # killed here
    assert train_run(spec, d, device="cpu", log=quiet)["resumed_from"] == 16
