import os
import sys

# ``python -m`` puts the current folder first on sys.path: in a checkout
# being linted, a click.py or difflib.py there would shadow the real module
# and run.  Static analysis never runs the user's code.  (-P, safe_path,
# exists from Python 3.11 on.)
if not getattr(sys.flags, "safe_path", False) and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from loadlint.frontends.cli import console  # noqa: E402

console()
