"""A Jupyter kernel that starts in a tenth of a second: forked from a process that has imported PyTorch already.

Importing torch costs about 2.7 CPU seconds here (most of it loading libtorch), and every page the build runs,
and every golden the tests run, starts a kernel of its own: forty imports of torch a `make test`. This module is
two programs:

- `python tools/warm_kernel.py --serve SOCKET` (the *warm process*) imports PRELOAD (torch, matplotlib's pyplot), then waits on a
  Unix socket; for each request it forks a child that becomes the kernel (`ipykernel_launcher -f FILE`), in the
  requester's folder, environment, arguments and standard streams;
- `python tools/warm_kernel.py -f FILE` (the *launcher*, what a kernel spec written by `kernel_spec` runs) asks
  the warm process named by $BOOK_WARM_KERNEL for a kernel and then stands for it: Jupyter signals and kills the
  launcher, which passes each signal on, and the kernel ends when the launcher does.

A forked kernel is a fresh kernel with torch already in `sys.modules`: it has no user names, its own random
seeds, PyTorch's default generator untouched (nothing ran in the warm process), and the same environment. Where
that cannot hold, the launcher starts an ordinary kernel instead (`python -m ipykernel_launcher`): when no warm
process answers, or when the kernel's environment differs from the warm process's in any variable a module
could have read while importing (the CPU path of tests/test_cpu_paths.py, a thread count, PYTHONHASHSEED, ...),
or its Python is another. Only the variables of MAY_DIFFER, which Jupyter and pytest set per kernel or per test
and which torch and ipykernel do not read at import, may differ.

    with warm_kernel.warm(env) as socket_path:   # the warm process, stopped on leaving
        warm_kernel.kernel_spec(folder, "python3", socket_path, extra_env)
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys

SOCKET_VAR = "BOOK_WARM_KERNEL"
# imported once by the warm process, before any fork (not ipykernel: its traits read JPY_ variables at import);
# none starts a thread or changes the environment (torch._dynamo would: it sets TORCHINDUCTOR_CACHE_DIR). matplotlib
# reads MPLBACKEND at import, which ipykernel sets only as it starts: a forked kernel sets the backend as that
# import would have (`_as_a_fresh_interpreter`)
PRELOAD = ("torch", "matplotlib.pyplot")
INLINE = "module://matplotlib_inline.backend_inline"  # ipykernel's MPLBACKEND when the environment names none
# what Jupyter, nbclient and pytest set per kernel or per test; nothing PRELOAD imports reads them at import
MAY_DIFFER_PREFIXES = ("JPY_", "PYTEST_", "PYDEVD_")
MAY_DIFFER = {SOCKET_VAR, "BOOK_CACHE", "PWD", "OLDPWD", "_"}
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
MESSAGE_MAX = 1 << 20


def _may_differ(name):
    return name in MAY_DIFFER or name.startswith(MAY_DIFFER_PREFIXES)


def mismatch(request, own_env=None, executable=None):
    """Why the warm process cannot fork the kernel `request` asks for ('' when it can): its Python, or the
    first variable that differs between the two environments outside MAY_DIFFER."""
    own_env = os.environ if own_env is None else own_env
    if request["executable"] != (executable or sys.executable):
        return f"another Python ({request['executable']})"
    theirs = request["env"]
    for name in sorted(set(theirs) | set(own_env)):
        if not _may_differ(name) and theirs.get(name) != own_env.get(name):
            return f"{name} differs"
    return ""


# --- the warm process -----------------------------------------------------------------------------------------


def serve(path):
    """Import PRELOAD, then fork a kernel for every request on the Unix socket `path`, until killed."""
    import importlib

    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]  # tools/ is no package folder of the kernel's
    for name in PRELOAD:
        importlib.import_module(name)
    env = dict(os.environ)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernels are reaped as they end
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        fds = []
        try:
            message, fds, _, _ = socket.recv_fds(conn, MESSAGE_MAX, 3)
            request = json.loads(message)
            why = "not the three standard streams" if len(fds) != 3 else mismatch(request, env)
            if why:
                conn.send(json.dumps({"refused": why}).encode())
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                listener.close()
                _become_kernel(request, fds, conn, path + ".log")  # never returns
            conn.send(json.dumps({"pid": pid}).encode())
        except Exception as error:  # a bad request costs its own kernel (the launcher falls back), not the others
            try:
                conn.send(json.dumps({"refused": f"{type(error).__name__}: {error}"}).encode())
            except OSError:
                pass
        finally:
            for fd in fds:
                os.close(fd)
            conn.close()


def _as_a_fresh_interpreter(kernel):
    """In the forked child: random seeds from the system, as a fresh interpreter's (Python's and numpy's global
    generators); in a kernel, the backend matplotlib would have taken from MPLBACKEND had it been imported after
    ipykernel set that variable (kernelapp's init_gui_pylab: the environment's value, else the inline backend)."""
    import random

    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if kernel and "matplotlib" in sys.modules:
        sys.modules["matplotlib"].rcParams["backend"] = os.environ.get("MPLBACKEND") or INLINE


def _become_kernel(request, fds, conn, log):
    """In the forked child: take the launcher's streams, folder, environment and arguments, end with the
    launcher, tell the launcher on `conn` that it started, and run ipykernel_launcher as `python -m` would (or the
    request's code, as `python -c` would). A failure before it started is appended to the file `log`, and the
    launcher, told nothing, starts a cold kernel instead."""
    import runpy
    import threading

    code, started = 1, False
    try:
        for number, fd in enumerate(fds):
            os.dup2(fd, number)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        for sig in (signal.SIGCHLD, *FORWARDED):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh interpreter has it
        os.setsid()  # as Jupyter starts a kernel: a terminal's Ctrl-C does not reach it
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        code_text = request.get("code")
        # `python -m` puts its folder first on the path, `python -c` an empty string
        sys.path[:] = [request["cwd"] if code_text is None else "", *request["path"][1:]]
        sys.argv[:] = ["ipykernel_launcher", *request["args"]] if code_text is None else ["-c"]
        _as_a_fresh_interpreter(kernel=code_text is None)
        launcher = os.pidfd_open(request["launcher"])

        def end_with_launcher():
            select.select([launcher], [], [])
            os._exit(1)

        threading.Thread(target=end_with_launcher, daemon=True, name="warm-kernel-launcher").start()
        conn.send(b'{"started": true}')
        conn.close()
        started = True
        if code_text is None:
            runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
        else:
            import types

            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(code_text, "<string>", "exec"), main.__dict__)
        code = 0
    except SystemExit as end:
        code = end.code if isinstance(end.code, int) else (0 if end.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        if not started:
            try:
                with open(log, "a") as f:
                    f.write(
                        f"kernel {os.getpid()} for {request.get('args')} failed to start:\n{traceback.format_exc()}"
                    )
            except OSError:
                pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


# --- the launcher ---------------------------------------------------------------------------------------------


def _ask(path, request):
    """The warm process's answer to `request`, {"pid": ...} or {"refused": why}."""
    if not path:
        return {"refused": f"${SOCKET_VAR} is not set"}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
            conn.settimeout(120)
            conn.connect(path)
            socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
            answer = {}
            # the warm process sends the kernel's pid, the kernel that it started (in either order); the end of the
            # connection without both is a refusal, or a kernel that died before it started
            while not ("refused" in answer or {"pid", "started"} <= set(answer)):
                message = conn.recv(MESSAGE_MAX)
                if not message:
                    return {"refused": "the forked kernel ended before it started"}
                answer.update(json.loads(message))
            return answer
    except (OSError, ValueError) as error:
        return {"refused": f"no warm process at {path}: {error}"}


def launch(args):
    """Stand for a kernel forked by the warm process, or become an ordinary kernel when it cannot fork one.
    With `-c CODE` for arguments, the same for `python -c CODE` (its exit status is not passed on)."""
    code = args[1] if args[:1] == ["-c"] and len(args) == 2 else None
    request = {
        "executable": sys.executable,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "path": list(sys.path),
        "args": list(args),
        "code": code,
        "launcher": os.getpid(),
    }
    answer = _ask(os.environ.get(SOCKET_VAR), request)
    if "pid" not in answer:
        if os.environ.get("BOOK_WARM_KERNEL_VERBOSE"):
            print(f"warm kernel: started cold ({answer['refused']})", file=sys.stderr, flush=True)
        cold = ["-c", code] if code is not None else ["-m", "ipykernel_launcher", *args]
        os.execv(sys.executable, [sys.executable, *cold])
    kernel = os.pidfd_open(answer["pid"])
    for sig in FORWARDED:
        signal.signal(sig, lambda number, _frame: signal.pidfd_send_signal(kernel, number))
    while True:  # the kernel is not this process's child: its end is the pidfd turning readable
        try:
            if select.select([kernel], [], [])[0]:
                return 0
        except ProcessLookupError:
            return 0


# --- for the build and the tests ------------------------------------------------------------------------------


class warm:
    """A warm process for kernels of environment `env` (default: this one) while the `with` lasts, listening at
    `path` (default: in a folder of its own); yields the socket's path. It also ends if this process dies
    (PR_SET_PDEATHSIG)."""

    def __init__(self, env=None, path=None):
        self.env = dict(os.environ if env is None else env)
        self.chosen = None if path is None else str(path)

    def __enter__(self):
        import subprocess
        import tempfile

        self.folder = tempfile.mkdtemp(prefix="warm-kernel-") if self.chosen is None else None
        self.path = self.chosen or os.path.join(self.folder, "socket")
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve", self.path],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=_die_with_parent,
        )
        if self.process.stdout.readline().strip() != "ready":  # it failed to import: kernels start cold
            self.process.kill()
            self.process.wait()
        return self.path

    def __exit__(self, *exc):
        import shutil

        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait()
        self.process.stdout.close()
        try:  # kernels that failed to start (each then started cold): said where the run's output shows it
            with open(self.path + ".log") as f:
                print(f"warm kernel: {f.read()}", file=sys.stderr, flush=True)
            os.unlink(self.path + ".log")
        except OSError:
            pass
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
        elif os.path.exists(self.path):
            os.unlink(self.path)
        return False


def _die_with_parent():
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def command(code):
    """The command that runs `python -c code` forked from the warm process of $BOOK_WARM_KERNEL (or cold)."""
    return [sys.executable, os.path.abspath(__file__), "-c", code]


def kernel_spec(folder, name, socket_path, env=None, display_name=None):
    """Write the kernel spec `name` into `folder`/kernels/ (a folder for JUPYTER_PATH): this Python's kernel,
    started by the launcher from the warm process at `socket_path`, with `env` added to its environment."""
    spec = os.path.join(folder, "kernels", name)
    os.makedirs(spec, exist_ok=True)
    with open(os.path.join(spec, "kernel.json"), "w") as f:
        json.dump(
            {
                "argv": [sys.executable, os.path.abspath(__file__), "-f", "{connection_file}"],
                "display_name": display_name or f"Python 3 ({name}, warm)",
                "language": "python",
                "env": {**(env or {}), SOCKET_VAR: socket_path},
            },
            f,
        )
    return spec


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
    else:
        sys.exit(launch(sys.argv[1:]))
