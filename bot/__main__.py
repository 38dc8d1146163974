"""`python -m bot` does the same as `sidekick run`."""

import sys

from bot.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
