"""``python -m rnnx.plugins [--kind dlopen|load_library] [--major N] [cmake configure args...]``: builds the TensorRT
plugin libraries for TensorRT N (default: the installed one's major), prints the path of the one of that kind
(default dlopen, for polygraphy --plugins)."""

import sys

from . import main

sys.exit(main())
