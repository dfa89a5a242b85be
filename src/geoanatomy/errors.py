"""Error types that name what is wrong (torch-free, importable from anywhere)."""


class ConfigError(ValueError):
    """Invalid configuration; the message names the field and the allowed values."""
