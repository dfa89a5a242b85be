"""Error types that name what is wrong (torch-free, importable from anywhere)."""


class ConfigError(ValueError):
    """Invalid configuration; the message names the field and the allowed values."""


class CheckpointError(RuntimeError):
    """A checkpoint file or run record is unreadable or not this run's; the message names
    the file and the fix."""
