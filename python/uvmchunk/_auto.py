"""The automatic path: no code change. ``install_auto_views`` (called by uvmchunk._autoload when the
program imports torch.distributed.checkpoint) wraps dcp.save / async_save / load and PyTorch's default
planners' documented extension points, so that saves and loads with PyTorch's file system storage
take the views of uvmchunk._views, and the host cache is released after each checkpoint."""
from __future__ import annotations

import functools
import sys
import threading
from typing import Any, Optional

import torch
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner

from . import _accounting, _report
from ._config import say_once
from .dcp import ZeroCopyLoadMixin, ZeroCopySaveMixin, release_host_cache
from ._views import Viewer


def _auto_viewer(planner: Any, base: type, methods: tuple[str, ...], mixin: type) -> Optional[Viewer]:
    """A viewer for a `base` planner (or a subclass) that leaves `methods` (resolve_data; or
    resolve_tensor and commit_tensor, which receives what resolve_tensor returned) to PyTorch's;
    None for one that overrides any (said once per class, unless it is one of our mixins, which take
    their own views)."""
    overridden = [m for m in methods if getattr(type(planner), m) is not getattr(base, m)]
    if not overridden:
        return Viewer(any_managed=False)
    if not isinstance(planner, mixin):
        name, what = type(planner).__qualname__, "saves" if base is DefaultSavePlanner else "loads"
        say_once(f"{overridden[0]}:{name}", "info", f"planner {name} overrides {overridden[0]}: its {what} take "
                  f"no automatic zero-copy views (put uvmchunk.dcp.{mixin.__name__} first in its bases to add them)")
    return None


def _note_planner(planner: Any, base: type) -> None:
    """A planner that is not a DefaultSavePlanner / DefaultLoadPlanner is left untouched: said once."""
    if planner is not None and not isinstance(planner, base):
        name = type(planner).__qualname__
        say_once(name, "info", f"planner {name} does not derive from {base.__name__}: left untouched, no "
                  "automatic zero-copy views")


def _patched(orig: Any, wrapper: Any) -> Any:
    """wrapper with orig's name, docstring and signature (inspect follows __wrapped__, so a mixin's
    signature test still sees PyTorch's), marked so a second install is a no-op."""
    out = functools.wraps(orig)(wrapper)
    out._uvmchunk = True
    return out


_scope = threading.local()  # .auto: this thread is inside a wrapped dcp.save / dcp.load that may take views
_ASYNC_EXECUTORS = ("torch.distributed.checkpoint._async_thread_executor",
                    "torch.distributed.checkpoint._async_process_executor")


def _views_allowed(storage: Any) -> bool:
    """Automatic views only with PyTorch's file system storage (also what checkpoint_id alone
    makes), which writes or reads every item before dcp.save / dcp.load returns. A storage of
    another kind may keep what resolve_data returned past the call (an asynchronous writer), and a
    live view of a table would then be written torn."""
    from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

    if storage is None or isinstance(storage, (FileSystemWriter, FileSystemReader)):
        return True
    name = type(storage).__qualname__
    say_once(f"storage:{name}", "info", f"storage {name} is not PyTorch's FileSystemWriter / FileSystemReader: "
              "its checkpoints take no automatic zero-copy views")
    return False


def _release_quietly(device: Optional[int]) -> None:
    """release_host_cache for the automatic path: a failure is said, never raised into a save that
    completed."""
    try:
        release_host_cache(device)
    except Exception as e:  # noqa: BLE001
        say_once(f"release:{type(e).__name__}", "warn", f"host cache not released after a checkpoint "
                  f"({type(e).__name__}: {e})")


def install_auto_views(views: bool = True) -> None:
    """Patches torch.distributed.checkpoint in this process (idempotent; the originals stay reachable
    as ``__wrapped__``). Always: save / async_save / load release the host allocator's cached free
    blocks when they return, also when they raise (an async save: when its staging and its upload
    completed; the save that PyTorch's async executor runs on its own thread leaves that to them),
    so nothing page-locked or lazily committed is held between checkpoints. With `views`:
    DefaultSavePlanner.resolve_data and DefaultLoadPlanner.resolve_tensor (the documented extension
    points) hand DCP exact-size CPU views of eligible managed tensors, for PyTorch's default planners
    and every subclass that does not override them, inside a dcp.save / dcp.load with PyTorch's file
    system storage; set_up_planner starts each save or load afresh."""
    from torch.distributed import checkpoint as dcp_pkg
    from torch.distributed.checkpoint import state_dict_loader, state_dict_saver

    if getattr(state_dict_saver.save, "_uvmchunk", False):
        return

    def wrap_entry(module: Any, name: str, base: type, storage_key: str, after: Any) -> None:
        orig = getattr(module, name, None)
        if orig is None:
            return

        def entry(*args: Any, **kwargs: Any) -> Any:
            _note_planner(kwargs.get("planner"), base)
            # the caller's device, asked on the caller's thread (a new thread's current device is 0)
            device = torch.cuda.current_device() if torch.cuda.is_initialized() else None
            by_executor = sys._getframe(1).f_globals.get("__name__") in _ASYNC_EXECUTORS
            outer = getattr(_scope, "auto", False)
            _scope.auto = (views and name != "async_save" and not by_executor  # staged copies: no views
                           and _views_allowed(kwargs.get(storage_key)))
            result = None
            call = _accounting.begin(f"dcp.{name}")
            report = None if by_executor else _report.start(call, args, kwargs)  # the executor's: async_save's
            try:
                result = orig(*args, **kwargs)
                return result
            finally:
                _scope.auto = outer
                _accounting.end(call)
                if not by_executor:
                    after(result, device)
                _report.done(report, result)

        new = _patched(orig, entry)
        setattr(module, name, new)
        if getattr(dcp_pkg, name, None) is orig:
            setattr(dcp_pkg, name, new)

    def after_save(_: Any, device: Optional[int]) -> None:
        _release_quietly(device)

    def after_async_save(result: Any, device: Optional[int]) -> None:
        # AsyncSaveResponse (2.9+): staging may still go on; else a Future of the upload, with the
        # staging completed before async_save returned. Blocks the upload used are freed at its end.
        staging = getattr(result, "staging_completion", None)
        if staging is not None:
            staging.add_done_callback(lambda _f: _release_quietly(device))
        else:
            _release_quietly(device)
        upload = getattr(result, "upload_completion", result)
        if hasattr(upload, "add_done_callback"):
            upload.add_done_callback(lambda _f: _release_quietly(device))

    wrap_entry(state_dict_saver, "save", DefaultSavePlanner, "storage_writer", after_save)
    wrap_entry(state_dict_saver, "async_save", DefaultSavePlanner, "storage_writer", after_async_save)
    wrap_entry(state_dict_loader, "load", DefaultLoadPlanner, "storage_reader", after_save)
    if not views:
        return

    def patch(cls: type, resolve: str, methods: tuple[str, ...], mixin: type, on_save: bool) -> None:
        orig_setup, orig_resolve = cls.set_up_planner, getattr(cls, resolve)

        def set_up_planner(self: Any, *args: Any, **kwargs: Any) -> None:
            orig_setup(self, *args, **kwargs)
            viewer = _auto_viewer(self, cls, methods, mixin) if getattr(_scope, "auto", False) else None
            self.__dict__["_uvmchunk_auto"] = viewer

        def resolved(self: Any, *args: Any, **kwargs: Any) -> Any:  # the caller's own argument names
            obj = orig_resolve(self, *args, **kwargs)
            viewer = self.__dict__.get("_uvmchunk_auto")
            out = obj if viewer is None else viewer.save_view(self, obj) if on_save else viewer.load_view(obj)
            _report.resolved(obj, out)
            return out

        cls.set_up_planner = _patched(orig_setup, set_up_planner)
        setattr(cls, resolve, _patched(orig_resolve, resolved))

    patch(DefaultSavePlanner, "resolve_data", ("resolve_data",), ZeroCopySaveMixin, True)
    patch(DefaultLoadPlanner, "resolve_tensor", ("resolve_tensor", "commit_tensor"), ZeroCopyLoadMixin, False)
    say_once("installed", "info", "torch.distributed.checkpoint: default planners hand DCP zero-copy views of "
              "managed tensors that prefer the CPU; host cache released after each save")
