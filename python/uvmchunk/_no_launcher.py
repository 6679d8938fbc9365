"""The launcher forgotten: the package is installed but libuvmchunk.so is not loaded in this
process, so DCP copies the job's managed tensors through host memory as stock does. Said once per
process, at the first dcp.save / dcp.async_save / dcp.load whose state dict holds CUDA managed
tensors: one line on the rank that copies them, with their bytes and the command to use
(``uvmchunk-run``), and the one that measures stock DCP's figures to hold against it
(``uvmchunk-run --stock``: the same per-checkpoint report, nothing changed). Tensors that a
zero-copy planner of uvmchunk.dcp, passed explicitly, hands DCP as views (it needs no library) are
not copied, so they are not counted.

``install`` runs when the program imports torch.distributed.checkpoint (the post-import hook of
uvmchunk._autoload, in a process without the library). It wraps the three for that one look: the
first call whose state dict holds CUDA tensors decides (a CPU-only save before it, a step counter
say, decides nothing; nor does one whose managed tensors all go through such views), puts
PyTorch's functions back, and from then on the wrapper (kept by whoever took it before) is a
pass-through of one comparison. The look asks CUDA nothing unless the state dict holds CUDA
tensors, then one pointer query per distinct tensor in relaxed capture mode (uvmchunk._cuda), and
with a zero-copy planner the queries of its views' conditions (uvmchunk._views). Objects DCP asks
for their own state (a Stateful) are not asked here: their ``state_dict()`` may do work
(TorchRec's flushes its cache)."""
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

_ENTRIES = ("save", "async_save", "load", "save_state_dict", "load_state_dict")  # and the deprecated aliases
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
                    if _armed and look(f"dcp.{name}", kwargs.get("state_dict", args[0] if args else None),
                                       kwargs.get("planner")):
                        disarm()
                finally:
                    _looking.release()
            return orig(*args, **kwargs)

        entry._uvmchunk_look = True
        return entry

    for name, orig in originals.items():
        setattr(module, name, wrap(name, orig))


def _viewed(planner: Any, tensors: list[Any]) -> frozenset[tuple[int, int]]:
    """Byte ranges [start, end) of `tensors` that `planner`, one of uvmchunk.dcp's zero-copy planners
    passed explicitly (it needs no library), hands DCP as views: the ones it decides on (uvmchunk._views
    Viewer); empty for any other planner. Run in relaxed capture mode, as the caller's queries."""
    from ._views import Viewer

    dcp = sys.modules.get("uvmchunk.dcp")  # not imported: no planner of it can have been made
    if planner is None or dcp is None:
        return frozenset()
    viewer = Viewer(getattr(planner, "zero_copy_any_managed", False))
    if isinstance(planner, dcp.ZeroCopySaveMixin):
        return viewer.decide(tensors)  # of tensors sharing bytes, one view (tied weights)
    if isinstance(planner, dcp.ZeroCopyLoadMixin):
        return frozenset((t.data_ptr(), t.data_ptr() + t.numel() * t.element_size())
                         for t in tensors if viewer.eligible(t))
    return frozenset()


def _managed(state_dict: Any, planner: Any = None) -> Optional[tuple[int, int, int]]:
    """(tensors, bytes) of the distinct CUDA managed tensors of `state_dict` that DCP copies through
    host memory (all of them but those a zero-copy `planner` views), and how many are viewed; None
    when it has no CUDA tensor (then CUDA is not asked); (0, 0, 0) when the runtime cannot be asked."""
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
        return 0, 0, 0
    with runtime.relaxed():
        managed = [key for key in cuda if runtime.is_managed(key[0])]
        viewed = _viewed(planner, [cuda[key] for key in managed])
    copied = [(ptr, n) for ptr, n in managed if (ptr, ptr + n) not in viewed]
    return len(copied), sum(n for _, n in copied), len(managed) - len(copied)


def _command(option: str = "") -> str:
    """The command that runs this job under the launcher, as far as this process can tell, with
    the launcher's `option` ("--stock": measured only, python/uvmchunk/launcher.py)."""
    launcher = "uvmchunk-run"
    beside = os.path.join(sysconfig.get_path("scripts"), launcher)
    if shutil.which(launcher) is None and os.access(beside, os.X_OK):
        launcher = beside  # installed with the package, but not on PATH
    if option:
        launcher += f" {option}"
    if "TORCHELASTIC_RUN_ID" in os.environ:  # a torchrun worker: the launcher goes before torchrun
        return f"{launcher} -- torchrun ..."
    return f"{launcher} -- {shlex.join([sys.executable, *sys.argv])}"


def look(call: str, state_dict: Any, planner: Any = None) -> bool:
    """Says the line when `state_dict` holds managed CUDA tensors that DCP copies through host
    memory; whether this call decided (it held CUDA tensors, or could not be looked at); never
    raises. A call whose managed tensors all go through a zero-copy planner's views decides nothing:
    a later call without the planner copies them."""
    try:
        found = _managed(state_dict, planner)
        if found is None:
            return False  # no CUDA tensor: the next call decides
        tensors, nbytes, viewed = found
        if not tensors:
            return not viewed
        cfg = configuration()
        if cfg.get("enabled", "on") != "on" or cfg.get("dcp_views", "on") != "on":
            return True  # the job switched the views off: nothing is missing
        from ._report import _rank, size_text

        log("warn", f"rank {_rank()} {call} copies {size_text(nbytes)} of managed memory ({tensors} "
                    f"{'tensor' if tensors == 1 else 'tensors'}) through host memory, as stock DCP does: {LIB} is "
                    f"not loaded in this process; run the job as `{_command()}` for zero-copy views "
                    f"(measure stock DCP's figures with `{_command('--stock')}`)")
    except Exception:  # noqa: BLE001  (a notice must never fail a checkpoint)
        pass
    return True
