"""uvmchunk-run [--config FILE] [--static-runtime] [--stock] [--] COMMAND [ARG...]: runs COMMAND (and every
process it starts, e.g. torchrun's workers) with libuvmchunk.so first in LD_PRELOAD, keeping what was
there. Before that it checks the configuration the library will read (the file and every UVMCHUNK_*
variable) with the library's own parser, the uvmchunk-config helper shipped next to the library, and
refuses to start on any mistake. The one launcher: tools/uvmchunk-run in a source build runs this
module too."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import NoReturn, Optional, Sequence

from . import __version__, _preload_entries, library_path, preload_env

USAGE = "usage: uvmchunk-run [--config FILE] [--static-runtime] [--stock] [--] COMMAND [ARG...]"
HELP = f"""{USAGE}

Runs COMMAND, and every process it starts, with libuvmchunk.so first in LD_PRELOAD (what was
there is kept). --config FILE: the library reads FILE (UVMCHUNK_CONFIG) instead of
/etc/uvmchunk.conf (read when present; the built-in defaults otherwise). Settings can also come
from UVMCHUNK_* variables; `python -m uvmchunk` prints those in effect. A mistake in any of them
(unknown key or variable, bad value, unreadable file) is one 'uvmchunk:' line each, and COMMAND
is not started (exit 2).

  --static-runtime  libuvmchunk-dlsym.so goes before it (x86-64), so programs with a statically
                    linked CUDA runtime (nvcc's default) are served too
  --stock           measure only (UVMCHUNK_STOCK=1): every copy and checkpoint runs as stock
                    PyTorch runs it; each dcp.save / async_save / load still says its
                    'uvmchunk:' line ("stock DCP, measured only") and, with UVMCHUNK_REPORT=FILE,
                    appends its JSON record ("stock": true): bytes, host memory added,
                    page-locked bytes, seconds, to hold against the same job without --stock
  --help            this text
  --version         the version"""


def _fail(msg: str, code: int = 2) -> NoReturn:
    """One line on stderr, prefixed like the library's own messages, then exit `code`."""
    print(f"uvmchunk: {msg}", file=sys.stderr)
    sys.exit(code)


def _check_config(env: dict) -> None:
    """Runs the library's own parser on the configuration `env` gives it (uvmchunk-config --check,
    next to the library); it prints one 'uvmchunk:' line per mistake. Exit 2 on any."""
    helper = os.path.join(os.path.dirname(library_path()), "uvmchunk-config")
    if not os.access(helper, os.X_OK):
        _fail(f"cannot check the configuration: {helper} is missing (it is built and shipped next to "
              "libuvmchunk.so)")
    check_env = {k: v for k, v in env.items() if k != "LD_PRELOAD"}  # the helper makes no CUDA call
    try:
        rc = subprocess.run([helper, "--check"], env=check_env).returncode
    except OSError as e:
        _fail(f"cannot check the configuration: {helper}: {e.strerror}")
    if rc != 0:
        sys.exit(2)  # the helper has said what is wrong, one line per mistake


_DLSYM_OBJECT = "libuvmchunk-dlsym.so"


def _with_static_runtime_support(env: dict) -> dict:
    """libuvmchunk-dlsym.so, from next to the library, first in LD_PRELOAD (a copy already there is
    not added twice)."""
    entries = _preload_entries(env["LD_PRELOAD"])
    path = os.path.join(os.path.dirname(entries[0]), _DLSYM_OBJECT)
    if not os.path.isfile(path):
        _fail(f"--static-runtime needs {path} (built on x86-64 only)")
    rest = [e for e in entries if os.path.basename(e) != _DLSYM_OBJECT]
    env["LD_PRELOAD"] = ":".join([path, *rest])
    return env


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Parses the options, checks the configuration, then replaces this process with COMMAND (exit 2
    on bad usage or a configuration mistake, 127 when COMMAND cannot be run)."""
    args = list(sys.argv[1:] if argv is None else argv)
    env_extra = {}
    static_runtime = False
    while args and args[0].startswith("-"):
        a = args.pop(0)
        if a in ("-h", "--help"):
            print(HELP)
            sys.exit(0)
        if a == "--version":
            print(f"uvmchunk-run {__version__}")
            sys.exit(0)
        if a == "--":
            break
        if a == "--config":
            if not args:
                _fail(f"--config needs a FILE; {USAGE}")
            env_extra["UVMCHUNK_CONFIG"] = os.path.abspath(args.pop(0))  # the workers' cwd may differ
        elif a.startswith("--config="):
            env_extra["UVMCHUNK_CONFIG"] = os.path.abspath(a.split("=", 1)[1])
        elif a == "--static-runtime":
            static_runtime = True
        elif a == "--stock":
            env_extra["UVMCHUNK_STOCK"] = "on"  # the library and the package read it (config key stock)
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
    _check_config(env)
    if static_runtime:
        env = _with_static_runtime_support(env)
    try:
        os.execvpe(args[0], args, env)
    except OSError as e:
        _fail(f"cannot run {args[0]}: {e.strerror}", 127)


if __name__ == "__main__":
    main()
