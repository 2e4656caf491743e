"""``python -m meanfield``: the same as the ``meanfield`` command."""
import sys

from meanfield.cli import main

sys.exit(main())
