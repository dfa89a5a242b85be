"""The package version (one home: ``geoanatomy.__version__`` re-exports it)."""
__version__ = "0.1.0"
