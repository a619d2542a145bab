"""Run one untrusted command in a bubblewrap sandbox with limits; used by tools/grading/grade.py for each submission.

The sandbox (Debian's `bubblewrap`, `bwrap`):

- never runs as host root: when the grader runs as root, the child drops to a dedicated unprivileged
  host uid (SANDBOX_HOST_UID, no account, no file of its own) before it starts bwrap, after joining the
  cgroup root made for it; run by an ordinary user, bwrap runs as that user. Inside, the code is user
  65534 (nobody) in its own user, process, network, IPC and UTS namespaces (no network at all, no other
  process visible, no further user namespace), with no capabilities, and `/proc/sys` is read-only;
- starts from an empty environment: bwrap itself gets only PATH, so its pid 1 has nothing of the
  grader's environment to show in `/proc/1/environ`, and the command gets only what the runner needs;
- runs under a seccomp filter (tools/grading/seccomp.py, after Docker's default profile): no ptrace, no
  process_vm_readv/writev, mount, unshare, setns, keyctl, bpf, perf_event_open, new sessions, ...;
- sees the system (`/usr`), the Python installation, the course's `.venv` and `book/` read-only,
  and nothing else of the host: not the repository (no `solutions/`, no `autograder/`), not the
  other submissions, not the output CSV;
- has a read-only `/` and `/dev`, and two size-limited tmpfs, its only writable places: a private
  `/tmp` and `/dev/shm`; read-only at `/grading`, one host folder that the caller fills with what this
  run needs (a write past a tmpfs's size fails with "No space left on device");
- has limits: address space per process and file size (rlimits), and, where the host lets us
  create cgroups (v1 or v2, as root), the total memory, the number of processes and one CPU's worth
  of time for the whole sandbox; without cgroups, each sandbox is one session, hence one scheduling
  autogroup (the filter refuses `setsid`, so a hog cannot make more), and runs at nice 5: however many
  processes it forks, a sandbox gets a fair share of the CPU beside its neighbours; always a wall-clock
  time limit;
- dies whole at the time limit: the sandbox's pid 1 (bwrap's init, the child of the bwrap we
  started) is sent SIGKILL, and the kernel kills every process of its pid namespace with it; then
  bwrap, and the cgroup (if any) is emptied. This holds with or without a cgroup, and whatever the
  code inside did to its parent-death signal. Nothing the submission started outlives its run.

The command's stdout and stderr go to files (never pipes that a stray process could hold open).
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from tools.grading import seccomp

ROOT = Path(__file__).resolve().parents[2]
SANDBOX_UID = 65534  # nobody, inside the sandbox
SANDBOX_HOST_UID = 64999  # the host uid a sandbox runs as when the grader is root (an unused uid: checked)
MEMORY_BYTES = 3 * 2**30  # per sandbox (cgroup) and per process (address space)
MAX_PROCESSES = 64  # tasks (processes and threads) per sandbox, where cgroups are available
FILE_BYTES = 64 * 2**20  # largest file a sandboxed process may write, stdout included
TMP_BYTES = 256 * 2**20  # the private /tmp
SHM_BYTES = 64 * 2**20  # the private /dev/shm
CPU_SHARE = 1.0  # CPUs' worth of time per sandbox, where cgroups are available
# and its weight beside the host's other work (4 times a process's default: cgroup v1 cpu.shares 1024, v2
# cpu.weight 100): capped at one CPU, a sandbox still gets that CPU on a machine busy with other work, so an
# honest notebook keeps its pace beside a hostile one and beside the host's own load
CPU_WEIGHT_V1, CPU_WEIGHT_V2 = 4096, 400
NICE = 5  # every sandbox's niceness
BWRAP_ENV = {"PATH": "/usr/bin:/bin"}  # bwrap's own environment: nothing of the grader's
INSTALL_HINT = "the grader's sandbox needs Debian's bubblewrap: apt-get install bubblewrap"


_LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x00020000, 0x1000, 0x4000, 0x40000


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


def _editable_target():
    """Where the virtual environment's editable install of the course package looks for `book` (setuptools'
    finder), or None: a second checkout sharing one venv grades with its own `book/`, bound there."""
    import glob
    import importlib.util

    for site in {p for p in sys.path if p.endswith("site-packages")}:
        for finder in glob.glob(os.path.join(site, "__editable___book_*_finder.py")):
            try:
                spec = importlib.util.spec_from_file_location("_course_finder", finder)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return Path(module.MAPPING["book"])
            except (OSError, KeyError, AttributeError, SyntaxError, ImportError):
                return None
    return None


def host_user():
    """(uid, gid) the sandbox runs as on the host when the grader is root; None when it is not root (then the
    sandbox runs as the grader's own, unprivileged, user)."""
    if os.geteuid() != 0:
        return None
    import pwd

    uid = int(os.environ.get("GRADE_SANDBOX_UID", SANDBOX_HOST_UID))
    try:
        owner = pwd.getpwuid(uid).pw_name
    except KeyError:
        owner = None
    if uid == 0 or owner is not None:
        raise SandboxUnavailable(
            f"the sandbox's host uid {uid} belongs to {owner or 'root'}: set GRADE_SANDBOX_UID to a uid no account uses"
        )
    return uid, uid


# Run first inside the sandbox, before `argv`: RLIMIT_NPROC set there, after bwrap made the sandbox's user
# namespace, counts only the tasks of that namespace (the kernel's per-namespace counts, Linux 5.14 and later),
# so a fork bomb is stopped at max_processes without root and without touching the instructor's own budget
# (set before bwrap, the same limit would count every process of the instructor's uid).
LAUNCH = (
    "import os, resource, sys; n = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_NPROC, (n, n)); os.execv(sys.argv[2], sys.argv[2:])"
)


def command(argv, grading_dir, extra_env=None, seccomp_fd=None, staged=None, max_processes=MAX_PROCESSES):
    """The bwrap command line that runs `argv` in a fresh sandbox with `grading_dir` at /grading (read-only),
    at most `max_processes` tasks in it. `seccomp_fd` is an open descriptor from which bwrap reads the filter;
    `staged` {path: staging folder} mounts those host paths from where the caller bound them (see `_stage`)."""
    bwrap = bwrap_path()
    if not bwrap:
        raise SandboxUnavailable(INSTALL_HINT)
    staged = staged or {}
    args = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--hostname",
        "sandbox",
        *_system_binds(),
    ]
    # the private /tmp first, then the environment on top of it: a checkout (and its .venv) may itself live
    # under /tmp, as a CI's fresh clone often does, and must stay visible inside the sandbox
    args += [
        "--proc",
        "/proc",
        "--ro-bind",
        "/proc/sys",
        "/proc/sys",
        "--dev",
        "/dev",
        "--size",
        str(SHM_BYTES),
        "--tmpfs",
        "/dev/shm",
        "--size",
        str(TMP_BYTES),
        "--tmpfs",
        "/tmp",
    ]
    for path in [*environment_paths(), Path(grading_dir)]:
        dest = "/grading" if path == Path(grading_dir) else str(path)
        args += ["--ro-bind", str(staged.get(str(path), path)), dest]
    target = _editable_target()
    if target and target != ROOT / "book":  # the venv's editable install points at another checkout: this
        args += ["--ro-bind", str(staged.get(str(ROOT / "book"), ROOT / "book")), str(target)]  # one's book there
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp", "--clearenv"]
    env = {
        "HOME": "/tmp",
        "PATH": f"{Path(sys.prefix).resolve() / 'bin'}:/usr/bin:/bin",
        "TMPDIR": "/tmp",
        "MPLCONFIGDIR": "/tmp/matplotlib",
        "MPLBACKEND": "Agg",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "LANG": "C.UTF-8",
        **(extra_env or {}),
    }
    for key, value in env.items():
        args += ["--setenv", key, value]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    launch = [str(Path(sys.prefix).resolve() / "bin" / "python"), "-I", "-S", "-c", LAUNCH, str(max_processes)]
    return [*args, *launch, shutil.which(argv[0]) or argv[0], *argv[1:]]


class _Cgroup:
    """A memory, process-count and CPU cgroup for one sandbox, when the host lets us make one (else inert).
    Made by the grader (root); the sandbox's first process joins it before it drops to the sandbox's uid."""

    PERIOD_US = 100_000

    def __init__(self, memory_bytes, max_processes, cpu_share=CPU_SHARE):
        self.dirs = []
        self.cpu = False
        name = f"grade-{uuid.uuid4().hex[:12]}"
        v2 = Path("/sys/fs/cgroup")
        quota = int(cpu_share * self.PERIOD_US)
        try:
            if (v2 / "cgroup.controllers").exists():  # cgroup v2 mounted at the usual place
                here = v2 / _own_cgroup("")
                d = here / name
                d.mkdir()
                self.dirs.append(d)
                _write(d / "memory.max", memory_bytes)
                _write(d / "memory.swap.max", 0, required=False)
                _write(d / "pids.max", max_processes)
                self.cpu = _write(d / "cpu.max", f"{quota} {self.PERIOD_US}", required=False)
                _write(d / "cpu.weight", CPU_WEIGHT_V2, required=False)
            else:  # cgroup v1: one hierarchy per controller
                for controller, files in (
                    ("memory", {"memory.limit_in_bytes": memory_bytes}),
                    ("pids", {"pids.max": max_processes}),
                ):
                    d = Path("/sys/fs/cgroup") / controller / _own_cgroup(controller) / name
                    d.mkdir()
                    self.dirs.append(d)
                    for key, value in files.items():
                        _write(d / key, value)
                try:  # the CPU share is a bonus: without the cpu controller, the autogroup and nice still hold
                    d = Path("/sys/fs/cgroup") / "cpu" / _own_cgroup("cpu") / name
                    d.mkdir()
                    self.dirs.append(d)
                    self.cpu = _write(d / "cpu.cfs_period_us", self.PERIOD_US, required=False) and _write(
                        d / "cpu.cfs_quota_us", quota, required=False
                    )
                    _write(d / "cpu.shares", CPU_WEIGHT_V1, required=False)
                except OSError:
                    pass
        except OSError:
            self.close()
            self.dirs = []

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
        for d in self.dirs:  # the kernel may take a moment to release an emptied cgroup, longer under load
            delay = 0.01
            for _ in range(60):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(delay)
                    delay = min(delay * 2, 0.5)


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
        return True
    except OSError:
        if required:
            raise
        return False


def _children(pid):
    """Host pids of the children of `pid`."""
    found = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            found |= {int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()}
        return found
    except OSError:
        pass
    for entry in os.listdir("/proc"):  # a kernel without /proc/PID/task/TID/children
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.add(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


def kill_sandbox(bwrap_pid):
    """SIGKILL the sandbox's pid 1 (the only child of the bwrap we started), which takes its whole pid namespace
    with it, then bwrap itself. Safe to call on a sandbox that has already ended."""
    for child in _children(bwrap_pid):
        try:
            fd = os.pidfd_open(child)
        except OSError:
            continue
        try:
            if child in _children(bwrap_pid):  # still bwrap's child: not a recycled pid
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.close(fd)


def _stage(staged):
    """In the forked child, still root: a private mount namespace in which each host path the sandbox needs is
    also bound at its staging folder (0755, under /tmp), so that bwrap, once running as the sandbox's uid, can
    reach a Python or a checkout that lies under a folder only root may enter (pyenv in /root, say)."""

    def check(result, what):
        if result != 0:
            os.write(2, f"grader: cannot {what}: {os.strerror(ctypes.get_errno())}\n".encode())
            os._exit(125)

    check(_LIBC.unshare(CLONE_NEWNS), "make a mount namespace")
    check(_LIBC.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make the mounts private")
    for path, folder in staged.items():
        check(_LIBC.mount(path.encode(), folder.encode(), None, MS_BIND | MS_REC, None), f"bind {path}")


def _remove_staging(staging):
    if staging is None:
        return
    for child in staging.iterdir():
        try:
            child.rmdir()
        except OSError:
            pass
    try:
        staging.rmdir()
    except OSError:
        pass


def _seccomp_pipe():
    """A pipe's read end holding the seccomp filter, for `bwrap --seccomp FD`."""
    data = seccomp.program()
    read, write = os.pipe()
    os.write(write, data)  # a few hundred bytes: fits in the pipe's buffer
    os.close(write)
    return read


def run(argv, grading_dir, output_dir, timeout, memory_bytes=MEMORY_BYTES, max_processes=MAX_PROCESSES, extra_env=None):
    """Run `argv` in a sandbox for at most `timeout` seconds; stdout and stderr go to files in `output_dir`
    (a host folder the sandbox cannot see). Returns an Outcome; never leaves a process behind."""
    output_dir = Path(output_dir)
    stdout, stderr = output_dir / "stdout", output_dir / "stderr"
    user = host_user()
    fds = []
    try:
        seccomp_fd = _seccomp_pipe()
        fds.append(seccomp_fd)
        staging = None
        staged = {}
        if user:
            staging = Path(tempfile.mkdtemp(prefix="grade-env-"))
            staging.chmod(0o755)
            for i, path in enumerate([*environment_paths(), Path(grading_dir)]):
                (staging / str(i)).mkdir(mode=0o755)
                staged[str(path)] = str(staging / str(i))
        cmd = command(
            argv, grading_dir, extra_env, seccomp_fd=seccomp_fd, staged=staged, max_processes=process_cap(max_processes)
        )
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
            os.setpriority(os.PRIO_PROCESS, 0, NICE)
            if user:  # never host root: drop every privilege for good before bwrap starts
                _stage(staged)
                os.setgroups([])
                os.setresgid(user[1], user[1], user[1])
                os.setresuid(user[0], user[0], user[0])

        started = time.monotonic()
        try:
            with open(stdout, "wb") as out, open(stderr, "wb") as err:
                proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    preexec_fn=in_child,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=fds,
                    env=BWRAP_ENV,
                )
        except BaseException:
            cgroup.close()
            _remove_staging(staging)
            raise
    finally:
        for fd in fds:
            os.close(fd)
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        if proc.returncode is None:  # the time limit, or an interruption (Ctrl-C): leave nothing behind
            kill_sandbox(proc.pid)
            try:
                proc.wait(timeout=5)  # bwrap ends once its init (and so the namespace) is gone
            except subprocess.TimeoutExpired:
                pass
            if proc.returncode is None:
                proc.kill()
                proc.wait()
        cgroup.close()
        _remove_staging(staging)  # bound in the child's own mount namespace only: here, empty folders
    return Outcome(None if timed_out else proc.returncode, timed_out, time.monotonic() - started, stdout, stderr)


def _nproc_headroom():
    """How many more tasks this uid may start under its own RLIMIT_NPROC (None when unlimited or root)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft == resource.RLIM_INFINITY or os.geteuid() == 0:
        return None
    uid, used = os.getuid(), 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                used += int(fields.get("Threads", "1"))
        except (OSError, KeyError, ValueError):
            continue
    return max(0, soft - used)


def process_cap(max_processes=MAX_PROCESSES):
    """Tasks one sandbox may have: MAX_PROCESSES, or less where the instructor's own RLIMIT_NPROC leaves little
    (a quarter of what is left, so that neighbours and the grader can still start theirs)."""
    headroom = _nproc_headroom()
    return max_processes if headroom is None else max(4, min(max_processes, headroom // 4))


def memory_capped():
    """Whether this grader can cap a sandbox's total memory: it can make a cgroup of its own (as root, or in a
    cgroup delegated to it, e.g. under `systemd-run --user --scope -p Delegate=yes`)."""
    cgroup = _Cgroup(MEMORY_BYTES, MAX_PROCESSES)
    try:
        return bool(cgroup.dirs)
    finally:
        cgroup.close()


UNCAPPED = (
    "nothing here can cap a sandbox's total memory: the grader runs as an ordinary user without a cgroup "
    "of its own, so a notebook's processes could together take more than "
    f"{MEMORY_BYTES / 2**30:.0f} GiB of the instructor's memory (the number of processes is capped all "
    "the same)"
)
UNCAPPED_FIX = (
    "run it as root, or in a delegated cgroup: systemd-run --user --scope -p Delegate=yes make grade "
    "...; or pass --uncapped-memory to grade anyway (see docs/instructors.md)"
)


def check_available():
    """Raise SandboxUnavailable with a one-line reason unless a sandbox can start here."""
    import tempfile

    if not bwrap_path():
        raise SandboxUnavailable(INSTALL_HINT)
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        # the course's own Python, so that one the sandbox cannot reach is reported here, before any notebook
        outcome = run([str(Path(sys.prefix).resolve() / "bin" / "python"), "-I", "-c", "pass"], tmp, tmp, timeout=60)
        if outcome.returncode != 0:
            message = outcome.stderr.read_text(errors="replace").strip().splitlines()
            raise SandboxUnavailable(f"bwrap cannot create a sandbox here: {(message or ['no message'])[-1]}")
