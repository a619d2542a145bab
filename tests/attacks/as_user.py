"""Run `tools/grading/grade.py` as root or as an ordinary user, for the attack suite.

Run by root, the "user" mode starts the grader as ORDINARY_UID (no account needed) in a private mount
namespace of its own: there, any folder on the way to the Python installation, the checkout or the batch
that an ordinary user could not enter (pyenv's /root, say) is covered by a world-readable tmpfs into which
the paths are bound back, so the grader runs as it would on a machine where that user owns a checkout. Nothing
of this is seen outside that namespace. Run by an ordinary user, both modes are that user ("root" is skipped).
"""

from __future__ import annotations

import ctypes
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

ORDINARY_UID = 64998
_LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x00020000, 0x1000, 0x4000, 0x40000


def _closed_ancestor(path):
    """The topmost ancestor of `path` that others cannot enter, or None."""
    for parent in reversed(Path(path).parents):
        if parent != Path("/") and not os.stat(parent).st_mode & stat.S_IXOTH:
            return parent
    return None


def _opening_plan(paths):
    """[(closed folder, staging folder, [paths under it])] for the paths others cannot reach."""
    plan = {}
    for path in paths:
        closed = _closed_ancestor(path)
        if closed:
            plan.setdefault(closed, []).append(Path(path))
    out = []
    for closed, under in plan.items():
        staging = Path(tempfile.mkdtemp(prefix="attack-open-"))
        staging.chmod(0o755)
        out.append((closed, staging, under))
    return out


def _check(result, what):
    if result != 0:
        os.write(2, f"as_user: cannot {what}: {os.strerror(ctypes.get_errno())}\n".encode())
        os._exit(125)


def _mount(src, dest, flags, fstype=None, data=None):
    return _LIBC.mount(
        None if src is None else str(src).encode(),
        str(dest).encode(),
        None if fstype is None else fstype.encode(),
        flags,
        None if data is None else data.encode(),
    )


def run_grader(args, mode, env, timeout, python_args=None):
    """Run `python -m tools.grading.grade` with `args` (or python with `python_args`); mode "root" (as this process,
    which must be root) or "user"."""
    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, *(python_args or ["-m", "tools.grading.grade", *map(str, args)])]
    env = {**env, "PYTHONPATH": str(root)}  # the authors' package, `tools`, from the repository root
    if mode == "root" or os.geteuid() != 0:
        return subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, timeout=timeout)
    needed = [Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), root]
    plan = _opening_plan(needed)

    def as_ordinary_user():
        _check(_LIBC.unshare(CLONE_NEWNS), "unshare")
        _check(_mount("none", "/", MS_REC | MS_PRIVATE), "make / private")
        for closed, staging, under in plan:
            _check(_mount(closed, staging, MS_BIND | MS_REC), f"bind {closed}")
            _check(_mount("tmpfs", closed, 0, "tmpfs", "mode=0755"), f"cover {closed}")
            for path in under:
                target = closed / path.relative_to(closed)
                os.makedirs(target, mode=0o755, exist_ok=True)
                _check(_mount(staging / path.relative_to(closed), target, MS_BIND | MS_REC), f"bind {path}")
        os.setgroups([])
        os.setresgid(ORDINARY_UID, ORDINARY_UID, ORDINARY_UID)
        os.setresuid(ORDINARY_UID, ORDINARY_UID, ORDINARY_UID)

    try:
        return subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=as_ordinary_user
        )
    finally:
        for _, staging, _ in plan:
            try:
                staging.rmdir()
            except OSError:
                pass


def give_to_ordinary_user(*paths):
    """Make the batch's folders the ordinary user's (when root runs the suite)."""
    if os.geteuid() == 0:
        for path in paths:
            for p in [Path(path), *Path(path).rglob("*")]:
                os.lchown(p, ORDINARY_UID, ORDINARY_UID)
