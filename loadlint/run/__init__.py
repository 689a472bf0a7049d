"""Runs over many files: the worker pool, per-file time bounds, progress on a terminal."""
