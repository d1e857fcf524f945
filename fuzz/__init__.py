"""The differential fuzzer of sackli: mutants of small bags are read through
every read path of sackli, with every option combination, in child
processes, and compared with an independent pure-Python reader of the
format (fuzz/oracle.py). See docs/fuzzing.md."""

import os as _os
import sys as _sys

# The source tree's sackli/ has no compiled engine: when the repository root
# is on sys.path (`python -m fuzz` from the root, PYTHONPATH=.), it goes to
# the end, so that `import sackli` finds the installed package.
ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
for _entry in list(_sys.path):
    if _os.path.abspath(_entry or ".") == ROOT:
        _sys.path.remove(_entry)
        _sys.path.append(_entry)
