"""The ``transformers.Trainer`` callback that runs a ``Monitor``.

What it does at each Trainer event (main process only):

* ``on_train_begin``: measures step ``state.global_step`` (0, or the step resumed from);
* ``on_step_end``: measures when the step is due; then logs the monitor's scalars
  (``Monitor.scalars``: headline RankMe of both variants, mean share, probe loss/accuracy,
  the step of each headline event that has happened) and, for each new event, its log line
  as text under ``geoanatomy/event``;
* ``on_log``: the Trainer's training loss ``logs["loss"]`` (the mean over the steps since
  its previous log), credited to the measurement whose interval holds the step it was
  logged at, so ``train_loss`` is not shifted by one logging interval (the Trainer logs
  after the step callbacks run);
* ``on_train_end``: ``Monitor.close`` (the final step measured if it was not, files written).

Where the scalars go: built with the Trainer (``Monitor.attach(trainer)`` or
``trainer_callback(trainer)``) they go through ``trainer.log``, so they reach
``state.log_history`` and every ``report_to`` integration (TensorBoard, W&B, MLflow) like
the Trainer's own metrics, but not the console: the Trainer's printing callbacks
(``ProgressCallback``, ``PrinterCallback``) are left out of that call, so a measurement's
dict of scalars is not printed beside the training loss; it goes to the
``geoanatomy.monitor`` logger at DEBUG (the events' log lines stay at INFO). Built without it
(``Trainer(callbacks=[mon.trainer_callback()])``) they are appended to ``state.log_history``
only: a callback has no handle on the other reporters (they read the Trainer's ``logs``
dict, which is copied before callbacks see it).

``step_zero_callback(trainer)``: the Trainer saves no checkpoint before the first update, so
a scan of its ``checkpoint-N`` folders (``geoanatomy scan``) starts after the early collapse
of RankMe. This callback writes ``OUTPUT_DIR/checkpoint-0`` (``trainer.save_model``: weights,
config and the tokenizer the Trainer holds) at the start of a run that starts at step 0
(``Monitor.attach(trainer, save_step_zero=True)`` adds it).
"""
from __future__ import annotations

import logging

QUIET = ("ProgressCallback", "PrinterCallback")     # the Trainer's callbacks that print every log dict


def trainer_callback(monitor, trainer=None):
    # ``monitor``: a geoanatomy.monitor.Monitor (not imported: the Monitor builds its callback)
    """A ``transformers.TrainerCallback`` running ``monitor`` (module doc)."""
    from transformers import TrainerCallback

    class GeoanatomyMonitorCallback(TrainerCallback):
        def __init__(self, mon, tr):
            self.monitor, self.trainer = mon, tr
            self._events_logged = 0

        def _publish(self, state, control=None):
            mon = self.monitor
            logs = dict(mon.scalars())
            new = mon.event_log[self._events_logged:]
            self._events_logged = len(mon.event_log)
            if new:
                logs["geoanatomy/event"] = "\n".join(mon.format(rec) for rec in new)
            if not logs:
                return
            logging.getLogger("geoanatomy.monitor").debug("step %s: %s", state.global_step, logs)
            if self.trainer is not None:
                # trainer.log runs the on_log events, which clear control.should_log: keep the
                # Trainer's own decision to log this step (its loss log would be lost otherwise);
                # the printing callbacks are left out of it (module doc)
                keep = None if control is None else control.should_log
                handler = self.trainer.callback_handler
                every = handler.callbacks
                handler.callbacks = [cb for cb in every if type(cb).__name__ not in QUIET]
                try:
                    self.trainer.log(logs)
                finally:
                    handler.callbacks = every
                if control is not None:
                    control.should_log = keep
                    self.trainer.control.should_log = keep
            else:
                state.log_history.append({**logs, "step": state.global_step})

        def _measure(self, model, state, control):
            if self.monitor.step(model, state.global_step):
                self._publish(state, control)

        def on_train_begin(self, args, state, control, model=None, **kw):
            if state.is_world_process_zero and model is not None:
                self._measure(model, state, control)

        def on_step_end(self, args, state, control, model=None, **kw):
            if state.is_world_process_zero and model is not None:
                self._measure(model, state, control)

        def on_log(self, args, state, control, logs=None, **kw):
            if state.is_world_process_zero and logs and "loss" in logs:
                self.monitor.add_train_loss(logs["loss"], state.global_step)

        def on_train_end(self, args, state, control, model=None, **kw):
            if state.is_world_process_zero:
                n = len(self.monitor.measured)
                self.monitor.close(model, state.global_step)
                if len(self.monitor.measured) > n:
                    self._publish(state, control)

    return GeoanatomyMonitorCallback(monitor, trainer)


def step_zero_callback(trainer):
    """A ``transformers.TrainerCallback`` that saves ``OUTPUT_DIR/checkpoint-0`` before the first
    update of a run that starts at step 0 (module doc); a resumed run is left as it is."""
    from pathlib import Path

    from transformers import TrainerCallback

    class SaveStepZero(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            out = Path(args.output_dir) / "checkpoint-0"
            if state.global_step == 0 and state.is_world_process_zero and not out.exists():
                trainer.save_model(str(out))

    return SaveStepZero()
