"""Entry point of the monitored process: ``python _boot.py SPEC.json``.

Started by path, as verify's child is, so that the user's script becomes
``__main__`` and the modules next to this file cannot shadow the user's.
"""

import os
import sys

_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)
    sys.path.insert(0, os.getcwd())
if _root not in sys.path:
    sys.path.append(_root)

from loadlint.monitor.child import main  # noqa: E402

main(sys.argv[1])
