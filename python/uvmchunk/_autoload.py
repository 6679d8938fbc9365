"""Zero-copy DCP views with no code change: loaded by PyTorch's out-of-tree backend autoload.

PyTorch (>= 2.5) calls every entry point of the group ``torch.backends`` at the end of
``import torch`` (PyTorch docs, "Autoloading Out-of-Tree Extension"; off with
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``). ``torch_backend_entry`` only adds a post-import hook for
``torch.distributed.checkpoint`` (in a process without libuvmchunk.so, one that only looks once
whether the launcher was forgotten: uvmchunk._no_launcher): importing
DCP while torch is half imported breaks (pytorch/torch-spyre#2925), so nothing of it is touched
before the program imports it. When it is imported, and the configuration's ``dcp_views`` is on,
``uvmchunk._auto.install_auto_views`` patches the two documented extension points of PyTorch's
default planners and the save entry points (see there). ``status`` says whether that happens in
this interpreter, and why not; ``python -m uvmchunk`` prints it.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

from ._config import LIB, configuration, loaded_library, log, stock

TARGET = "torch.distributed.checkpoint"
_HOOK_ENV = "_UVMCHUNK_DCP_HOOK_PID"  # the pid whose torch import installed the hook (read by the library;
# not a UVMCHUNK_* name, which the configuration would take for a key)


def status() -> tuple[bool, str]:
    """Whether dcp.save / dcp.load take zero-copy views with no code change in this interpreter,
    and why (not). Asks nothing of CUDA and does not import torch."""
    from importlib import metadata

    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return False, "PyTorch is not installed in this Python"
    major_minor = tuple(int(x) for x in version.split("+")[0].split(".")[:2] if x.isdigit())
    if major_minor < (2, 5):
        return False, f"PyTorch {version} has no backend autoload (2.5 or newer loads it at import torch)"
    if os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") != "1":
        return False, "TORCH_DEVICE_BACKEND_AUTOLOAD is not 1, so PyTorch loads no backend extension"
    try:
        entries = metadata.entry_points(group="torch.backends")
    except TypeError:  # Python 3.9: a dict of groups
        entries = metadata.entry_points().get("torch.backends", [])
    if not any(ep.value.startswith(__name__ + ":") for ep in entries):
        return False, "the uvmchunk package is not installed in this Python (pip install it: its entry point is missing)"
    if not loaded_library():
        return False, f"{LIB} is not loaded in this process: run the job under uvmchunk-run, or LD_PRELOAD it"
    if configuration().get("enabled", "on") != "on":
        return False, "enabled = off in the configuration"
    if stock():
        return False, "stock = on (uvmchunk-run --stock): DCP runs unchanged, only measured"
    if configuration().get("dcp_views", "on") != "on":
        return False, "dcp_views = off in the configuration"
    return True, "libuvmchunk.so is loaded and dcp_views = on"


class _Finder(importlib.abc.MetaPathFinder):
    """Post-import hook for TARGET: its real loader runs, then `action` (the views' _install, or
    _no_launcher without the library) runs (the pattern of wrapt.when_imported). Leaves
    sys.meta_path once the module has been executed."""

    _searching = False

    def __init__(self, action=None) -> None:  # noqa: ANN001
        self.action = action

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001  (importlib's signature)
        if fullname != TARGET or self._searching:
            return None
        self._searching = True  # the real finders answer the lookup below, not this one
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._searching = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module, finder = spec.loader.exec_module, self

        def exec_and_patch(module):  # noqa: ANN001
            exec_module(module)
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
            (finder.action or _install)()

        spec.loader.exec_module = exec_and_patch
        return spec


def _install() -> None:
    """Installs the release of the host cache after saves, and the views unless dcp_views is off;
    never fails the program's import."""
    try:
        from ._auto import install_auto_views
        if configuration().get("enabled", "on") != "on":
            return  # enabled = off: everything passes through, the Python side included
        if stock():  # uvmchunk-run --stock: DCP unchanged, the per-checkpoint report only
            install_auto_views(False, stock=True)
            return
        views = configuration().get("dcp_views", "on") == "on"
        if not views:
            log("info", "dcp_views = off: no automatic zero-copy views")
        install_auto_views(views)
    except Exception as e:  # noqa: BLE001  (an import of DCP must never fail because of us)
        log("warn", f"zero-copy DCP views not installed ({type(e).__name__}: {e}); DCP runs unchanged")


def _watch_without_library() -> None:
    """Without libuvmchunk.so: the one look at the first dcp.save / async_save / load with CUDA
    tensors (uvmchunk._no_launcher) that says when the launcher was forgotten; never fails the
    program's import."""
    try:
        from . import _no_launcher
        _no_launcher.install(sys.modules[TARGET])
    except Exception:  # noqa: BLE001
        pass


def torch_backend_entry() -> None:
    """The ``torch.backends`` entry point, called during ``import torch``: adds the post-import hook,
    and when libuvmchunk.so is loaded in this process tells the library that it did (the library
    says once per process when a Python with PyTorch lacks it). Without the library the hook only
    arranges the one look of _watch_without_library. Imports nothing of torch."""
    try:
        lib = loaded_library()
        if lib:
            os.environ[_HOOK_ENV] = str(os.getpid())
        action = _install if lib else _watch_without_library
        if TARGET in sys.modules:
            action()
        elif not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder(action))
    except Exception:  # noqa: BLE001  (an exception here would make `import torch` fail)
        pass
