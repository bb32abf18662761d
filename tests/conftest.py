"""Shared fixtures. Matplotlib runs headless in tests."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")
