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
the Trainer's own metrics. Built without it (``Trainer(callbacks=[mon.trainer_callback()])``)
they are appended to ``state.log_history`` only: a callback has no handle on the other
reporters (they read the Trainer's ``logs`` dict, which is copied before callbacks see it).
"""
from __future__ import annotations


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
            if self.trainer is not None:
                # trainer.log runs the on_log events, which clear control.should_log: keep the
                # Trainer's own decision to log this step (its loss log would be lost otherwise)
                keep = None if control is None else control.should_log
                self.trainer.log(logs)
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
