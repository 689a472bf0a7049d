"""Entry point of a verify subprocess: ``python _boot.py SPEC.json``.

Started by path rather than with ``-m`` so that the child lives under its
package name, not as ``__main__`` (which the user's script replaces), and
torchrun can start it the same way.
"""

import os
import sys

_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Python put this file's directory first; leaving it would let the modules
# next to it (ddp, report, ...) shadow the user's own top-level modules.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)
    sys.path.insert(0, os.getcwd())
if _root not in sys.path:
    sys.path.append(_root)

from loadlint.verify.child.main import main  # noqa: E402

main(sys.argv[1])
