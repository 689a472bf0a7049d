"""``loadlint verify``: measure a real DataLoader, current vs suggested.

Opt-in and separate from the analysis core: nothing outside this package
imports it, and it imports torch only inside the subprocess that runs the
user's script (:mod:`loadlint.verify.child`).
"""
