"""Run `tools/grading/grade.py` as root or as an ordinary user, for the attack suite.

Run by root, the "user" mode starts the grader as ORDINARY_UID (no account needed) in a private mount
namespace of its own: there, any folder on the way to the Python installation, the checkout or the batch
that an ordinary user could not enter (pyenv's /root, say) is covered by a world-readable tmpfs into which
the paths are bound back, so the grader runs as it would on a machine where that user owns a checkout. Nothing
of this is seen outside that namespace. Run by an ordinary user, both modes are that user ("root" is skipped).

`Tracker` puts the grader, before it starts, into a cgroup of its own in a hierarchy the grader does not use
(membership only, no controller): every process it starts, sandboxes and whatever they fork, whatever their uid, is
in it until it ends, and none can leave it (moving a process needs write access to the cgroup files, which the
sandbox neither sees nor has), so the processes left after the batch are the batch's own, not those of another
grader on the same machine.
"""

from __future__ import annotations

import ctypes
import os
import stat
import subprocess
import sys
import tempfile
import time
import uuid
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


class Tracker:
    """A fresh cgroup for one batch, a child of this process's own: in the cgroup v2 tree of a host that mounts
    cgroup v1 for its controllers (as this one: the grader's sandboxes use v1's memory, pids and cpu), else in v1's
    freezer hierarchy. `folder` is None where neither can be made (an ordinary user; a host with cgroup v2 alone,
    whose tree the grader's own sandbox cgroups need)."""

    HIERARCHIES = ((Path("/sys/fs/cgroup/unified"), ""), (Path("/sys/fs/cgroup/freezer"), "freezer"))

    def __init__(self):
        self.folder = None
        if os.geteuid() != 0 or Path("/sys/fs/cgroup/cgroup.controllers").exists():
            return
        for mount, controller in self.HIERARCHIES:
            own = [
                path.lstrip("/")
                for _, names, path in (
                    line.split(":", 2) for line in Path("/proc/self/cgroup").read_text().splitlines()
                )
                if names.split(",") == [controller] or (controller and controller in names.split(","))
            ]
            if not own or not (mount / own[0] / "cgroup.procs").exists():
                continue
            folder = mount / own[0] / f"attack-batch-{uuid.uuid4().hex[:12]}"
            try:
                folder.mkdir()
            except OSError:
                continue
            self.folder = folder
            return

    def join(self):
        """In the grader's process, before it runs anything: join the cgroup."""
        if self.folder is not None:
            _check(_write_pid(self.folder / "cgroup.procs"), "join the tracking cgroup")

    def pids(self):
        """The processes in the cgroup now (and in any cgroup below it)."""
        found = set()
        for procs in self.folder.rglob("cgroup.procs"):
            found |= {int(p) for p in procs.read_text().split()}
        return found

    def close(self):
        """Kill what is left (the test has seen it) and remove the cgroup (the kernel may take a moment to empty it)."""
        if self.folder is None:
            return
        for _ in range(200):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            time.sleep(0.05)
        for folder in [*sorted((p for p in self.folder.rglob("*") if p.is_dir()), reverse=True), self.folder]:
            for _ in range(100):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)


def _write_pid(procs):
    """Write this process's pid into a cgroup.procs file; 0 on success (for `_check`), else -1, errno set."""
    try:
        fd = os.open(procs, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)
        return 0
    except OSError as err:
        ctypes.set_errno(err.errno)
        return -1


def run_grader(args, mode, env, timeout, python_args=None, tracker=None):
    """Run `python -m tools.grading.grade` with `args` (or python with `python_args`); mode "root" (as this process,
    which must be root) or "user"; in `tracker`'s cgroup if one is given."""
    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, *(python_args or ["-m", "tools.grading.grade", *map(str, args)])]
    env = {**env, "PYTHONPATH": str(root)}  # the authors' package, `tools`, from the repository root
    join = tracker.join if tracker is not None else None
    if mode == "root" or os.geteuid() != 0:
        return subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, timeout=timeout, preexec_fn=join)
    needed = [Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), root]
    plan = _opening_plan(needed)

    def as_ordinary_user():
        if join:
            join()
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
