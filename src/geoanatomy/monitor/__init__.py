"""A precursor monitor for your own training loop (and the Hugging Face ``Trainer``).

Every ``every`` steps the monitor runs a fixed probe batch you supply through the model (in
eval mode, without gradients, then puts the model back as it was), and records, in the long
table format of the pipeline's ``metrics.csv`` (``geoanatomy.table``):

* ``rankme`` per layer and probe position, variants ``uncentred`` (RankMe as defined) and
  ``centred``, and the ``mean_share`` of the same matrix (``measures.rankme``);
* ``loss`` of the probe batch (mean cross-entropy over the labelled next tokens, float64;
  ``variant`` "probe"); with labels also ``accuracy`` (every labelled token of a row right)
  and ``token_accuracy``, with a ``chance`` level also ``accuracy_norm``;
* ``train_loss`` (variant ``batch_average``) when you pass your batch losses.

It detects collapse, floor and recovery of RankMe ONLINE with the pipeline's detectors
(``events.curve_entry`` with the ``events:`` thresholds): at step t the detector sees the
curve measured up to t only (no look-ahead) and an event is reported once its persistence
window (``persist`` measurements) has been seen:

collapse (onset)  reported as soon as the curve so far has changed by ``collapse_drop`` and
                  the onset is held for ``persist`` measurements. PROVISIONAL: onset and
                  floor are measured against the lowest value so far, so they move if the
                  curve keeps falling.
floor             PROVISIONAL until a recovery confirms it: logged only then ("floor at f,
                  confirmed by the recovery at r"). A run that never recovers ends with a
                  provisional floor (``events()`` and precursor.json say so).
recovery          the curve is back by ``return_frac`` of its drop for ``persist``
                  measurements; it confirms the floor and the collapse. From then on the
                  events equal the offline detector's on the full curve, unless the curve
                  later falls below the confirmed floor: then a "revised" line is logged
                  and the events are provisional again.
acquisition       (probe with labels and chance) ``events.acquisition_step``: a fixed
                  threshold, so it is causal; reported once, with the precursor verdict
                  of the headline floor at that moment.

At every step the monitor's events are ``events.curve_entry`` of the curve so far, so its
final events are exactly the offline pipeline's on the recorded curve (tested). One log line
per event; ``close()`` writes ``metrics.csv``, ``precursor.json`` (``precursor.record.report_record``: the
pipeline's ``rankme_entry`` for both variants, plus an ``online`` block with the event log)
and ``trajectory.png`` (the pipeline's figure) into ``out_dir``.

Models: (a) the project's GPT (``model(x, return_hidden=True)``), (b) any Hugging Face causal
LM (``output_hidden_states=True``, layer names of ``geoanatomy.hf``), (c) anything else through
``forward_fn(model, input_ids, attention_mask) -> (logits, layer names, hidden states)``.

Which position's hidden state (``Probe(positions=...)``): ``"last"`` (default: the last token
of each row, the last 1 of ``attention_mask`` when given), an int index (same for every row,
negative counts from the end), a LongTensor (B,) of per-row indices, a BoolTensor (B, T) mask
(the mean over the masked positions of each row), or a dict {name: one of these} for several.

Overhead (benchmarks/bench_monitor.py, CPU, one thread, default ``every`` and a probe of
``DEFAULT_PROBE_SIZE`` rows): see docs/monitor.md.

    probe = Probe(input_ids, labels=labels)             # a fixed batch, never trained on
    mon = Monitor(probe, out_dir="runs/mine")           # every=DEFAULT_EVERY
    mon.step(model, 0)                                  # before the first update
    for step in range(1, n_steps + 1):
        ...; opt.step()
        mon.step(model, step, loss=loss.item())         # measures when step % every == 0
    pre = mon.close(model, n_steps)                     # metrics.csv, precursor.json, trajectory.png

    trainer = Trainer(..., callbacks=[mon.trainer_callback()])
"""
from .callback import step_zero_callback, trainer_callback
from .monitor import DEFAULT_EVERY, LogThenEvery, Monitor, log_then_every
from .online import PROVISIONAL_NOTE, OnlineAcquisition, OnlineCollapse
from .probe import DEFAULT_PROBE_SIZE, Probe, model_forward
from .rows import monitor_signals

__all__ = ["DEFAULT_EVERY", "DEFAULT_PROBE_SIZE", "PROVISIONAL_NOTE", "LogThenEvery", "Monitor", "OnlineAcquisition",
           "OnlineCollapse", "monitor_signals", "Probe", "log_then_every", "model_forward", "step_zero_callback",
           "trainer_callback"]
