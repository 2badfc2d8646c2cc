"""Attacks on privacy: linkage (chapter 1); membership inference joins here later."""
from .linkage import combined_key, link_records, uniqueness_rate

__all__ = ["combined_key", "link_records", "uniqueness_rate"]
