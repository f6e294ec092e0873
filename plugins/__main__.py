"""``python -m rnnx.plugins [cmake configure args...]``: builds the TensorRT plugin library, prints its path."""

import sys

from . import main

sys.exit(main())
