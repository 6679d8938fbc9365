"""The staging hooks of an async_save's spill: PyTorch's creation of each staged CPU copy is
substituted, for managed storages only, by a spilled one (uvmchunk._spill.Spill.storage); the copy
itself stays PyTorch's (same call, stream and synchronisation):

- 2.11 and newer, ``DefaultStager``: ``StateDictStager._stage_untyped_storage`` (one CPU storage per
  source storage: torch/distributed/checkpoint/_state_dict_stager.py);
- every version, ``BlockingAsyncStager`` (2.8's and 2.11's ``FileSystemWriter`` is one) and 2.8's
  path for writers that are no stager: ``_create_cpu_state_dict`` as imported into
  torch/distributed/checkpoint/staging.py and state_dict_saver.py (plain tensors, ShardedTensor
  local shards and DTensor local tensors; other leaves keep PyTorch's creation there), and
  ``_copy_state_dict`` after it (the copies already filled are left alone)."""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from ._config import say_once
from ._spill import Spill, active, staging_for
from ._views import contains_itself

def _managed(ptr: int) -> bool:
    """Whether `ptr` (a CUDA tensor's or storage's data) is managed memory."""
    from ._cuda import rt
    runtime = rt()
    return ptr != 0 and runtime is not None and runtime.is_managed(ptr)


def _stage_untyped_storage(orig: Callable) -> Callable:
    """StateDictStager._stage_untyped_storage (2.11+): a managed storage not cached by the stager gets
    a spilled CPU storage, copied as PyTorch copies it, never cached (it is released after the upload)."""
    def stage_untyped_storage(self: Any, storage: Any, non_blocking: bool = False) -> Any:
        spill = active()
        if (spill is None or storage in self._cached_storage_mapping or storage.nbytes() == 0
                or storage.device.type != "cuda" or not _managed(storage.data_ptr())):
            return orig(self, storage, non_blocking=non_blocking)
        source = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
        made = spill.storage(source, pinned=bool(self.pin_memory))
        if made is None:
            return orig(self, storage, non_blocking=non_blocking)
        new, filled = made
        if not filled:
            new.copy_(storage, non_blocking=non_blocking)
        return new
    return stage_untyped_storage


def _create_cpu_state_dict(orig: Callable) -> Callable:
    """_create_cpu_state_dict (BlockingAsyncStager; 2.8's writers that are no stager): plain managed
    tensors get spilled CPU tensors; every other leaf is created by PyTorch's own function, the
    containers walked as its _iterate_state_dict walks them (torch/distributed/_state_dict_utils.py)."""
    def create(state_dict: Any, pin_memory: bool = False, share_memory: bool = False) -> Any:
        spill = active()
        if spill is None or share_memory or contains_itself(state_dict):  # a cycle: PyTorch's raises
            return orig(state_dict, pin_memory=pin_memory, share_memory=share_memory)

        def walk(obj: Any) -> Any:
            if isinstance(obj, dict):
                return {k: walk(v) for k, v in obj.items()}
            if isinstance(obj, (list, tuple)):
                out = [walk(v) for v in obj]
                return tuple(out) if isinstance(obj, tuple) else out
            if _spillable(obj):
                made = spill.storage(obj, pinned=pin_memory, persistent=pin_memory)
                if made is not None:
                    out = torch.empty(0, dtype=obj.dtype).set_(made[0], 0, obj.size())
                    if made[1]:  # already holds the bytes: _copy_state_dict leaves it alone
                        spill.prefilled.add(id(out))
                        spill.keep.append(out)
                    return out
            elif hasattr(obj, "local_shards") or hasattr(obj, "_local_tensor"):
                try:
                    out = (_sharded_tensor(obj, spill, lambda t: orig(t, pin_memory=pin_memory), pin_memory)
                           if hasattr(obj, "local_shards") else _dtensor(obj, spill, pin_memory))
                except Exception as e:  # noqa: BLE001  (a PyTorch whose private constructors differ)
                    say_once(f"spill-leaf:{type(obj).__name__}", "info", f"dcp.async_save: a {type(obj).__name__} is "
                             f"staged as PyTorch stages it ({type(e).__name__}: {e})")
                    out = None
                if out is not None:
                    return out
            return orig(obj, pin_memory=pin_memory, share_memory=share_memory)
        return walk(state_dict)
    return create


def _spillable(t: Any) -> bool:
    """A plain managed CUDA tensor: its spilled copy is contiguous, filled by _spill_file.fill when the source
    is too, else by PyTorch's copy_."""
    return (type(t) is torch.Tensor and t.dim() > 0 and t.numel() > 0 and t.device.type == "cuda"
            and _managed(t.data_ptr()))


def _spilled_tensor(t: torch.Tensor, spill: Spill, pin_memory: bool) -> Optional[tuple[torch.Tensor, bool]]:
    """A spilled CPU tensor shaped like `t` and whether it holds t's bytes already, or None."""
    made = spill.storage(t, pinned=pin_memory, persistent=pin_memory)
    if made is None:
        return None
    return torch.empty(0, dtype=t.dtype).set_(made[0], 0, t.size()), made[1]


def _sharded_tensor(obj: Any, spill: Spill, stock_leaf: Callable[[torch.Tensor], torch.Tensor],
                    pin_memory: bool) -> Optional[Any]:
    """A CPU ShardedTensor for `obj` (TorchRec's tables) whose managed local shards are spilled, or
    None (no managed shard: PyTorch's creation). PyTorch's own (sharded_tensor_func of
    _create_cpu_state_dict, torch/distributed/_state_dict_utils.py) is obj.to("cpu"), a copy of every
    shard in anonymous memory, then an empty tensor per shard; here the shards are made once, the
    metadata moved to the CPU as ShardedTensor.to does it, the other shards made by PyTorch's
    creation of a plain tensor (`stock_leaf`)."""
    import copy

    shards = obj.local_shards()
    if not any(_spillable(s.tensor) for s in shards):
        return None
    from torch.distributed._shard.sharded_tensor import Shard, ShardedTensor

    cpu = torch.device("cpu")
    new, filled = [], True
    for s in shards:
        made = _spilled_tensor(s.tensor, spill, pin_memory) if _spillable(s.tensor) else None
        if made is None:
            tensor, filled = stock_leaf(s.tensor), False
        else:
            tensor, filled = made[0], filled and made[1]
        meta = copy.deepcopy(s.metadata)
        if meta.placement is not None:
            meta.placement._device = cpu
        new.append(Shard(tensor, meta))
    st_meta = copy.deepcopy(obj.metadata())
    for m in st_meta.shards_metadata:
        if m.placement is not None:
            m.placement._device = cpu
    out = ShardedTensor._init_from_local_shards_and_global_metadata(
        new, sharded_tensor_metadata=st_meta, process_group=obj._process_group, init_rrefs=obj._init_rrefs)
    if filled:  # every shard holds its bytes: _copy_state_dict leaves it alone
        spill.prefilled.add(id(out))
        spill.keep.append(out)
    return out


def _dtensor(obj: Any, spill: Spill, pin_memory: bool) -> Optional[Any]:
    """A DTensor for `obj` whose managed local tensor is spilled, or None (PyTorch's creation).
    PyTorch's own (dtensor_func there) is obj.to("cpu"), a copy of the local tensor in anonymous
    memory, then an empty one in its place; here the local tensor is made once, under obj's spec (the
    one obj.to("cpu") keeps: same mesh, placements and shape). TorchRec's DTensor output holds a
    LocalShardsWrapper of its row or column pieces (torch/distributed/tensor/_shards_wrapper.py):
    stock staged 207 MiB of anonymous memory for 60 MiB of tables there (tests/torch/test_torchrec.py);
    here each piece is staged once, spilled when managed and past the budget, copied now (the wrapper
    takes no copy_), and the DTensor keeps a wrapper of the staged pieces, as sync dcp.save sees it."""
    local = obj._local_tensor
    if _spillable(local):
        made = _spilled_tensor(local, spill, pin_memory)
        if made is None:
            return None
        out = type(obj)(made[0], obj._spec, requires_grad=obj.requires_grad)
        if made[1]:
            spill.prefilled.add(id(out))
            spill.keep.append(out)
        return out
    if type(local).__name__ != "LocalShardsWrapper" or not hasattr(local, "local_shards"):
        return None
    pieces = local.local_shards()
    if not pieces or not any(_spillable(t) for t in pieces):
        return None
    staged = []
    for t in pieces:
        made = _spilled_tensor(t, spill, pin_memory) if _spillable(t) else None
        if made is None:
            cpu = torch.empty(t.size(), dtype=t.dtype, pin_memory=pin_memory)  # as PyTorch stages it
            cpu.copy_(t)
        else:
            cpu = made[0]
            if not made[1]:
                cpu.copy_(t)
        staged.append(cpu)
    wrapper = type(local)(staged, [tuple(o) for o in local.local_offsets()])
    out = type(obj)(wrapper, obj._spec, requires_grad=obj.requires_grad)
    spill.prefilled.add(id(out))  # every piece holds its bytes: _copy_state_dict leaves it alone
    spill.keep.append(out)
    return out


def _copy_state_dict(orig: Callable) -> Callable:
    """_copy_state_dict (BlockingAsyncStager; 2.8's writers that are no stager), after
    _create_cpu_state_dict: the staged tensors that fill wrote already are left alone, every other
    leaf copied by PyTorch's own function (a structure that does not match raises there, as stock)."""
    def copy(state_dict: Any, copy_state_dict: Any, non_blocking: bool = False, type_check: bool = True) -> Any:
        spill = active()
        if spill is None or not spill.prefilled:
            return orig(state_dict, copy_state_dict, non_blocking=non_blocking, type_check=type_check)

        def walk(src: Any, dst: Any) -> Any:
            if id(dst) in spill.prefilled:
                return dst
            if isinstance(src, dict) and isinstance(dst, dict) and set(src) == set(dst):
                return {k: walk(v, dst[k]) for k, v in src.items()}
            if isinstance(src, (list, tuple)) and isinstance(dst, (list, tuple)) and len(src) == len(dst):
                out = [walk(a, b) for a, b in zip(src, dst)]
                return tuple(out) if isinstance(src, tuple) else out
            return orig(src, dst, non_blocking=non_blocking, type_check=type_check)
        return walk(state_dict, copy_state_dict)
    return copy


class _SpillingExecutor:
    """A DefaultStager's staging executor, for one stage() call: what it is given runs with the
    caller's Spill active on the executor's thread (a threading.local does not follow a task to
    another thread), and everything else is the executor's own."""

    def __init__(self, executor: Any, spill: Spill) -> None:
        self._executor, self._spill = executor, spill

    def submit(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        spill = self._spill

        def run() -> Any:
            with staging_for(spill):
                return fn(*args, **kwargs)
        return self._executor.submit(run)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._executor, name)


def _default_stager_stage(orig: Callable) -> Callable:
    """DefaultStager.stage: the caller's Spill reaches _stage, also where it runs on the stager's
    thread (torch/distributed/checkpoint/staging.py: stage() submits self._stage to its
    _staging_executor). It travels through that executor, never as an argument: a subclass's
    _stage(self, state_dict) takes no keyword of ours. Where it runs on the caller's thread the
    Spill is active already."""
    def stage(self: Any, state_dict: Any, **kwargs: Any) -> Any:
        spill = active()
        executor = self.__dict__.get("_staging_executor")
        if spill is None or executor is None:
            return orig(self, state_dict, **kwargs)
        self._staging_executor = _SpillingExecutor(executor, spill)
        try:
            return orig(self, state_dict, **kwargs)
        finally:
            self._staging_executor = executor
    return stage


def install(patched: Callable[[Any, Any], Any]) -> None:
    """Substitutes the creation of staged CPU copies (idempotent: `patched(orig, wrapper)` marks each)."""
    from torch.distributed.checkpoint import staging, state_dict_saver

    def put(owner: Any, name: str, make: Callable) -> None:
        orig = getattr(owner, name, None)
        if orig is None or getattr(orig, "_uvmchunk", False):
            return
        setattr(owner, name, patched(orig, make(orig)))

    try:
        from torch.distributed.checkpoint._state_dict_stager import StateDictStager
    except ImportError:  # 2.8
        StateDictStager = None
    if StateDictStager is not None and hasattr(StateDictStager, "_stage_untyped_storage"):
        put(StateDictStager, "_stage_untyped_storage", _stage_untyped_storage)
    default = getattr(staging, "DefaultStager", None)
    if default is not None and hasattr(default, "_stage"):
        put(default, "stage", _default_stager_stage)
    for module in (staging, state_dict_saver):
        put(module, "_create_cpu_state_dict", _create_cpu_state_dict)
        put(module, "_copy_state_dict", _copy_state_dict)
