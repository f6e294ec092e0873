# Shell functions shared by scripts/gpu_check.sh and scripts/gpu_kernels_check.sh; sourced by them, not run.
# They read REPO (this checkout's root) and PYTHON (the interpreter the checks run) from the sourcing script.

use_checkout_rnnx() { # use_checkout_rnnx WORK: makes $PYTHON import rnnx from this checkout
    # Nothing to do when rnnx.runtime already comes from $REPO (an editable install of it); else a symlink tree
    # WORK/pythonpath/rnnx maps rnnx.models / export / runtime / plugins to the checkout's folders and goes first
    # on PYTHONPATH (exported). Returns 1 when that folder cannot be made.
    local here root part
    here="$("$PYTHON" -c 'import os, rnnx.runtime as r; print(os.path.realpath(r.__file__))' 2>/dev/null)"
    [ "$here" = "$REPO/runtime/__init__.py" ] && return 0
    root="$1/pythonpath"
    mkdir -p "$root/rnnx" || return 1
    for part in models export runtime plugins; do ln -sfn "$REPO/$part" "$root/rnnx/$part"; done
    export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
}
