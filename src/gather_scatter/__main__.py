"""``python -m gather_scatter``: the ``gather-scatter`` command line."""

import sys

from .cli import main

sys.exit(main())
