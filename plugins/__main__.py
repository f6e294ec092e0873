"""``python -m rnnx.plugins [--kind dlopen|load_library] [cmake configure args...]``: builds the TensorRT plugin
libraries, prints the path of the one of that kind (default dlopen, for polygraphy --plugins)."""

import sys

from . import main

sys.exit(main())
