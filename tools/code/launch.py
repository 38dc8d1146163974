"""What the runner starts (`python -I -S launch.py`): a stub, because a script is compiled
on every start and never byte-code cached, while confine.py, imported, is."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import confine

confine.main()
