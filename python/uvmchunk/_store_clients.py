"""The object-storage clients DCP saves and loads through in this Python, as `python -m uvmchunk`
lists them: a client counts when the module with its DCP classes imports, not when its
distribution is installed. s3torchconnector's ``s3torchconnector.dcp`` imports ``tenacity``, which
only its ``dcp`` extra installs (its pyproject.toml, optional-dependencies "dcp"): after a plain
`pip install s3torchconnector` the package is there but a job's S3StorageWriter import fails. The
imports are tried in a child Python (the same interpreter and environment), so this process imports
neither the clients nor torch."""
from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

# distribution -> (the module with its DCP classes, the install command that brings it)
CLIENTS = {
    "s3fs": ("s3fs", "pip install s3fs"),  # DCP's FsspecWriter / FsspecReader take s3:// through it
    "s3torchconnector": ("s3torchconnector.dcp", "pip install 's3torchconnector[dcp]'"),
}

_CHILD = """import importlib, json, sys
out = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException as e:  # any failure of the import is the reason it cannot be used
        out[name] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


def import_errors(modules: list[str], timeout: float = 120.0) -> dict[str, str]:
    """module -> "Type: message" for each of `modules` that does not import in a child Python;
    every module, with the reason, when the child itself fails."""
    if not modules:
        return {}
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, *modules], capture_output=True, text=True,
                           timeout=timeout)
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        return dict.fromkeys(modules, f"the check could not run ({type(e).__name__})")


def describe() -> str:
    """The clients whose DCP classes import, with versions; then, for each one installed whose
    classes do not import, why and what to install; "none (...)" when none is installed."""
    installed = {}
    for name in CLIENTS:
        try:
            installed[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    if not installed:
        return f"none ({', '.join(CLIENTS)})"
    errors = import_errors([CLIENTS[name][0] for name in installed])
    usable = [f"{n} {v}" for n, v in installed.items() if CLIENTS[n][0] not in errors]
    text = ", ".join(usable) if usable else "none usable"
    for n, v in installed.items():
        module, install = CLIENTS[n]
        if module in errors:
            text += (f"; {n} {v} is installed but {module} does not import ({errors[module]}): "
                     f"install `{install}`")
    return text
