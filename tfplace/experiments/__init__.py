"""Experiments: library code behind the scripts in scripts/."""
