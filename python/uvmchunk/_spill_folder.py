"""Where an async_save's spill goes: the folders it may use (async_spill_dir, the checkpoint's own
folder, the temporary folder), which of them are refused (memory and network file systems), and
whether one has room for a spill file beside the checkpoint."""
from __future__ import annotations

import ctypes
import errno
import os
import tempfile
import urllib.parse
from typing import Any, Optional

import torch

from ._config import say_once
from ._report import size_text

MIB = 1 << 20
# statfs(2) f_type of file systems whose pages are memory: a spill there saves nothing
# (linux/magic.h)
MEMORY_FS = {0x01021994: "tmpfs", 0x858458F6: "ramfs", 0x958458F6: "hugetlbfs"}
# ... and of network and FUSE file systems, which do not make the checkpoint's folder a local one
NETWORK_FS = {0x6969: "nfs", 0xFF534D42: "cifs", 0xFE534D42: "smb2", 0x517B: "smb", 0x65735546: "fuse",
              0x00C36400: "ceph", 0x0BD00BD0: "lustre", 0x47504653: "gpfs", 0x01021997: "9p",
              0x5346414F: "afs", 0x6B414653: "afs"}
RESERVE = 64 * MIB  # free space a spill leaves on its file system beyond what it and the checkpoint need

_libc = ctypes.CDLL(None, use_errno=True)


def fs_type(path: str) -> Optional[int]:
    """statfs(2) f_type of the file system holding `path` (its first field, a long on Linux), or None."""
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
    if _libc.statfs(os.fsencode(path), buf) != 0:
        return None
    return ctypes.c_ulong.from_buffer(buf).value & 0xFFFFFFFF


def existing(path: str) -> str:
    """`path` or its nearest existing ancestor (a checkpoint folder is made by the upload)."""
    path = os.path.abspath(path)
    while not os.path.isdir(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def checkpoint_dir(kwargs: dict[str, Any]) -> Optional[str]:
    """The local folder async_save writes to: the storage writer's path, else checkpoint_id; None
    for a store that is not a local folder (a URL such as s3://..., or a writer other than DCP's
    FileSystemWriter: fsspec's keeps a URL's path without its scheme, "bucket/ckpt", which read
    as a folder would put the spill in the working directory)."""
    writer = kwargs.get("storage_writer")
    if writer is not None and type(writer).__module__ != "torch.distributed.checkpoint.filesystem":
        return None
    where = getattr(writer, "path", None) or kwargs.get("checkpoint_id")
    if where is None or "://" in str(where):
        return None
    try:
        return os.fspath(where)
    except TypeError:
        return None


def spill_dir(escaped: str) -> str:
    """async_spill_dir as uvmchunk-config escapes it (%XX) back to the folder's own bytes, as a str
    the way os.fsdecode makes one (a name that is not UTF-8 keeps its bytes)."""
    return os.fsdecode(urllib.parse.unquote_to_bytes(os.fsencode(escaped)))


def candidates(folder: str, ckpt: Optional[str]) -> list[tuple[str, bool]]:
    """The folders a spill may use, in order, each with whether it is chosen by default:
    async_spill_dir (`folder`, "" none), the checkpoint's folder `ckpt`, the temporary folder."""
    out: list[tuple[str, bool]] = []
    if folder:
        out.append((folder, False))
    if ckpt:
        out.append((ckpt, True))
    out.append((tempfile.gettempdir(), False))
    return out


def refusal(path: str, by_default: bool) -> Optional[str]:
    """Why `path` cannot hold a spill, or None."""
    if not os.path.isdir(path):
        return "not a folder"
    if not os.access(path, os.W_OK | os.X_OK):
        return "not writable"
    kind = fs_type(path)
    if kind in MEMORY_FS:
        return f"on {MEMORY_FS[kind]}, whose pages are memory: a spill there saves none"
    if by_default and kind in NETWORK_FS:
        return f"on {NETWORK_FS[kind]}, not a local file system"
    return None


def usable(path: str, by_default: bool) -> Optional[str]:
    """The folder a candidate (candidates()) names, where it may hold a spill; else None, its
    refusal said once."""
    folder = existing(path) if by_default else path
    why = refusal(folder, by_default)
    if why is None:
        return folder
    say_once(f"spill-refused:{folder}:{why}", "warn",
             f"dcp.async_save: {folder} refused as a spill folder ({why}); trying the next")
    return None


def checkpoint_bytes(state_dict: Any) -> int:
    """Bytes of the tensors a save of `state_dict` writes (each tensor's, a ShardedTensor's local
    shards', a DTensor's local tensor's; other values and the records' headers are left to
    RESERVE), the containers walked once each (a state dict that holds itself is no loop here:
    DCP raises on it as stock does)."""
    total, seen, todo = 0, set(), [state_dict]
    while todo:
        obj = todo.pop()
        if isinstance(obj, torch.Tensor) and hasattr(obj, "_local_tensor"):  # DTensor
            obj = obj._local_tensor
        if isinstance(obj, torch.Tensor):
            shards = getattr(obj, "local_shards", None)  # ShardedTensor, TorchRec's LocalShardsWrapper
            if callable(shards):
                try:
                    todo.extend(s.tensor if hasattr(s, "tensor") else s for s in shards())
                    continue
                except Exception:  # noqa: BLE001  (a wrapper that cannot list them: its own size below)
                    pass
            total += obj.numel() * obj.element_size()
        elif hasattr(obj, "local_shards") and callable(obj.local_shards):  # ShardedTensor
            todo.extend(s.tensor for s in obj.local_shards())
        elif isinstance(obj, (dict, list, tuple)) and id(obj) not in seen:
            seen.add(id(obj))
            todo.extend(obj.values() if isinstance(obj, dict) else obj)
    return total


def local_ranks() -> int:
    """The ranks of this job on this node (torchrun's LOCAL_WORLD_SIZE; 1 where not set): each
    writes its own shard of the checkpoint into the same folder (DCP's FileSystemWriter names its
    files per rank, torch/distributed/checkpoint/filesystem.py)."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def shortfall(folder: str, ckpt: Optional[str], nbytes: int, ckpt_bytes: int) -> Optional[str]:
    """Why `folder` has no room for a spill file of `nbytes` beside all a save puts on its file
    system, or None. The spill files made so far, this call's and other processes', hold their
    blocks already (posix_fallocate) and are out of the free space; on the checkpoint's own file
    system the checkpoint is still to be written: `ckpt_bytes` of this rank's shard, and as much of
    each other rank's on this node (local_ranks(): their shards' sizes are not known here, a job's
    usually alike), beside RESERVE. Short of that the upload would fail (ENOSPC: PyTorch's
    "unexpected pos") where stock's save completes."""
    try:
        vfs = os.statvfs(folder)
        same = ckpt is not None and os.stat(folder).st_dev == os.stat(existing(ckpt)).st_dev
    except OSError as e:  # the folder went away: stage as PyTorch does, as when it is short of room
        return f"spill folder {folder} cannot be asked for its free space ({os.strerror(e.errno or errno.EIO)})"
    free = vfs.f_bavail * vfs.f_frsize
    ranks = local_ranks()
    need = nbytes + RESERVE + (ckpt_bytes * ranks if same else 0)
    if free < need:
        whose = "" if not same else (" with the checkpoint" if ranks == 1 else f" with the checkpoint of {ranks} ranks")
        return f"spill folder {folder} has {size_text(free)} free, {size_text(need)} needed{whose}"
    return None
