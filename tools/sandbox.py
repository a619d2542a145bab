"""Run one untrusted command in a bubblewrap sandbox with limits; used by tools/grade.py for each submission.

The sandbox (Debian's `bubblewrap`, `bwrap`):

- runs as the unprivileged user 65534 (nobody) in its own user, process, network, IPC and UTS
  namespaces: no network at all, no other process visible;
- sees the system (`/usr`), the Python installation, the course's `.venv` and `book/` read-only,
  and nothing else of the host: not the repository (no `solutions/`, no `autograder/`), not the
  other submissions, not the output CSV;
- has a private `/tmp` (a size-limited tmpfs, its only writable place) and, read-only at `/grading`,
  one host folder that the caller fills with what this run needs;
- has limits: address space per process and file size (rlimits), and, where the host lets us
  create cgroups (v1 or v2, as root), the total memory and the number of processes of the whole
  sandbox; always a wall-clock time limit;
- dies whole at the time limit: the sandbox's process group is killed, its pid-1 dies with it
  (`--die-with-parent`), which kills every process left in its pid namespace, and the cgroup (if
  any) is emptied. Nothing the submission started outlives its run.

The command's stdout and stderr go to files (never pipes that a stray process could hold open).
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SANDBOX_UID = 65534  # nobody
MEMORY_BYTES = 3 * 2**30  # per sandbox (cgroup) and per process (address space)
MAX_PROCESSES = 64  # tasks (processes and threads) per sandbox, where cgroups are available
FILE_BYTES = 64 * 2**20  # largest file a sandboxed process may write, stdout included
TMP_BYTES = 256 * 2**20  # the private /tmp
INSTALL_HINT = "the grader's sandbox needs Debian's bubblewrap: apt-get install bubblewrap"


class SandboxUnavailable(RuntimeError):
    """bwrap is missing or cannot create its namespaces on this machine."""


@dataclass
class Outcome:
    returncode: int | None  # None when the run was killed at the time limit
    timed_out: bool
    seconds: float
    stdout: Path
    stderr: Path


def bwrap_path():
    return shutil.which("bwrap")


def _system_binds():
    """Read-only views of the system: /usr, the top-level links into it, and the loader's cache."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for path in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        args += ["--ro-bind-try", path, path]
    return args


def environment_paths():
    """Host folders the sandbox needs to run the course's Python: the interpreter's installation,
    the virtual environment, and the `book/` package (the .venv imports it from the repository)."""
    paths = [Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), ROOT / "book"]
    out = []
    for p in paths:
        if not any(p == q or q in p.parents for q in out):
            out.append(p)
    return out


def command(argv, grading_dir, extra_env=None):
    """The bwrap command line that runs `argv` in a fresh sandbox with `grading_dir` at /grading (read-only)."""
    bwrap = bwrap_path()
    if not bwrap:
        raise SandboxUnavailable(INSTALL_HINT)
    args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox", *_system_binds()]
    # the private /tmp first, then the environment on top of it: a checkout (and its .venv) may itself live
    # under /tmp, as a CI's fresh clone often does, and must stay visible inside the sandbox
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    for path in environment_paths():
        args += ["--ro-bind", str(path), str(path)]
    args += ["--ro-bind", str(grading_dir), "/grading", "--chdir", "/tmp", "--clearenv"]
    env = {"HOME": "/tmp", "PATH": f"{Path(sys.prefix) / 'bin'}:/usr/bin:/bin", "TMPDIR": "/tmp",
           "MPLCONFIGDIR": "/tmp/matplotlib", "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "LANG": "C.UTF-8", **(extra_env or {})}
    for key, value in env.items():
        args += ["--setenv", key, value]
    return [*args, *argv]


class _Cgroup:
    """A memory and process-count cgroup for one sandbox, when the host lets us make one (else inert)."""

    def __init__(self, memory_bytes, max_processes):
        self.dirs = []
        name = f"grade-{uuid.uuid4().hex[:12]}"
        v2 = Path("/sys/fs/cgroup")
        try:
            if (v2 / "cgroup.controllers").exists():  # cgroup v2 mounted at the usual place
                here = v2 / _own_cgroup("")
                d = here / name
                d.mkdir()
                self.dirs.append(d)
                _write(d / "memory.max", memory_bytes)
                _write(d / "memory.swap.max", 0, required=False)
                _write(d / "pids.max", max_processes)
            else:  # cgroup v1: one hierarchy per controller
                for controller, files in (("memory", {"memory.limit_in_bytes": memory_bytes}),
                                          ("pids", {"pids.max": max_processes})):
                    d = Path("/sys/fs/cgroup") / controller / _own_cgroup(controller) / name
                    d.mkdir()
                    self.dirs.append(d)
                    for key, value in files.items():
                        _write(d / key, value)
        except OSError:
            self.close()
            self.dirs = []

    @property
    def active(self):
        return bool(self.dirs)

    @property
    def procs_files(self):
        return [str(d / "cgroup.procs") for d in self.dirs]

    def kill_all(self):
        for _ in range(50):
            pids = set()
            for d in self.dirs:
                try:
                    pids |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
                except OSError:
                    pass
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)

    def close(self):
        self.kill_all()
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _own_cgroup(controller):
    """This process's cgroup path in the hierarchy of `controller` ("" for cgroup v2)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (controller == "" and controllers == "") or controller in controllers.split(","):
            return path.lstrip("/")
    return ""


def _write(path, value, required=True):
    try:
        path.write_text(str(value))
    except OSError:
        if required:
            raise


def limits_description(cgroup_active):
    parts = [f"{MEMORY_BYTES / 2**30:g} GiB of address space per process", f"{FILE_BYTES / 2**20:g} MiB per file"]
    if cgroup_active:
        parts = [f"{MEMORY_BYTES / 2**30:g} GiB of memory and {MAX_PROCESSES} processes in all", *parts]
    return ", ".join(parts)


def run(argv, grading_dir, output_dir, timeout, memory_bytes=MEMORY_BYTES, max_processes=MAX_PROCESSES,
        extra_env=None):
    """Run `argv` in a sandbox for at most `timeout` seconds; stdout and stderr go to files in `output_dir`
    (a host folder the sandbox cannot see). Returns an Outcome; never leaves a process behind."""
    output_dir = Path(output_dir)
    stdout, stderr = output_dir / "stdout", output_dir / "stderr"
    cmd = command(argv, grading_dir, extra_env)
    cgroup = _Cgroup(memory_bytes, max_processes)
    procs_files = cgroup.procs_files

    def in_child():
        pid = str(os.getpid()).encode()
        for path in procs_files:
            fd = os.open(path, os.O_WRONLY)
            os.write(fd, pid)
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_BYTES, FILE_BYTES))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    started = time.monotonic()
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, preexec_fn=in_child,
                                start_new_session=True, close_fds=True)
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)  # bwrap and its session; its pid-1 takes the namespace with it
        proc.wait()
    finally:
        if proc.returncode is None:  # interrupted (Ctrl-C): still leave nothing behind
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        cgroup.close()
    return Outcome(None if timed_out else proc.returncode, timed_out, time.monotonic() - started, stdout, stderr)


def check_available():
    """Raise SandboxUnavailable with a one-line reason unless a sandbox can start here."""
    import tempfile

    if not bwrap_path():
        raise SandboxUnavailable(INSTALL_HINT)
    with tempfile.TemporaryDirectory() as tmp:
        outcome = run(["/bin/true"], tmp, tmp, timeout=30)
        if outcome.returncode != 0:
            message = outcome.stderr.read_text(errors="replace").strip().splitlines()
            raise SandboxUnavailable(f"bwrap cannot create a sandbox here: {(message or ['no message'])[-1]}")
