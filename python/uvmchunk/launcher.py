"""uvmchunk-run [--config FILE] -- COMMAND [ARG...]: runs COMMAND (and every process it starts,
e.g. torchrun's workers) with libuvmchunk.so first in LD_PRELOAD, keeping what was there. The one
launcher: tools/uvmchunk-run in a source build runs this module too."""
from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

from . import preload_env

USAGE = "usage: uvmchunk-run [--config FILE] -- COMMAND [ARG...]"


def _fail(msg: str, code: int = 2) -> "NoReturn":  # noqa: F821  (typing only)
    print(msg, file=sys.stderr)
    sys.exit(code)


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Parses the options, then replaces this process with COMMAND (exit 2 on bad usage)."""
    args = list(sys.argv[1:] if argv is None else argv)
    env_extra = {}
    while args:
        a = args[0]
        if a in ("-h", "--help"):
            _fail(USAGE)
        if a == "--":
            args.pop(0)
            break
        if a == "--config" or a.startswith("--config="):
            if a == "--config":
                if len(args) < 2:
                    _fail(USAGE)
                path = args[1]
                del args[:2]
            else:
                path = a.split("=", 1)[1]
                args.pop(0)
            if not os.access(path, os.R_OK):
                _fail(f"uvmchunk: cannot read config {path}")
            env_extra["UVMCHUNK_CONFIG"] = os.path.abspath(path)
            continue
        break
    if not args:
        _fail(USAGE)
    try:
        env = preload_env()
    except FileNotFoundError as e:
        _fail(str(e))
    env.update(env_extra)
    try:
        os.execvpe(args[0], args, env)
    except OSError as e:
        _fail(f"uvmchunk-run: cannot run {args[0]}: {e.strerror}", 127)


if __name__ == "__main__":
    main()
