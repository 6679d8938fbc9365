"""Exact-size CPU views of managed tensors that DCP reads from or writes into: which tensors are
eligible, which of those a save takes (largest first, no byte twice), and the wait for the device
work that wrote them. Shared by the explicit planners (uvmchunk.dcp) and the automatic path
(uvmchunk._auto)."""
from __future__ import annotations

import bisect
import ctypes
import threading
from typing import Any, Optional

import torch

from . import _accounting
from ._config import stock
from ._cuda import rt

def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _device(t: torch.Tensor) -> int:
    return t.device.index if t.device.index is not None else torch.cuda.current_device()


_taken = {"save": 0, "load": 0}  # views handed to DCP in this process, by every planner


def views_taken() -> dict[str, int]:
    """How many exact-size CPU views DCP was handed in this process so far, on save and on load, by
    the explicit planners and the automatic path alike (for logs, tests and the harness)."""
    return dict(_taken)


def local_tensors(obj: Any) -> list[torch.Tensor]:
    """The tensors of this process that a state-dict value holds: a plain tensor itself, a
    DTensor's local tensor, the local shards of a ShardedTensor or of TorchRec's LocalShardsWrapper
    (a DTensor's local tensor with output_dtensor=True), the values of nested dicts, lists and
    tuples. Other values, Statefuls included, hold none here: a Stateful's state_dict() may do work
    (TorchRec's flushes its cache), and DCP calls it itself. Each container is walked once: a state
    dict that contains itself ends here and is left to PyTorch, which raises on it as stock does
    (RecursionError from flatten_state_dict's recursive traversal, torch/distributed/checkpoint/
    _traverse.py traverse_state_dict, inside a CheckpointException)."""
    out: list[torch.Tensor] = []
    stack = [obj]
    walked: set[int] = set()  # ids of the containers walked (the stack keeps each one alive)
    while stack:
        o = stack.pop()
        if isinstance(o, (dict, list, tuple)):
            if id(o) in walked:
                continue
            walked.add(id(o))
        if isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(getattr(o, "_local_tensor", None), torch.Tensor):  # DTensor
            stack.append(o._local_tensor)
        elif callable(getattr(o, "local_shards", None)):
            try:  # ShardedTensor: Shard objects; LocalShardsWrapper: tensors
                stack.extend(getattr(s, "tensor", s) for s in o.local_shards())
            except (RuntimeError, AttributeError, TypeError):
                pass
        elif isinstance(o, torch.Tensor):
            out.append(o)
    return out


def contains_itself(obj: Any) -> bool:
    """Whether a dict, list or tuple of `obj` holds itself at some depth (a container reached twice
    through different keys is no cycle). PyTorch's own walkers of a state dict recurse
    (torch/distributed/_state_dict_utils.py _iterate_state_dict) and raise RecursionError on one that
    does; a walker of ours that builds while it recurses must leave such a dict to them."""
    on_path: set[int] = set()
    finished: set[int] = set()
    stack: list[tuple[Any, bool]] = [(obj, False)]
    while stack:
        o, leaving = stack.pop()
        if leaving:
            on_path.discard(id(o))
            finished.add(id(o))
            continue
        if not isinstance(o, (dict, list, tuple)) or id(o) in finished:
            continue
        if id(o) in on_path:
            return True
        on_path.add(id(o))
        stack.append((o, True))
        stack.extend((v, False) for v in (o.values() if isinstance(o, dict) else o))
    return False


class Viewer:
    """Exact-size CPU views of managed tensors for one save or load. The device work queued before
    the checkpoint is waited for by `prepare`, on the caller's thread and its current stream (where
    DCP's own copy would be ordered), per device holding an eligible tensor; a device not waited for
    there gets no view (a writer thread's current stream is not the caller's). On save, which
    tensors get a view is decided once, over every tensor of the planner's final plan, before the
    first item is resolved: among tensors that share bytes the largest gets it (a small view of a
    table never takes the table's place because DCP happens to resolve it first), and disjoint
    tensors each get their own (TorchRec's tables: views at different offsets into one managed
    allocation)."""

    def __init__(self, any_managed: bool) -> None:
        self.any_managed = any_managed
        self.synced: frozenset[int] = frozenset()  # devices whose caller's stream prepare waited for
        self.views = 0  # how many views were handed to DCP (for logs and tests)
        self._chosen: Optional[frozenset[tuple[int, int]]] = None  # byte ranges [start, end) to view
        self._handed: set[tuple[int, int]] = set()
        self._lock = threading.Lock()  # FileSystemWriter(thread_count > 1) resolves from several threads
        self.call = _accounting.current()  # made on the caller's thread: its views count there
        self.inert = stock()  # stock = on (uvmchunk-run --stock): no view, DCP's own path for everything

    def eligible(self, t: Any) -> bool:
        if (self.inert or not isinstance(t, torch.Tensor) or t.device.type != "cuda" or t.layout != torch.strided
                or t.is_quantized or t.numel() == 0 or not t.is_contiguous() or t.is_conj() or t.is_neg()):
            return False
        runtime = rt()
        if runtime is None:
            return False
        ptr, nbytes = t.data_ptr(), _nbytes(t)
        # where the pages are (docs/design.md, "Zero-copy views"): with the CPU preference (or
        # any_managed) and no part last prefetched to a device
        return (runtime.is_managed(ptr) and runtime.concurrent_managed_access(_device(t))
                and (self.any_managed or runtime.prefers_cpu(ptr, nbytes))
                and not runtime.prefetched_to_device(ptr, nbytes))

    def prepare(self, state_dict: Any) -> None:
        """On the caller's thread, before DCP resolves any item (set_up_planner): waits, per device
        holding an eligible tensor of `state_dict` (nested values included), for the work queued so
        far on this thread's current stream of that device; only those devices get views. With
        FileSystemWriter(thread_count > 1), items are resolved on writer threads too, whose current
        stream is not the caller's (torch/distributed/checkpoint/filesystem.py)."""
        devices = set()
        for t in local_tensors(state_dict):
            if t.device.type == "cuda" and _device(t) not in devices and self.eligible(t):
                devices.add(_device(t))
        if not devices:
            self.synced = frozenset()
            return  # no eligible tensor: nothing to wait for, and no CUDA call (CUDA not initialised)
        runtime = rt()
        for dev in sorted(devices):
            runtime.wait_current_stream(dev) if runtime else torch.cuda.current_stream(dev).synchronize()
        self.synced = frozenset(devices)

    def decide(self, candidates: list[Any]) -> frozenset[tuple[int, int]]:
        """The byte ranges to view among `candidates` (in plan order): eligible tensors, largest
        first, each taken when it shares no byte with one taken before."""
        ranges = [(t.data_ptr(), t.data_ptr() + _nbytes(t)) for t in candidates if self.eligible(t)]
        order = sorted(range(len(ranges)), key=lambda i: (ranges[i][0] - ranges[i][1], i))
        starts: list[int] = []
        ends: list[int] = []
        chosen = set()
        for i in order:
            start, end = ranges[i]
            k = bisect.bisect_right(starts, start)
            if (k and ends[k - 1] > start) or (k < len(starts) and starts[k] < end):
                continue  # shares bytes with a larger tensor (or an equal one earlier in the plan)
            starts.insert(k, start)
            ends.insert(k, end)
            chosen.add((start, end))
        return frozenset(chosen)

    def save_view(self, planner: Any, obj: Any) -> Any:
        """What resolve_data hands DCP: a view of obj when its bytes were chosen, else obj."""
        if not isinstance(obj, torch.Tensor) or obj.device.type != "cuda" or obj.numel() == 0:
            return obj
        key = (obj.data_ptr(), obj.data_ptr() + _nbytes(obj))
        # the CUDA queries (eligible) run outside the lock: no lock is held across a runtime call;
        # two threads may both decide, the first to publish wins (the same plan gives the same set)
        chosen = self._chosen if self._chosen is not None else self.decide(plan_tensors(planner))
        with self._lock:
            if self._chosen is None:
                self._chosen = chosen
            # a transform_object of the planner's own may hand back other memory: only the chosen
            # bytes, once each (tied weights: the second name takes DCP's normal path)
            if key not in self._chosen or key in self._handed or _device(obj) not in self.synced:
                return obj  # asked nothing of CUDA
            self._handed.add(key)  # claimed: another thread resolving the same bytes takes the normal path
        if not self.eligible(obj):
            return obj
        with self._lock:
            return self.view(obj, "save")  # no runtime call in view

    def load_view(self, t: Any) -> Any:
        if not self.eligible(t):
            return t
        with self._lock:
            return self.view(t, "load")

    def view(self, t: torch.Tensor, what: str) -> torch.Tensor:
        """A CPU view of t's bytes, or t itself on a device `prepare` did not wait for."""
        if _device(t) not in self.synced:  # not waited for on the caller's stream: DCP's normal path
            return t
        buf = (ctypes.c_char * _nbytes(t)).from_address(t.data_ptr())
        buf._uvmchunk_source = t  # the managed memory stays alive as long as the view does
        self.views += 1
        _taken[what] += 1
        nbytes = _nbytes(t)
        _accounting.add("view_tensors", 1, self.call)
        _accounting.add("view_bytes", nbytes, self.call)
        # stock DCP stages a saved CUDA tensor in a page-locked block rounded up to a power of two
        # (aten/src/ATen/core/CachingHostAllocator.h)
        _accounting.add("stock_pinned_bytes", 1 << max(nbytes - 1, 0).bit_length() if what == "save" else 0, self.call)
        return torch.frombuffer(buf, dtype=torch.uint8).view(t.dtype).reshape(t.shape)


def plan_tensors(planner: Any) -> list[Any]:
    """The tensors the planner's final plan writes, in plan order, as its lookup_object finds them;
    empty when the planner has no plan (then nothing is viewed)."""
    from torch.distributed.checkpoint.planner import WriteItemType

    plan = getattr(planner, "plan", None)
    out = []
    for item in getattr(plan, "items", None) or ():
        if item.type in (WriteItemType.TENSOR, WriteItemType.SHARD):
            try:
                out.append(planner.lookup_object(item.index))
            except (KeyError, ValueError, IndexError):
                continue
    return out


