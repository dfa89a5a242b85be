"""The precursor monitor (geoanatomy.monitor): online events equal the offline detectors,
no look-ahead, the same numbers and table format as the pipeline, the project's GPT and a
Hugging Face causal LM, positions, resume, and the ``transformers.Trainer`` callback."""
import json
import os

import numpy as np
import pytest
import torch

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from geoanatomy import detectors as ev  # noqa: E402
from geoanatomy.config import DEFAULTS  # noqa: E402
from geoanatomy.monitor import Monitor, OnlineAcquisition, OnlineCollapse, Probe  # noqa: E402
from geoanatomy.table import curve, read_table  # noqa: E402

E = dict(DEFAULTS["events"])
KEYS = ("collapse", "floor", "recovery")


def _steps(n, k=5):
    return [k * i for i in range(n)]


def _curves():
    """Named falling curves (numpy, seeded): collapse + recovery, no recovery, no collapse,
    a second deeper dip after a recovery, a noisy slow fall."""
    rng = np.random.default_rng(0)
    t = np.arange(60, dtype=float)
    dip = 10 - 8 * np.exp(-((t - 20) / 6) ** 2)
    return {
        "recovers": dip + rng.normal(0, 0.05, 60),
        "no_recovery": 10 - 8 * (1 - np.exp(-t / 8)) + rng.normal(0, 0.05, 60),
        "flat": 10 + rng.normal(0, 0.1, 60),
        "second_dip": np.where(t < 40, dip, 10 - 9.5 * np.exp(-((t - 50) / 3) ** 2)) + rng.normal(0, 0.02, 60),
        "slow_noisy": 10 - 6 * t / 60 + 2.0 * np.exp(-((t - 45) / 4) ** 2) + rng.normal(0, 0.4, 60),
    }


def _feed(values, e=E, k=5):
    tr = OnlineCollapse("c", e)
    recs = []
    for s, v in zip(_steps(len(values), k), values):
        recs += tr.update(s, v)
    return tr, recs


# a fall that goes on after the collapse is reported: the onset seen on the prefix is not the
# whole curve's, and the floor is never confirmed (no recovery)
STAIRS = np.array([10.0] * 5 + [9.5, 9.0, 8.5, 8.0, 7.5, 7.0] + [6.5] * 8 + [1.0] * 10)


def _events(entry: dict) -> dict:
    """{collapse, floor, recovery} steps of a ``curve_entry``-like dict (``collapsed`` and
    ``<event>_step`` keys); None for all when the curve did not collapse."""
    return {k: entry[f"{k}_step"] if entry["collapsed"] else None for k in KEYS}


def _logged(recs: list[dict], label: str | None = None) -> dict:
    """The events an online event log reports (for the curve ``label``): the step of the last
    report of each of collapse, floor and recovery; None where never reported."""
    out = dict.fromkeys(KEYS)
    for r in recs:
        if r["event"] in KEYS and (label is None or r["curve"] == label):
            out[r["event"]] = r["step"]
    return out


def _differences(online: dict, offline: dict) -> dict:
    """{event: (online step, offline step)} for the events where the two disagree."""
    return {k: (online[k], offline[k]) for k in KEYS if online[k] != offline[k]}


@pytest.mark.parametrize("detector", ["matched", "legacy"])
def test_logged_events_against_the_offline_detector(detector):
    """The events the online log reports against ``events.curve_entry`` on the whole curve:
    equal for curves that end confirmed (recovered) or never collapse; for a curve that keeps
    falling after its collapse was reported, the comparison finds the difference."""
    e = {**E, "detector": detector}
    for name in ("recovers", "second_dip", "flat"):
        vals = _curves()[name]
        tr, recs = _feed(vals, e)
        assert set(tr.state()["status"].values()) <= {"confirmed", None}, name
        assert _differences(_logged(recs), _events(ev.curve_entry(_steps(len(vals)), vals, "down", e))) == {}, name
    tr, recs = _feed(STAIRS, e)
    diff = _differences(_logged(recs), _events(ev.curve_entry(_steps(len(STAIRS)), STAIRS, "down", e)))
    assert tr.state()["status"]["collapse"] == "provisional"
    assert set(diff) == {"collapse", "floor"}, diff
    assert diff["collapse"][0] < diff["collapse"][1]           # reported from a prefix; later on the whole curve
    assert diff["floor"][0] is None                            # an unconfirmed floor is never logged


@pytest.mark.parametrize("name", [*_curves(), "stairs"])
@pytest.mark.parametrize("detector", ["matched", "legacy"])
def test_reports_use_only_the_curve_so_far(name, detector):
    """Every report equals the detector on the curve up to the step it was made at (no look-ahead)."""
    e = {**E, "detector": detector}
    vals = STAIRS if name == "stairs" else _curves()[name]
    _, recs = _feed(vals, e)
    for r in recs:
        n = r["reported_at"] // 5 + 1
        pre = ev.curve_entry(_steps(n), vals[:n], "down", e)
        if r["event"] in KEYS:
            assert pre[f"{r['event']}_step"] == r["step"], r
            assert r["reported_at"] >= r["step"]


def test_confirmed_events_equal_offline_and_are_reported_when_persistence_confirms():
    vals = _curves()["recovers"]
    steps = _steps(len(vals))
    tr, recs = _feed(vals)
    off = ev.curve_entry(steps, vals, "down", E)
    conf = {r["event"]: r for r in recs if r["status"] == "confirmed"}
    assert set(conf) >= {"floor", "recovery"}
    for k in ("floor", "recovery"):
        assert conf[k]["step"] == off[f"{k}_step"]
    collapse = conf.get("collapse") or next(r for r in recs if r["event"] == "collapse")
    assert collapse["step"] == off["collapse_step"]
    # the recovery is confirmed exactly when its persistence window ends: persist - 1 points later
    assert conf["recovery"]["reported_at"] == steps[steps.index(off["recovery_step"]) + E["persist"] - 1]
    assert all(r["event"] != "revised" for r in recs)
    assert tr.state()["status"] == {k: "confirmed" for k in KEYS}


def test_floor_stays_provisional_without_recovery_and_revision_is_logged():
    tr, recs = _feed(_curves()["no_recovery"])
    assert [r["event"] for r in recs] == ["collapse"] and recs[0]["status"] == "provisional"
    st = tr.state()
    assert st["recovery_step"] is None and st["status"]["floor"] == "provisional"
    tr, recs = _feed(_curves()["second_dip"])
    events = [r["event"] for r in recs]
    assert "revised" in events and events.index("recovery") < events.index("revised")
    assert tr.state()["floor_step"] >= 40          # the final floor is the deeper second one
    tr, recs = _feed(_curves()["flat"])
    assert recs == [] and tr.state()["status"] == {k: None for k in KEYS}


def test_reports_depend_only_on_the_past():
    """Two curves equal up to step t: the monitor reports the same events up to t."""
    a = _curves()["recovers"]
    b = a.copy()
    b[30:] = 0.5                                  # a different future
    _, ra = _feed(a)
    _, rb = _feed(b)
    cut = 29 * 5
    assert [r for r in ra if r["reported_at"] <= cut] == [r for r in rb if r["reported_at"] <= cut]


def test_acquisition_is_causal_and_equals_offline():
    rng = np.random.default_rng(1)
    acc = np.clip(np.linspace(-0.2, 1.1, 40) + rng.normal(0, 0.15, 40), -1, 1)
    steps = _steps(40)
    tr = OnlineAcquisition("acc", E)
    recs = [r for s, v in zip(steps, acc) for r in tr.update(s, v)]
    off = ev.acquisition_step(steps, acc, E["acquisition_threshold"], E["persist"])
    assert off is not None and len(recs) == 1 and recs[0]["step"] == off
    assert recs[0]["reported_at"] == steps[steps.index(off) + E["persist"] - 1]


def test_schedules():
    from geoanatomy.monitor import log_then_every
    sch = log_then_every(100)
    assert [s for s in range(400) if sch(s)] == [0, 1, 2, 3, 5, 7, 11, 17, 25, 38, 57, 86, 100, 200, 300]
    probe = Probe(torch.zeros(2, 3, dtype=torch.long))
    assert [s for s in range(10) if Monitor(probe, every=3, log=None).due(s)] == [0, 3, 6, 9]
    assert [s for s in range(10) if Monitor(probe, every=[0, 4, 5], log=None).due(s)] == [0, 4, 5]
    with pytest.raises(ValueError):
        Monitor(probe, every=0)


# ------------------------------------------------------------------ the project's GPT
def _task_model():
    from geoanatomy.model import GPT, ModelConfig
    from geoanatomy.tasks import TaskData, make_task
    torch.manual_seed(0)
    data = TaskData(make_task("copy", "L1"), 0, n_heldout=128)
    return GPT(ModelConfig(n_layer=2, d_model=32, n_head=2)), data


def _train(model, data, mon, steps, lr=3e-3):
    from geoanatomy.model import answer_loss
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    mon.step(model, 0)
    for s in range(1, steps + 1):
        seq = torch.as_tensor(data.train_batch(s, 32))
        loss = answer_loss(model, seq, data.spec.n_answer)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mon.step(model, s, loss=loss.item())


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """The project's GPT trained 40 steps with a monitor measuring every 2 steps, every curve
    tracked: its output folder, model, data, monitor, precursor dict, log lines and table."""
    out = tmp_path_factory.mktemp("toy") / "run"
    model, data = _task_model()
    lines = []
    mon = Monitor(Probe.from_task(data, 64, chance=0.0), every=2, out_dir=out, run="toy", track="all",
                  log=lines.append)
    _train(model, data, mon, 40)
    pre = mon.close(model, 40)
    df = read_table(out / "metrics.csv")                               # the pipeline's reader
    return out, model, data, mon, pre, lines, df


def _constant_by_construction(df, key: str) -> bool:
    """Whether the monitor marked the rankme curve ``layer/position/variant`` constant by
    construction (layer ``embed`` at a position holding the same token in every probe row):
    its values are float noise, so its events depend on the CPU's rounding, not on training."""
    layer, pos, variant = key.split("/")
    rows = df[(df.measure == "rankme") & (df.layer == layer) & (df.position == pos) & (df.variant == variant)]
    return any(json.loads(st).get("constant_by_construction", False) for st in rows["settings"])


def _tracked_curves(df, mon) -> list[str]:
    """The monitor's tracked curves (``layer/position/variant``), every one: the two constant
    by construction (``embed/first``, the "=" token in every row; float noise) included, since
    they get no events anywhere, online or offline (``events.constant_entry``)."""
    keys = list(mon.events()["curves"])
    assert len(keys) == 4 * 2 * 2                                      # layers x positions x variants
    const = [k for k in keys if _constant_by_construction(df, k)]
    assert const == ["embed/first/uncentred", "embed/first/centred"]
    for k in const:
        st = mon.events()["curves"][k]
        # no event; the floor is the first point (none when every value is NaN: the centred
        # matrix of identical rows is zero)
        assert st["constant_by_construction"] and not st["collapsed"] and st["floor_step"] in (0, None), st
    return keys


def _offline(df, key):
    """The offline detector on a recorded curve, told whether it is constant by construction."""
    layer, pos, variant = key.split("/")
    return ev.curve_entry(*curve(df, "rankme", layer=layer, position=pos, variant=variant), "down", E,
                          constant=_constant_by_construction(df, key))


@pytest.mark.slow
def test_online_events_of_a_run_against_the_offline_detector(toy_run):
    """On the run's metrics.csv, ``events.curve_entry`` per curve against the monitor's online
    output: precursor.json's final events for every curve, and the events its log reported for
    every curve that ended confirmed (a recovery), by the comparison that
    ``test_logged_events_against_the_offline_detector`` shows to find differences. Curves
    constant by construction are left out (float noise: their events depend on the CPU)."""
    out, _, _, mon, _, _, df = toy_run
    final = json.loads((out / "precursor.json").read_text())["online"]["final"]
    confirmed = 0
    for key in _tracked_curves(df, mon):
        layer, pos, variant = key.split("/")
        off = _events(_offline(df, key))
        assert _differences(_events(final[key]), off) == {}, key
        if set(final[key]["status"].values()) == {"confirmed"}:
            confirmed += 1
            label = mon.trackers[(layer, pos, variant)].label
            assert _differences(_logged(mon.event_log, label), off) == {}, key
    assert confirmed >= 3          # at least the uncentred "first" curves of block0, block1, ln_final recover


def test_monitor_on_a_toy_loop_matches_the_pipeline(toy_run):
    from geoanatomy.precursor import rankme_entry
    from geoanatomy.stages.metrics import measure_checkpoint
    out, model, data, mon, pre, lines, df = toy_run
    assert (out / "trajectory.png").stat().st_size > 10_000
    assert json.loads((out / "precursor.json").read_text())["run"] == "toy"
    assert sorted(set(df["step"])) == list(range(0, 41, 2))
    # final online events == the offline detectors on the recorded curves, every curve (the two
    # constant by construction, embed/first, included: they get no events in either)
    final = mon.events()["curves"]
    for key in _tracked_curves(df, mon):
        st = final[key]
        off = _offline(df, key)
        assert {k: st[f"{k}_step"] for k in KEYS} == {k: off[f"{k}_step"] for k in KEYS}, key
    # the pipeline's events code on the monitor's table gives the same headline entry
    t_acq = ev.acquisition_step(*curve(df, "accuracy_norm"), E["acquisition_threshold"], E["persist"])
    assert pre["acquisition_step"] == t_acq
    e = {**E, "layer": "ln_final", "position": "first"}
    ent = rankme_entry(df, "uncentred", t_acq, e, 64, 1e-7)
    assert {k: pre["measures"]["rankme"][f"{k}_step"] for k in KEYS} == {k: ent[f"{k}_step"] for k in KEYS}
    # same numbers as the metrics stage on the same weights and sequences
    ref = measure_checkpoint(model, torch.as_tensor(data.eval_set(64)), data.spec.n_answer)
    last = df[df["step"] == 40]
    for r in ref:
        if r["measure"] in ("rankme", "mean_share"):
            got = last[(last.measure == r["measure"]) & (last.layer == r["layer"])
                       & (last.position == r["position"]) & (last.variant == (r["variant"] or ""))]["value"]
            assert got.iloc[0] == pytest.approx(r["value"], rel=1e-4, abs=1e-9, nan_ok=True), r
        if r["measure"] == "loss":
            assert last[last.measure == "loss"]["value"].iloc[0] == pytest.approx(r["value"], rel=1e-4)
        if r["measure"] == "accuracy" and r["position"] == "answer":
            assert last[last.measure == "accuracy"]["value"].iloc[0] == pytest.approx(r["value"])
    # one log line per reported event (plus the final summary lines)
    assert sum(" at step " in ln and "final:" not in ln for ln in lines) == len(mon.event_log)
    assert mon.overhead()["measurements"] == 21


def test_resume_continues_the_table(tmp_path):
    model, data = _task_model()
    probe = Probe.from_task(data, 32)
    a = Monitor(probe, every=2, out_dir=tmp_path, flush_every=1, log=None)
    _train(model, data, a, 6)
    b = Monitor(probe, every=2, out_dir=tmp_path, resume=True, log=None)
    b.step(model, 6)                                    # re-measured: the old step-6 rows are replaced
    b.step(model, 8)
    b.close()
    df = read_table(tmp_path / "metrics.csv")
    assert sorted(set(df["step"])) == [0, 2, 4, 6, 8]
    geo = df[df["measure"] != "train_loss"]
    assert len(geo) == 5 * len(geo[geo["step"] == 0])              # no step measured twice
    assert b.trackers and all(t.steps == [0, 2, 4, 6, 8] for t in b.trackers.values())


def test_an_unwritable_out_dir_never_stops_training_and_close_retries(tmp_path):
    """out_dir is a file: every flush fails. The loop runs to the end, the failure is a
    warning, rows stay in memory; once the folder is writable, close() writes them all."""
    model, data = _task_model()
    blocked = tmp_path / "out"
    blocked.write_text("a file, not a folder")
    mon = Monitor(Probe.from_task(data, 32), every=1, out_dir=blocked, flush_every=2, log=None)
    with pytest.warns(RuntimeWarning, match=r"could not write .*out/metrics.csv.*stay in memory"):
        _train(model, data, mon, 12)
    assert mon.measured == list(range(13)) and mon.problems
    blocked.unlink()
    mon.close()
    assert sorted(set(read_table(blocked / "metrics.csv")["step"])) == list(range(13))
    strict = Monitor(Probe.from_task(data, 32), every=1, out_dir=tmp_path / "f", flush_every=1, log=None, strict=True)
    (tmp_path / "f").write_text("x")
    with pytest.raises(OSError):
        strict.step(model, 0)


def test_a_failing_probe_forward_is_a_warning_not_an_exception():
    model, data = _task_model()

    def broken(model, ids, am):
        raise RuntimeError("probe forward exploded")
    mon = Monitor(Probe.from_task(data, 16), every=1, forward_fn=broken, log=None)
    with pytest.warns(RuntimeWarning, match="measurement at step 0 failed .RuntimeError: probe forward exploded"):
        assert mon.step(model, 0) is False
    with pytest.raises(RuntimeError, match="exploded"):
        Monitor(Probe.from_task(data, 16), every=1, forward_fn=broken, log=None, strict=True).step(model, 0)


def test_events_settings_are_checked_like_the_config():
    ids = torch.randint(0, 10, (8, 6))
    with pytest.raises(ValueError, match=r"'events.persist': '3' is not of type 'integer'"):
        Monitor(ids, events={"persist": "3"}, log=None)
    with pytest.raises(ValueError, match=r"'persits' was unexpected"):
        Monitor(ids, events={"persits": 3}, log=None)


def test_resume_refuses_another_run_or_another_probe(tmp_path):
    model, data = _task_model()
    a = Monitor(Probe.from_task(data, 20), every=2, out_dir=tmp_path, run="first", flush_every=1, log=None)
    _train(model, data, a, 4)
    a.close()
    with pytest.raises(ValueError, match=r"table of run\(s\) \['first'\], not of 'second'"):
        Monitor(Probe.from_task(data, 20), out_dir=tmp_path, run="second", resume=True, log=None)
    with pytest.raises(ValueError, match=r"was measured on another probe"):
        Monitor(Probe.from_task(data, 7), out_dir=tmp_path, run="first", resume=True, log=None)
    # a probe of the same size and other content (it used to be mixed into one curve)
    other = Probe(Probe.from_task(data, 20).input_ids.flip(0))
    with pytest.raises(ValueError, match=r"was measured on another probe \(sha256 [0-9a-f]{12}\.\.\., this probe's"):
        Monitor(other, out_dir=tmp_path, run="first", resume=True, log=None)


def test_a_fresh_monitor_never_writes_over_a_table_already_in_its_folder(tmp_path):
    """A second Monitor(run="second") in the folder of a finished run, or a Trainer resumed
    from a checkpoint with resume=False: refused, the table untouched (it used to be replaced:
    91 rows became 39, or steps 0..20 became 10..30)."""
    model, data = _task_model()
    a = Monitor(Probe.from_task(data, 20), every=2, out_dir=tmp_path, run="first", flush_every=1, log=None)
    _train(model, data, a, 6)
    a.close()
    before = (tmp_path / "metrics.csv").read_bytes()
    for run in ("second", "first"):
        with pytest.raises(ValueError, match=r"already holds \d+ rows of run\(s\) \['first'\] \(steps 0\.\.6\);"
                                             r" nothing was written over it.*resume=True"):
            Monitor(Probe.from_task(data, 20), every=2, out_dir=tmp_path, run=run, log=None)
    assert (tmp_path / "metrics.csv").read_bytes() == before


def test_a_changing_hidden_size_and_a_restarting_step_counter_are_named():
    from geoanatomy.model import GPT, ModelConfig
    model, data = _task_model()
    mon = Monitor(Probe.from_task(data, 16), every=1, log=None)
    mon.step(model, 0)
    mon.step(model, 1)
    wider = GPT(ModelConfig(n_layer=2, d_model=48, n_head=2))
    with pytest.warns(RuntimeWarning, match="hidden size changed from 32 to 48"):
        assert mon.step(wider, 2) is False
    with pytest.warns(RuntimeWarning, match="step counter went back"):
        assert mon.step(model, 0) is False                       # epoch 2 of a per-epoch counter
    assert mon.measured == [0, 1]


# ------------------------------------------------------------------ Hugging Face models
def _gpt2(vocab=64, layers=2, d=32):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=vocab, n_embd=d, n_layer=layers, n_head=4, n_positions=64,
                                  bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg)


@pytest.mark.slow
def test_hf_positions_and_layer_names():
    from geoanatomy.monitor import model_forward
    model = _gpt2().eval()
    B, T = 6, 9
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 64, (B, T), generator=g)
    lens = torch.tensor([9, 5, 7, 9, 3, 6])
    am = (torch.arange(T)[None] < lens[:, None]).long()               # right padding
    mask = am.bool().clone()
    mask[:, 0] = False
    probe = Probe(ids, attention_mask=am, positions={"last": "last", "p2": 2, "mask_mean": mask,
                                                     "index": lens - 2})
    mon = Monitor(probe, every=1, log=None)
    mon.step(model, 0)
    with torch.no_grad():
        logits, names, hs = model_forward(model, ids, am)
    assert names == ["embed", "block0", "block1", "ln_final"]
    assert torch.allclose(model.transformer.ln_f(hs[2]), hs[3], atol=1e-5)   # block1 is the pre-LN output
    from geoanatomy.measures.rankme import rankme
    df = mon.table()
    ar = torch.arange(B)
    want = {"last": hs[2][ar, lens - 1], "p2": hs[2][:, 2], "index": hs[2][ar, lens - 2],
            "mask_mean": (hs[2] * mask[..., None]).sum(1) / mask.sum(1)[:, None]}
    for pos, Z in want.items():
        got = df[(df.measure == "rankme") & (df.layer == "block1") & (df.position == pos) & (df.variant == "centred")]
        with pytest.warns(UserWarning, match="capped"):            # 6 rows < d = 32
            ref = rankme(Z, centred=True)
        assert got["value"].iloc[0] == pytest.approx(ref, rel=1e-6), pos
    # the pipeline's layer names, each with its TransformerLens hook (as open_run's tables carry)
    hooks = dict(zip(df["layer"], df["hook"]))
    assert hooks == {"embed": "blocks.0.hook_resid_pre", "block0": "blocks.0.hook_resid_post",
                     "block1": "blocks.1.hook_resid_post", "ln_final": "ln_final.hook_out", "output": ""}
    # the loss: mean next-token loss over the non-padding tokens, float64
    lp = torch.log_softmax(logits.double(), -1)
    nll = [-lp[b, t, ids[b, t + 1]] for b in range(B) for t in range(int(lens[b]) - 1)]
    assert df[df.measure == "loss"]["value"].iloc[0] == pytest.approx(float(torch.stack(nll).mean()), rel=1e-9)
    assert "accuracy" not in set(df.measure)
    with pytest.raises(ValueError):
        Probe(ids, positions=T)


@pytest.mark.slow
def test_an_unwritable_out_dir_does_not_abort_a_trainer_run(tmp_path):
    """A real transformers.Trainer with the monitor's out_dir a file (once: an OSError out of
    on_step_end that aborted train() at the first flush): train() reaches max_steps, the
    failure is a warning, and close() writes every measured step once the folder can be made."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="transformers.Trainer needs accelerate")
    model = _gpt2()
    g = torch.Generator().manual_seed(1)
    data = [{"input_ids": x, "labels": x} for x in torch.randint(1, 64, (48, 12), generator=g)]
    blocked = tmp_path / "mon"
    blocked.write_text("a file, not a folder")
    mon = Monitor(Probe(torch.randint(1, 64, (16, 12), generator=g)), every=1, out_dir=blocked, flush_every=2,
                  log=None)
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=10, per_device_train_batch_size=8,
                                          learning_rate=1e-3, save_strategy="no", report_to=[], use_cpu=True,
                                          disable_tqdm=True, dataloader_num_workers=0, seed=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[mon.trainer_callback()])
    with pytest.warns(RuntimeWarning, match=r"could not write .*mon/metrics.csv"):
        trainer.train()
    assert trainer.state.global_step == 10 and mon.problems
    blocked.unlink()
    mon.close()
    assert sorted(set(read_table(blocked / "metrics.csv")["step"])) == list(range(11))


@pytest.mark.slow
@pytest.mark.parametrize("attach", [True, False])
def test_trainer_callback_in_a_tiny_offline_trainer_run(tmp_path, attach):
    """A real transformers.Trainer: the table, the scalars in log_history (and TensorBoard's
    event files where tensorboard is installed), and train_loss credited to the measurement
    whose interval holds the step the Trainer logged it at (its logs come after on_step_end)."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="transformers.Trainer needs accelerate")
    try:
        import tensorboard  # noqa: F401
        report = ["tensorboard"] if attach else []
    except ImportError:
        report = []
    model = _gpt2()
    g = torch.Generator().manual_seed(1)
    data = [{"input_ids": x, "labels": x} for x in torch.randint(1, 64, (48, 12), generator=g)]
    probe = Probe(torch.randint(1, 64, (40, 12), generator=g))
    lines = []
    mon = Monitor(probe, every=4, out_dir=tmp_path / "mon", run="hf_tiny", log=lines.append)
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=10, per_device_train_batch_size=8,
                                          learning_rate=1e-3, logging_steps=2, save_strategy="no", report_to=report,
                                          use_cpu=True, disable_tqdm=True,
                                          dataloader_num_workers=0, seed=0)
    if attach:
        trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
        mon.attach(trainer)
    else:
        trainer = transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[mon.trainer_callback()])
    trainer.train()
    df = read_table(tmp_path / "mon" / "metrics.csv")
    assert sorted(set(df["step"])) == [0, 4, 8, 10]                   # the last step measured at close
    assert set(df["layer"]) >= {"embed", "block0", "block1", "ln_final"}
    # train_loss: measurement m averages the Trainer's losses logged at steps in (previous m, m]
    logged = {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}
    assert sorted(logged) == [2, 4, 6, 8, 10]
    tl = df[df.measure == "train_loss"].set_index("step")
    assert sorted(tl.index) == [4, 8, 10]
    for m, lo in ((4, 0), (8, 4), (10, 8)):
        want = [v for s, v in logged.items() if lo < s <= m]
        assert tl.loc[m, "value"] == pytest.approx(np.mean(want), rel=1e-6), m
        assert tl.loc[m, "n_samples"] == len(want)
    # the scalars in log_history, at each measured step, equal the table's headline rows
    hist = [h for h in trainer.state.log_history if "geoanatomy/rankme_centred" in h]
    assert [h["step"] for h in hist] == [0, 4, 8, 10]
    layer, pos = mon.headline()
    for h in hist:
        row = df[(df.measure == "rankme") & (df.layer == layer) & (df.position == pos) & (df.variant == "centred")
                 & (df.step == h["step"])]
        assert h["geoanatomy/rankme_centred"] == pytest.approx(float(row["value"].iloc[0]), rel=1e-6)
        assert {"geoanatomy/rankme_uncentred", "geoanatomy/mean_share", "geoanatomy/probe_loss"} <= set(h)
    if report:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        runs = [p.parent for p in (tmp_path / "out").rglob("events.out.tfevents.*")]   # the Trainer's default log dir
        tags, steps = set(), []
        for r in set(runs):
            acc = EventAccumulator(str(r))
            acc.Reload()
            tags |= set(acc.Tags()["scalars"])
            if "train/geoanatomy/rankme_centred" in acc.Tags()["scalars"]:
                steps += [e.step for e in acc.Scalars("train/geoanatomy/rankme_centred")]
        assert "train/geoanatomy/rankme_centred" in tags and "train/geoanatomy/mean_share" in tags
        assert sorted(steps) == [0, 4, 8, 10]
    pre = json.loads((tmp_path / "mon" / "precursor.json").read_text())
    assert pre["measures"]["rankme"]["layer"] == "ln_final" and pre["behaviour"]["kind"] == "loss"
    assert (tmp_path / "mon" / "trajectory.png").is_file()
    assert model.training                                          # the monitor put the model back


def test_the_trainer_console_stays_the_trainers_and_step_zero_is_saved(tmp_path, capsys, caplog):
    """attach(trainer): the measurement dicts reach log_history but not the Trainer's console
    (its PrinterCallback prints its own loss logs as before); they go to the geoanatomy.monitor
    logger at DEBUG. save_step_zero=True: OUTPUT_DIR/checkpoint-0 holds the initial weights
    and config, as the scanner reads a checkpoint folder."""
    import logging
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="transformers.Trainer needs accelerate")
    from safetensors.torch import load_file
    model = _gpt2()
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(3)
    data = [{"input_ids": x, "labels": x} for x in torch.randint(1, 64, (32, 12), generator=g)]
    mon = Monitor(Probe(torch.randint(1, 64, (16, 12), generator=g)), every=4, run="quiet", log=None, figure=False)
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=6, per_device_train_batch_size=8,
                                          learning_rate=1e-3, logging_steps=2, save_strategy="no", report_to=[],
                                          use_cpu=True, disable_tqdm=True, dataloader_num_workers=0, seed=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
    mon.attach(trainer, save_step_zero=True)
    with caplog.at_level(logging.DEBUG, logger="geoanatomy.monitor"):
        trainer.train()
    out = capsys.readouterr().out
    assert "'loss'" in out and "geoanatomy/" not in out                  # the Trainer's own logs only
    assert any("geoanatomy/rankme_centred" in h for h in trainer.state.log_history)
    debug = [r.getMessage() for r in caplog.records if r.name == "geoanatomy.monitor" and r.levelno == logging.DEBUG]
    assert any("geoanatomy/rankme_centred" in m for m in debug)
    ck = tmp_path / "out" / "checkpoint-0"
    assert (ck / "config.json").is_file()
    saved = load_file(str(ck / "model.safetensors"))
    assert all(torch.equal(saved[k], init[k]) for k in saved if k in init)
    assert not torch.equal(model.state_dict()["transformer.h.0.attn.c_attn.weight"],
                           init["transformer.h.0.attn.c_attn.weight"])    # trained past it


def test_monitor_logs_through_logging_and_overhead_counts_close(caplog, tmp_path):
    """Log lines reach the ``geoanatomy.monitor`` logger; overhead() includes close() (report,
    files, figure); a curve that never fell gets no floor or gap in its closing line."""
    import logging
    model = _gpt2()
    g = torch.Generator().manual_seed(2)
    mon = Monitor(Probe(torch.randint(1, 64, (12, 8), generator=g)), every=1, out_dir=tmp_path / "m", run="r")
    with caplog.at_level(logging.INFO, logger="geoanatomy.monitor"):
        for s in range(3):
            mon.step(model, s)
        before = mon.overhead()["wall_seconds"]
        mon.close(model, 2)                     # step 2 was measured: close() only reports and writes
    oh = mon.overhead()
    assert oh["close_wall_seconds"] > 0
    assert oh["wall_seconds"] == pytest.approx(before + oh["close_wall_seconds"], abs=2e-4)
    msgs = [r.getMessage() for r in caplog.records if r.name == "geoanatomy.monitor"]
    finals = [m for m in msgs if "final:" in m]
    assert finals and all("no collapse" in m and "floor" not in m for m in finals)   # 4 points: nothing fell


def test_final_line_names_only_events_that_happened():
    assert "floor" not in Monitor.final_line("x", {"collapsed": False, "collapse_step": None, "floor_step": 25,
                                                   "recovery_step": None, "status": {}})
    line = Monitor.final_line("x", {"collapsed": True, "collapse_step": 10, "floor_step": 25, "recovery_step": None,
                                    "status": {"collapse": "provisional", "floor": "provisional"}})
    assert "collapse at 10" in line and "floor at 25" in line and "no recovery" in line


def test_a_probe_of_one_token_rows_is_refused_by_name():
    with pytest.raises(ValueError, match="rows of 1 token: nothing to score"):
        Probe(torch.ones(4, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="no probe row has a labelled token"):
        Probe(torch.ones(4, 3, dtype=torch.long), labels=torch.full((4, 3), -100))
    # some rows: fine
    Probe(torch.ones(4, 3, dtype=torch.long), attention_mask=torch.tensor([[1, 1, 1]] * 3 + [[1, 0, 0]]))


def test_non_finite_weights_mark_the_run_diverged_and_no_final_value_is_reported(tmp_path):
    """A model whose weights become NaN mid-run (a diverged run): a warning, the report says
    diverged at that step and gives no final RankMe (it used to report the last finite value,
    diverged unset)."""
    model, data = _task_model()
    mon = Monitor(Probe.from_task(data, 20), every=1, out_dir=tmp_path, flush_every=1, log=None)
    mon.step(model, 0)
    mon.step(model, 1)
    with torch.no_grad():
        next(model.parameters()).fill_(float("nan"))
    with pytest.warns(RuntimeWarning, match=r"diverged at step 2: non-finite weights"):
        mon.step(model, 2)
    mon.step(model, 3)
    pre = mon.close()
    assert pre["diverged"] is True and pre["diverged_step"] == 2
    assert pre["measures"]["rankme"]["final"] is None
    assert mon.scalars()["geoanatomy/diverged_step"] == 2
    healthy = Monitor(Probe.from_task(data, 20), every=1, log=None)
    m2, _ = _task_model()
    healthy.step(m2, 0)
    assert healthy.report()["diverged"] is False


def test_one_difficulty_rule_for_monitor_and_scan_and_a_warning_when_curves_start_late(tmp_path):
    """The same table read as a monitored run and as a scanned folder gets one class (they used
    the pipeline's absolute easy_max_step and the Pythia branch's budget fraction, so a run was
    'hard' to one and 'easy' to the other); curves that start after step 0 (HF Trainer
    checkpoints save none at 0) warn that an earlier collapse cannot be seen."""
    from geoanatomy.precursor.record import report_record
    model, data = _task_model()
    mon = Monitor(Probe.from_task(data, 20, chance=0.0), every=2, log=None)
    _train(model, data, mon, 40)
    df = mon.table()
    acc = df["measure"].isin(["accuracy", "accuracy_norm"]) & (df["step"] >= 20)
    df.loc[acc, "value"] = 1.0                       # acquired at step 20 of 40
    a = report_record(df, run="r", kind="monitor", n_params=1, cfg_events=None)
    b = report_record(df, run="r", kind="scan", n_params=1, cfg_events=None)
    assert a["acquisition_step"] == 20 and a["difficulty"] == b["difficulty"] == "hard"
    assert a["difficulty_rule"] == b["difficulty_rule"]
    assert a["warnings"] == []
    late = Monitor(Probe.from_task(data, 20), every=1, log=None)
    for s in (5, 6, 7, 8):
        late.step(model, s)
    with pytest.warns(RuntimeWarning, match=r"curves start at step 5, not 0.*'no collapse' means none after it"):
        pre = late.close()
    assert pre["warnings"]


def test_a_scan_figure_names_no_curve_it_does_not_draw(monkeypatch, tmp_path):
    """A benchmark scan scored one way has no accuracy_mean rows: its figure once listed
    'accuracy (mean scoring)' in the legend anyway. Every legend entry is a drawn line."""
    from geoanatomy import plots as pplot
    from geoanatomy.precursor.record import report_record
    model, data = _task_model()
    mon = Monitor(Probe.from_task(data, 20, chance=0.1), every=2, log=None)
    _train(model, data, mon, 8)
    df = mon.table()
    pre = {**report_record(df, run="r", kind="scan", n_params=1, cfg_events=None), "scoring": "sum"}
    figs = []
    monkeypatch.setattr(pplot, "save_png", lambda fig, out: figs.append(fig))
    pplot.plot_pythia_run(df, pre, tmp_path / "t.png")
    labels = [t.get_text() for t in figs[0].axes[0].get_legend().get_texts()]
    assert not any("mean scoring" in x for x in labels), labels
    assert any(x.startswith("accuracy (sum") for x in labels)


def test_monitor_offers_the_registry_signals_and_they_equal_the_metrics_stage(tmp_path):
    """Every signal a monitor can compute (by registry name) is in its table, with the values the
    metrics stage's formulas give on the same probe rows; an unknown name is refused."""
    from geoanatomy.measures import signals as sig
    from geoanatomy.monitor import monitor_signals
    model, data = _task_model()
    probe = Probe.from_task(data, 32)
    names = [n for n in monitor_signals(probe) if not n.startswith(("rankme", "mean_share"))]
    mon = Monitor(probe, every=1, out_dir=tmp_path, log=None, signals=names)
    _train(model, data, mon, 8)
    mon.close()
    df = read_table(tmp_path / "metrics.csv")
    for m in ("ildr", "head_erank", "stable_rank", "update_gap", "loss_cov_heat", "loss_cov_pr"):
        assert (df["measure"] == m).any(), m
    last = df[df["step"] == df["step"].max()]
    val = lambda m, layer: float(last[(last["measure"] == m) & (last["layer"] == layer)]["value"].iloc[0])  # noqa
    assert val("stable_rank", "all_blocks") == pytest.approx(
        np.mean([r["value"] for r in sig.stable_rank_rows(model) if r["layer"] != "all_blocks"]), rel=1e-6)
    assert np.isfinite(val("update_gap", "all_params")) and np.isfinite(val("loss_cov_heat", "output"))
    with pytest.raises(ValueError, match=r"\['commutator'\] cannot be computed by it \(commutator reads gradients"):
        Monitor(probe, signals=["commutator"], log=None)
    with pytest.raises(ValueError, match="unknown signal"):
        Monitor(probe, signals=["no_such_signal"], log=None)


def test_figure_false_writes_the_report_without_the_png(tmp_path):
    model, data = _task_model()
    mon = Monitor(Probe.from_task(data, 32), every=2, out_dir=tmp_path, log=None, figure=False)
    _train(model, data, mon, 4)
    mon.close()
    assert (tmp_path / "precursor.json").exists() and not (tmp_path / "trajectory.png").exists()
    assert set(mon.close_parts) == {"report", "precursor_json"}


def test_a_training_probe_logs_the_fit_and_the_delay_to_acquisition(tmp_path):
    """A hand-made trajectory: the training batch is answered right from step 30 on, the held-out
    batch from step 70 on (forward_fn decides by the model's step counter). The monitor logs the
    training fit at 30, acquisition at 70 and says it came 40 steps after the fit."""
    import torch
    from geoanatomy.monitor import Monitor, Probe

    V, T, B = 8, 4, 16
    g = torch.Generator().manual_seed(0)

    def batch():
        ids = torch.randint(0, V, (B, T), generator=g)
        labels = torch.full((B, T), -100)
        labels[:, -1] = ids[:, -1]
        return ids, labels

    held, held_lab = batch()
    train, train_lab = batch()

    class Clock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))
            self.step = 0

    def forward_fn(model, ids, am):
        right = model.step >= (30 if ids is train or torch.equal(ids, train) else 70)
        logits = torch.zeros(ids.shape[0], T, V)
        target = ids[:, -1] if right else (ids[:, -1] + 1) % V
        logits[torch.arange(ids.shape[0]), -2, target] = 5.0
        hidden = [torch.randn(ids.shape[0], T, 6, generator=torch.Generator().manual_seed(model.step))]
        return logits, ["embed"], hidden

    mon = Monitor(Probe(held, labels=held_lab, chance=1 / V), every=10, out_dir=tmp_path / "m",
                  forward_fn=forward_fn, train_probe=Probe(train, labels=train_lab, chance=1 / V), figure=False)
    model = Clock()
    for step in range(0, 121, 10):
        model.step = step
        mon.step(model, step)
    ev = mon.events()
    assert (ev["train_acquisition_step"], ev["acquisition_step"]) == (30, 70)
    fit = [r for r in ev["log"] if r["event"] == "training set fitted"]
    acq = [r for r in ev["log"] if r["event"] == "acquisition"]
    assert [r["step"] for r in fit] == [30] and [r["step"] for r in acq] == [70]
    assert "40 steps after the training set was fitted (step 30)" in acq[0]["detail"]
    rows = [r for r in mon.rows if r["measure"] == "train_accuracy"]
    assert [r["value"] for r in rows if r["step"] in (20, 30)] == [0.0, 1.0] and rows[0]["variant"] == "train"
    # the closing record says it too: the training-fit event and grokking's delay (the scanner's
    # --train-probe writes the same rows and gets the same fields)
    pre = mon.close(model, 120)
    assert (pre["train_acquisition_step"], pre["acquisition_step"], pre["generalisation_delay"]) == (30, 70, 40)
    with pytest.raises(ValueError, match="train_probe=...\\) needs labels"):
        Monitor(Probe(held, labels=held_lab), train_probe=Probe(train), out_dir=tmp_path / "x")


def test_the_monitors_figure_draws_its_loss_curves_from_its_table(toy_run):
    """The loss panel draws the loss variants the monitor writes (probe, batch_average): what the
    figure draws equals the table (it drew the pipeline's train/heldout variants only, and was
    empty here)."""
    from geoanatomy.plots import draw_run
    from geoanatomy.table import curve
    out, model, data, mon, pre, lines, df = toy_run
    fig = draw_run(df, pre)
    axl = fig.axes[1]
    drawn = {ln.get_gid(): ln for ln in axl.get_lines() if str(ln.get_gid()).startswith("loss:")}
    assert set(drawn) == {"loss:probe", "loss:batch_average"}
    for gid, measure, variant in (("loss:probe", "loss", "probe"), ("loss:batch_average", "train_loss",
                                                                    "batch_average")):
        s, v = curve(df, measure, variant=variant)
        assert len(s) > 5
        np.testing.assert_allclose(drawn[gid].get_xdata(), s + 1.0)
        np.testing.assert_allclose(drawn[gid].get_ydata(), v)
