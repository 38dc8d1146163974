"""`python -m bot` does the same as `sidekick run`."""

import sys

from bot.cli import main

if __name__ == "__main__":
    # `python -m bot` alone means `run`; `python -m bot chat` etc. pass through.
    sys.exit(main(sys.argv[1:] or ["run"]))
