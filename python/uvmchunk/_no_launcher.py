"""The launcher forgotten: the package is installed but libuvmchunk.so is not loaded in this
process, so DCP copies the job's managed tensors through host memory as stock does. Said once per
process, at the first dcp.save / dcp.async_save / dcp.load whose state dict holds CUDA managed
tensors: one line on the rank that copies them, with their bytes and the command to use
(``uvmchunk-run``).

``install`` runs when the program imports torch.distributed.checkpoint (the post-import hook of
uvmchunk._autoload, in a process without the library). It wraps the three for that one look: the
first call whose state dict holds CUDA tensors decides (a CPU-only save before it, a step counter
say, decides nothing), puts PyTorch's functions back, and from then on the wrapper (kept by whoever
took it before) is a pass-through of one comparison. The look asks CUDA nothing unless the state
dict holds CUDA tensors, then one pointer query per distinct tensor in relaxed capture mode
(uvmchunk._cuda). Objects DCP asks for their own state (a Stateful) are not
asked here: their ``state_dict()`` may do work (TorchRec's flushes its cache)."""
from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys
import sysconfig
import threading
from typing import Any, Optional

from ._config import LIB, configuration, log

_ENTRIES = ("save", "async_save", "load")
_armed = True  # no call with CUDA tensors has been looked at yet in this process
_looking = threading.Lock()


def install(module: Any) -> None:
    """Wraps `module`'s (torch.distributed.checkpoint) save and load for the one look."""
    originals = {name: getattr(module, name) for name in _ENTRIES if callable(getattr(module, name, None))}

    def disarm() -> None:
        global _armed
        _armed = False
        for name, orig in originals.items():
            if getattr(getattr(module, name, None), "_uvmchunk_look", False):
                setattr(module, name, orig)

    def wrap(name: str, orig: Any) -> Any:
        @functools.wraps(orig)
        def entry(*args: Any, **kwargs: Any) -> Any:
            # one looker at a time; a call that finds another looking does not wait, nor look
            if _armed and _looking.acquire(blocking=False):
                try:
                    if _armed and look(f"dcp.{name}", kwargs.get("state_dict", args[0] if args else None)):
                        disarm()
                finally:
                    _looking.release()
            return orig(*args, **kwargs)

        entry._uvmchunk_look = True
        return entry

    for name, orig in originals.items():
        setattr(module, name, wrap(name, orig))


def _managed(state_dict: Any) -> Optional[tuple[int, int]]:
    """(tensors, bytes) of the distinct CUDA managed tensors of `state_dict`; None when it has no
    CUDA tensor (then CUDA is not asked); (0, 0) when the runtime cannot be asked."""
    from ._views import local_tensors

    cuda = {}
    for t in local_tensors(state_dict):
        if t.is_cuda and t.numel():
            cuda[(t.data_ptr(), t.numel() * t.element_size())] = t
    if not cuda:
        return None
    from ._cuda import rt

    runtime = rt()
    if runtime is None:
        return 0, 0
    with runtime.relaxed():
        managed = [key for key in cuda if runtime.is_managed(key[0])]
    return len(managed), sum(n for _, n in managed)


def _command() -> str:
    """The command that runs this job under the launcher, as far as this process can tell."""
    launcher = "uvmchunk-run"
    beside = os.path.join(sysconfig.get_path("scripts"), launcher)
    if shutil.which(launcher) is None and os.access(beside, os.X_OK):
        launcher = beside  # installed with the package, but not on PATH
    if "TORCHELASTIC_RUN_ID" in os.environ:  # a torchrun worker: the launcher goes before torchrun
        return f"{launcher} -- torchrun ..."
    return f"{launcher} -- {shlex.join([sys.executable, *sys.argv])}"


def look(call: str, state_dict: Any) -> bool:
    """Says the line when `state_dict` holds managed CUDA tensors; whether this call decided (it
    held CUDA tensors, or could not be looked at); never raises."""
    try:
        found = _managed(state_dict)
        if found is None:
            return False  # no CUDA tensor: the next call decides
        tensors, nbytes = found
        if not tensors:
            return True
        cfg = configuration()
        if cfg.get("enabled", "on") != "on" or cfg.get("dcp_views", "on") != "on":
            return True  # the job switched the views off: nothing is missing
        from ._report import _rank, size_text

        log("warn", f"rank {_rank()} {call} copies {size_text(nbytes)} of managed memory ({tensors} "
                    f"{'tensor' if tensors == 1 else 'tensors'}) through host memory, as stock DCP does: {LIB} is "
                    f"not loaded in this process; run the job as `{_command()}` for zero-copy views")
    except Exception:  # noqa: BLE001  (a notice must never fail a checkpoint)
        pass
    return True
