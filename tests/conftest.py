"""Shared by every test directory."""

# Scripts that generate reference data with PyTorch run by hand in a throwaway venv (they import torch), never
# as tests; --doctest-modules would import them.
collect_ignore_glob = ["**/make_*.py", "make_*.py"]
