"""The test suite. Importing it (pytest does, before tests/conftest.py) keeps bytecode on.

The suite starts hundreds of Python processes (the xdist workers, every `sidekick` and
`python -m bot` a test runs) that each import the same code. With bytecode writing switched
off (PYTHONDONTWRITEBYTECODE, as some shells and containers set it) every one of them
compiled the project again, and each worker rewrote every test module's asserts again: a
large share of each start's CPU and of the suite's time. A test run writes its bytecode
anyway (to __pycache__, which git ignores), and the processes it starts inherit that.
"""

import os
import sys

if sys.dont_write_bytecode:
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
