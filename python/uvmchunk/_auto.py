"""The automatic path: no code change. ``install_auto_views`` (called by uvmchunk._autoload when the
program imports torch.distributed.checkpoint) wraps dcp.save / async_save / load and PyTorch's default
planners' documented extension points, so that saves and loads with PyTorch's file system storage
take the views of uvmchunk._views, and the host cache is released after each checkpoint."""
from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable, Optional

import torch
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner

from . import _accounting, _reads, _records, _report, _spill, _spill_stage, _streams
from ._config import say_once
from .dcp import ZeroCopyLoadMixin, ZeroCopySaveMixin, host_allocations, release_host_cache
from ._views import Viewer, local_tensors


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


_scope = threading.local()  # .auto: this thread is inside a wrapped dcp.save / dcp.load that may take views
# .async_save: the token of the wrapped dcp.async_save this thread is inside (None outside one);
# .inner: the token of the async_save whose inner dcp.save this thread runs now (None otherwise)


def _run_as_inner(token: object, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """fn on the executor's thread, marked as the inner save of the async_save `token` names."""
    _scope.inner = token
    try:
        return fn(*args, **kwargs)
    finally:
        _scope.inner = None


def _mark_inner_saves(patched: Callable[[Any, Any], Any]) -> None:
    """PyTorch's dcp.async_save stages on the caller's thread, then hands its inner dcp.save to
    _ThreadBasedAsyncCheckpointExecutor.execute_save, which submits it to a ThreadPoolExecutor of
    that executor's own (torch/distributed/checkpoint/_async_thread_executor.py: 2.8 submits `save`,
    2.9+ `save_wrapper`, which waits for the staging and calls `save`; a new executor per
    async_save). Wrapped here: called on the caller's thread inside a wrapped async_save, it makes
    that pool run what it is given under the async_save's token, so the inner save, and no other
    thread's dcp.save, is recognised by the thread that runs it. The process-based executor saves in
    another process: its save is that process's own."""
    try:
        from torch.distributed.checkpoint._async_thread_executor import _ThreadBasedAsyncCheckpointExecutor as cls
    except ImportError:  # a PyTorch without it: its inner saves are reported as calls of their own
        say_once("inner-save", "info", "dcp.async_save: PyTorch's thread executor not found; its inner "
                  "dcp.save is reported as a call of its own")
        return
    orig = cls.execute_save
    if getattr(orig, "_uvmchunk", False):
        return

    def execute_save(self: Any, *args: Any, **kwargs: Any) -> Any:
        token, pool = getattr(_scope, "async_save", None), getattr(self, "_executor", None)
        if token is None or not callable(getattr(pool, "submit", None)):
            return orig(self, *args, **kwargs)
        submit = pool.submit
        pool.submit = lambda fn, /, *a, **k: submit(_run_as_inner, token, fn, *a, **k)
        try:
            return orig(self, *args, **kwargs)
        finally:
            del pool.submit  # the class's own again

    cls.execute_save = patched(orig, execute_save)


def _caller_device(args: tuple, kwargs: dict) -> Optional[int]:
    """The device of the caller's first CUDA tensor (a rank on cuda:N may leave the current device
    at 0, and the release of an async save runs on another thread, whose current device is 0),
    else the caller's current device; None before CUDA is initialised (nothing to release)."""
    if not torch.cuda.is_initialized():
        return None
    state = kwargs.get("state_dict", args[0] if args else None)
    for t in local_tensors(state):
        if t.device.type == "cuda" and t.device.index is not None:
            return t.device.index
    return torch.cuda.current_device()


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


def _release_quietly(device: Optional[int], allocations: Optional[int] = None) -> None:
    """release_host_cache for the automatic path: a failure is said, never raised into a save that
    completed. `allocations`: host_allocations() when the checkpoint began; unchanged, the
    checkpoint page-locked no block, and what the host cache holds is the job's own (its pinned
    batches, which stock leaves cached for the next one): nothing is released."""
    if allocations is not None and host_allocations() == allocations:
        return
    try:
        release_host_cache(device)
    except Exception as e:  # noqa: BLE001
        say_once(f"release:{type(e).__name__}", "warn", f"host cache not released after a checkpoint "
                  f"({type(e).__name__}: {e})")


def install_auto_views(views: bool = True, stock: bool = False) -> None:
    """Patches torch.distributed.checkpoint in this process (idempotent; the originals stay reachable
    as ``__wrapped__``). Always: save / async_save / load release the host allocator's cached free
    blocks when they return, also when they raise (an async save: when its staging and its upload
    completed; the save that PyTorch's async executor runs on its own thread leaves that to them),
    so nothing page-locked or lazily committed is held between checkpoints. With `views`:
    DefaultSavePlanner.resolve_data and DefaultLoadPlanner.resolve_tensor (the documented extension
    points) hand DCP exact-size CPU views of eligible managed tensors, for PyTorch's default planners
    and every subclass that does not override them, inside a dcp.save / dcp.load with PyTorch's file
    system storage; set_up_planner starts each save or load afresh. With `stock` (``stock = on``,
    uvmchunk-run --stock): no view, direct read, spill, piecewise stream or release; the entry
    points and resolve hooks only measure, for the per-checkpoint report."""
    from torch.distributed import checkpoint as dcp_pkg
    from torch.distributed.checkpoint import state_dict_loader, state_dict_saver

    if getattr(state_dict_saver.save, "_uvmchunk", False):
        return
    views = views and not stock  # read by the entry points below

    def wrap_entry(module: Any, name: str, base: type, storage_key: str, after: Any) -> None:
        orig = getattr(module, name, None)
        if orig is None:
            return

        # the deprecated save_state_dict / load_state_dict take the storage positionally (PyTorch's
        # own tests pass it so): their arguments are read by name, as save / load take them
        signature = inspect.signature(orig) if name.endswith("_state_dict") else None

        def entry(*args: Any, **kwargs: Any) -> Any:
            at_entry = _report.entry()  # first: the report measures from the call's entry
            if signature is not None:
                try:
                    args, kwargs = (), dict(signature.bind_partial(*args, **kwargs).arguments)
                except TypeError:
                    pass  # arguments PyTorch's own function refuses: it raises as stock
            _note_planner(kwargs.get("planner"), base)
            # the caller's device, asked on the caller's thread (a new thread's current device is 0)
            device = _caller_device(args, kwargs)
            allocations = host_allocations()  # what the host cache page-locked before this call
            # the save an async_save runs on its executor's thread (_mark_inner_saves): no views, no
            # line of its own (the async_save's), and the release is the async_save's
            by_executor = name == "save" and getattr(_scope, "inner", None) is not None
            _scope.inner = None  # a save this one makes in turn is a call of its own
            outer_async = getattr(_scope, "async_save", None)
            if name == "async_save":
                _scope.async_save = object()  # this call's token, read by execute_save on this thread
            outer = getattr(_scope, "auto", False)
            _scope.auto = (views and name != "async_save" and not by_executor  # staged copies: no views
                           and _views_allowed(kwargs.get(storage_key)))
            result = error = None
            call = report = None
            try:
                call = _accounting.begin(f"dcp.{name}")
                report = None if by_executor else _report.start(call, args, kwargs, at_entry)  # the executor's: async_save's
                # async_save: managed tensors above the budget staged in a spill file (uvmchunk._spill)
                result = (_spill.call(orig, args, kwargs) if name == "async_save" and views
                          else orig(*args, **kwargs))
                return result
            except BaseException as e:
                error = e
                raise
            finally:
                _scope.auto = outer
                _scope.async_save = outer_async
                if call is not None:
                    _accounting.end(call)
                if not by_executor and not stock:  # stock keeps what the host cache holds
                    after(result, device, allocations)
                _report.done(report, result, error)

        new = _patched(orig, entry)
        setattr(module, name, new)
        if getattr(dcp_pkg, name, None) is orig:
            setattr(dcp_pkg, name, new)

    def after_save(_: Any, device: Optional[int], allocations: Optional[int]) -> None:
        _release_quietly(device, allocations)

    def after_async_save(result: Any, device: Optional[int], allocations: Optional[int]) -> None:
        # AsyncSaveResponse (2.9+): staging may still go on; else a Future of the upload, with the
        # staging completed before async_save returned. Blocks the upload used are freed at its end.
        staging = getattr(result, "staging_completion", None)
        if staging is not None:
            staging.add_done_callback(lambda _f: _release_quietly(device, allocations))
        else:
            _release_quietly(device, allocations)
        upload = getattr(result, "upload_completion", result)
        if hasattr(upload, "add_done_callback"):
            upload.add_done_callback(lambda _f: _release_quietly(device, allocations))

    wrap_entry(state_dict_saver, "save", DefaultSavePlanner, "storage_writer", after_save)
    wrap_entry(state_dict_saver, "async_save", DefaultSavePlanner, "storage_writer", after_async_save)
    wrap_entry(state_dict_loader, "load", DefaultLoadPlanner, "storage_reader", after_save)
    # the deprecated aliases (PyTorch's own tests still call them) go to DCP's _save_state_dict /
    # _load_state_dict without dcp.save / dcp.load: covered as those are
    wrap_entry(state_dict_saver, "save_state_dict", DefaultSavePlanner, "storage_writer", after_save)
    wrap_entry(state_dict_loader, "load_state_dict", DefaultLoadPlanner, "storage_reader", after_save)
    _mark_inner_saves(_patched)
    if views:
        # first: a wrapper installed later sits nearer the stream, so RecordCheck wraps what _streams
        # hands out (an s3fs save's concurrent upload, which must see s3fs's own file to apply)
        _records.install()  # a viewed table changed during a save: its record's CRC-32 still true
    if not stock:
        _streams.install()  # a store's streams (fsspec, s3torchconnector) written in pieces, not whole records
    if views:
        _spill_stage.install(_patched)

    def patch(cls: type, resolve: str, methods: tuple[str, ...], mixin: type, on_save: bool) -> None:
        orig_setup, orig_resolve = cls.set_up_planner, getattr(cls, resolve)

        def set_up_planner(self: Any, *args: Any, **kwargs: Any) -> None:
            orig_setup(self, *args, **kwargs)
            viewer = _auto_viewer(self, cls, methods, mixin) if getattr(_scope, "auto", False) else None
            if viewer is not None:  # the wait for queued work: here, on the caller's thread
                viewer.prepare(getattr(self, "state_dict", None))
            self.__dict__["_uvmchunk_auto"] = viewer
            self.__dict__["_uvmchunk_call"] = _accounting.current()  # the caller's: writer threads resolve too

        def resolved(self: Any, *args: Any, **kwargs: Any) -> Any:  # the caller's own argument names
            obj = orig_resolve(self, *args, **kwargs)
            if isinstance(self, mixin):
                return obj  # the mixin's own resolve (uvmchunk.dcp) views and counts it, once
            viewer = self.__dict__.get("_uvmchunk_auto")
            out = obj if viewer is None else viewer.save_view(self, obj) if on_save else viewer.load_view(obj)
            _report.resolved(obj, out, self.__dict__.get("_uvmchunk_call"))
            return out

        cls.set_up_planner = _patched(orig_setup, set_up_planner)
        setattr(cls, resolve, _patched(orig_resolve, resolved))

    # the resolve hooks count DCP's copies even without views: a report's bytes are never a guess
    patch(DefaultSavePlanner, "resolve_data", ("resolve_data",), ZeroCopySaveMixin, True)
    patch(DefaultLoadPlanner, "resolve_tensor", ("resolve_tensor", "commit_tensor"), ZeroCopyLoadMixin, False)
    if not views:
        return
    _reads.install()  # FileSystemReader reads the loads' viewed targets straight from the file
    say_once("installed", "info", "torch.distributed.checkpoint: default planners hand DCP zero-copy views of "
              "managed tensors that prefer the CPU; host cache released after each save")
