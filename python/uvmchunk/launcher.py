"""uvmchunk-run [--config FILE] [--static-runtime] [--] COMMAND [ARG...]: runs COMMAND (and every process it starts,
e.g. torchrun's workers) with libuvmchunk.so first in LD_PRELOAD, keeping what was there. The one
launcher: tools/uvmchunk-run in a source build runs this module too."""
from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

from . import preload_env

USAGE = "usage: uvmchunk-run [--config FILE] [--static-runtime] [--] COMMAND [ARG...]"
HELP = f"""{USAGE}

Runs COMMAND, and every process it starts, with libuvmchunk.so first in LD_PRELOAD (what was
there is kept). --config FILE: the library reads FILE (UVMCHUNK_CONFIG) instead of its default.
--static-runtime: libuvmchunk-dlsym.so goes before it (x86-64), so programs with a statically linked
CUDA runtime (nvcc's default) are served too. Settings can also come from UVMCHUNK_* variables;
`python -m uvmchunk` prints those in effect."""

def _fail(msg: str, code: int = 2) -> "NoReturn":  # noqa: F821  (typing only)
    """One line on stderr, prefixed like the library's own messages, then exit `code`."""
    print(f"uvmchunk: {msg}", file=sys.stderr)
    sys.exit(code)


def _config_path(path: str) -> str:
    if not (os.path.isfile(path) and os.access(path, os.R_OK)):
        _fail(f"cannot read config {path}: not a readable regular file")
    return os.path.abspath(path)


_DLSYM_OBJECT = "libuvmchunk-dlsym.so"


def _with_static_runtime_support(env: dict) -> dict:
    """libuvmchunk-dlsym.so, from next to the library, first in LD_PRELOAD (a copy already there is
    not added twice)."""
    entries = env["LD_PRELOAD"].split(" ")
    path = os.path.join(os.path.dirname(entries[0]), _DLSYM_OBJECT)
    if not os.path.isfile(path):
        _fail(f"--static-runtime needs {path} (built on x86-64 only)")
    rest = [e for e in entries if os.path.basename(e) != _DLSYM_OBJECT]
    env["LD_PRELOAD"] = " ".join([path, *rest])
    return env


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Parses the options, then replaces this process with COMMAND (exit 2 on bad usage, 127 when
    COMMAND cannot be run)."""
    args = list(sys.argv[1:] if argv is None else argv)
    env_extra = {}
    static_runtime = False
    while args and args[0].startswith("-"):
        a = args.pop(0)
        if a in ("-h", "--help"):
            print(HELP)
            sys.exit(0)
        if a == "--":
            break
        if a == "--config":
            if not args:
                _fail(f"--config needs a FILE; {USAGE}")
            env_extra["UVMCHUNK_CONFIG"] = _config_path(args.pop(0))
        elif a.startswith("--config="):
            env_extra["UVMCHUNK_CONFIG"] = _config_path(a.split("=", 1)[1])
        elif a == "--static-runtime":
            static_runtime = True
        else:
            _fail(f"unknown option {a} (put -- before a command that starts with -); {USAGE}")
    if not args or not args[0]:
        _fail(f"no command to run; {USAGE}")
    try:
        env = preload_env()
    except FileNotFoundError as e:
        print(e, file=sys.stderr)  # already "uvmchunk: ..."
        sys.exit(2)
    env.update(env_extra)
    if static_runtime:
        env = _with_static_runtime_support(env)
    try:
        os.execvpe(args[0], args, env)
    except OSError as e:
        _fail(f"cannot run {args[0]}: {e.strerror}", 127)


if __name__ == "__main__":
    main()
