"""``python -m gather_scatter.cli``: the ``gather-scatter`` command line."""

import sys

from . import main

sys.exit(main())
