"""Property-based safety net of the public API (hypothesis; profiles in tests/conftest.py)."""
