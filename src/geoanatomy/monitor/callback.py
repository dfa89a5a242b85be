"""The ``transformers.Trainer`` callback that runs a ``Monitor``."""
from __future__ import annotations


def trainer_callback(monitor):
    # ``monitor``: a geoanatomy.monitor.Monitor (not imported: the Monitor builds its callback)
    """A ``transformers.TrainerCallback``: measures at the start of training (step
    ``state.global_step``), after every optimizer step when due, collects the logged training
    loss, and closes the monitor (writes its files) at the end. Only the main process measures."""
    from transformers import TrainerCallback

    class GeoanatomyMonitorCallback(TrainerCallback):
        def __init__(self, mon):
            self.monitor = mon

        def on_train_begin(self, args, state, control, model=None, **kw):
            if state.is_world_process_zero and model is not None:
                self.monitor.step(model, state.global_step)

        def on_step_end(self, args, state, control, model=None, **kw):
            if state.is_world_process_zero and model is not None:
                self.monitor.step(model, state.global_step)

        def on_log(self, args, state, control, logs=None, **kw):
            if state.is_world_process_zero and logs and "loss" in logs:
                self.monitor.add_train_loss(logs["loss"])

        def on_train_end(self, args, state, control, model=None, **kw):
            if state.is_world_process_zero:
                self.monitor.close(model, state.global_step)

    return GeoanatomyMonitorCallback(monitor)
