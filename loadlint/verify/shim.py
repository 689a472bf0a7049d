"""The child process's helpers under their historical names.

The child process lives in :mod:`loadlint.verify.child`; this module keeps
the import surface that code written against the single-file shim used.
"""

from loadlint.verify.child.bench import rotate as _rotate
from loadlint.verify.child.bench import run_rate
from loadlint.verify.child.capture import config_to_kwargs
from loadlint.verify.child.identity import compare_iterable, sample_digests
from loadlint.verify.child.main import main

__all__ = ["_rotate", "compare_iterable", "config_to_kwargs", "main", "run_rate", "sample_digests"]
