"""Jupyter helpers (placeholder; filled below)."""
