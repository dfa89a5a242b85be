"""Geometric measures of representations and of the loss landscape."""
from .rankme import effective_rank, rankme

__all__ = ["rankme", "effective_rank"]
