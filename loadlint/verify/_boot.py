"""Entry point of a verify or monitor subprocess:
``python _boot.py SPEC.json [MODULE]``, MODULE's ``main(SPEC.json)``
(default verify's child).

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

import importlib  # noqa: E402

# Only loadlint's own children: the argument never names another module.
_entry = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] == "loadlint.monitor.child" else "loadlint.verify.child.main"
importlib.import_module(_entry).main(sys.argv[1])
