"""The warm kernel (tools/warm_kernel.py): the build's pages and the goldens run in kernels forked from a process
that has imported torch. A forked kernel must behave as a fresh one (its folder, environment, no names of
anyone's, interrupts, its end with the launcher), and wherever a fork could differ from a fresh kernel the
launcher must start a cold one."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from jupyter_client.manager import start_new_kernel

from tools import warm_kernel

PROBE = (
    "import os, sys\n"
    "print('torch loaded before the page:', 'torch' in sys.modules)\n"
    "print('cwd', os.getcwd())\n"
    "print('marker', os.environ.get('BOOK_CACHE'))\n"
    "print('names', sorted(n for n in dir() if not n.startswith('_') and n not in ('In', 'Out', 'exit', 'quit', "
    "'get_ipython', 'open', 'os', 'sys')))\n"
    "import torch; print('threads', torch.get_num_threads())"
)


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A warm process and its kernel spec 'warm-test', on this process's JUPYTER_PATH (where specs are looked up)."""
    folder = tmp_path_factory.mktemp("warm")
    saved = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(folder), saved]))
    env = dict(os.environ)
    try:
        with warm_kernel.warm(env) as socket_path:
            warm_kernel.kernel_spec(folder, "warm-test", socket_path, display_name="warm test")
            yield folder, env
    finally:
        if saved is None:
            os.environ.pop("JUPYTER_PATH")
        else:
            os.environ["JUPYTER_PATH"] = saved


def run_in_kernel(env, code, cwd, timeout=120):
    manager, client = start_new_kernel(kernel_name="warm-test", env=env, cwd=str(cwd), startup_timeout=120)
    lines = []
    try:
        client.execute_interactive(
            code, timeout=timeout, output_hook=lambda m: lines.append(m["content"].get("text", ""))
        )
        return "".join(lines), manager
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_a_forked_kernel_is_a_fresh_one_with_torch_loaded(warm, tmp_path):
    folder, env = warm
    first, _ = run_in_kernel({**env, "BOOK_CACHE": str(tmp_path / "a")}, PROBE + "\nleft_behind = 1", tmp_path)
    second, _ = run_in_kernel({**env, "BOOK_CACHE": str(tmp_path / "b")}, PROBE, folder)
    assert "torch loaded before the page: True" in first, first  # forked, not cold
    assert f"cwd {tmp_path}" in first and f"cwd {folder}" in second
    assert f"marker {tmp_path / 'a'}" in first and f"marker {tmp_path / 'b'}" in second  # its own environment
    assert "names []" in second, second  # nothing of the first page's
    assert "threads" in first


MATPLOTLIB = (
    "import sys\n"
    "print('pyplot loaded before the page:', 'matplotlib.pyplot' in sys.modules)\n"
    "import matplotlib, matplotlib.pyplot as plt\n"
    "plt.plot([1, 2])\n"
    "print('backend', matplotlib.get_backend())\n"
    "print('figures', plt.get_fignums())\n"
    "print('rc', sorted((k, str(v)) for k, v in matplotlib.rcParams.items() if k != 'backend') == "
    "sorted((k, str(v)) for k, v in matplotlib.rcParamsDefault.items() if k != 'backend'))"
)


def test_matplotlib_in_a_forked_kernel_is_as_in_a_cold_one(warm, tmp_path):
    """pyplot is preloaded before ipykernel sets MPLBACKEND: the forked kernel must still draw inline, as a cold
    kernel does (else no page would show its figures), with the same settings and no figure open."""
    _, env = warm
    forked, _ = run_in_kernel(env, MATPLOTLIB, tmp_path)
    cold, _ = run_in_kernel({**env, "OMP_NUM_THREADS": "1"}, MATPLOTLIB, tmp_path)  # a variable that differs: cold
    assert "pyplot loaded before the page: True" in forked and "pyplot loaded before the page: False" in cold
    assert forked.split("\n", 1)[1] == cold.split("\n", 1)[1], (forked, cold)
    assert "backend inline" in forked or "backend_inline" in forked, forked


def test_a_kernel_whose_environment_differs_starts_cold(warm, tmp_path):
    """A variable read at import (here the thread count OpenMP and torch take) is not the warm process's: the
    kernel is an ordinary one, and it takes the variable."""
    _, env = warm
    out, _ = run_in_kernel({**env, "OMP_NUM_THREADS": "1", "BOOK_CACHE": "x"}, PROBE, tmp_path)
    assert "torch loaded before the page: False" in out and "threads 1" in out and "names []" in out, out


def test_an_interrupt_reaches_a_forked_kernel(warm, tmp_path):
    _, env = warm
    manager, client = start_new_kernel(kernel_name="warm-test", env=env, cwd=str(tmp_path), startup_timeout=120)
    try:
        msg_id = client.execute("import sys, time; print('forked', 'torch' in sys.modules); time.sleep(60)")
        # interrupt once the cell runs (its first line printed), not before: on a loaded machine a second can pass
        while "forked" not in client.get_iopub_msg(timeout=60)["content"].get("text", ""):
            pass
        manager.interrupt_kernel()
        reply = client.get_shell_msg(timeout=30)
        while reply["parent_header"].get("msg_id") != msg_id:  # a late reply to start_new_kernel's kernel_info
            assert reply["msg_type"] == "kernel_info_reply", reply["msg_type"]
            reply = client.get_shell_msg(timeout=30)
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_a_forked_kernel_ends_with_its_launcher(warm, tmp_path):
    """Jupyter kills the launcher (a kernel that does not answer); the kernel it stood for must not outlive it."""
    _, env = warm
    manager, client = start_new_kernel(kernel_name="warm-test", env=env, cwd=str(tmp_path), startup_timeout=120)
    try:
        lines = []
        client.execute_interactive(
            "import os; print(os.getpid())",
            timeout=60,
            output_hook=lambda m: lines.append(m["content"].get("text", "")),
        )
        kernel_pid = int("".join(lines))
        assert kernel_pid != manager.provisioner.pid  # the kernel is the warm process's child, not the launcher
        os.kill(manager.provisioner.pid, signal.SIGKILL)
        for _ in range(100):
            if not os.path.exists(f"/proc/{kernel_pid}") or _state(kernel_pid) == "Z":
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the forked kernel {kernel_pid} outlived its launcher")
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _state(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def test_code_runs_forked_and_cold(warm, tmp_path):
    """`warm_kernel.command(code)` (the build's trainings) runs as `python -c` would, forked or, with no warm
    process, cold."""
    _, env = warm
    code = "import sys; print('torch' in sys.modules, sys.argv, sys.path[0] == '')"
    spec = warm[0] / "kernels" / "warm-test" / "kernel.json"
    socket_path = json.loads(spec.read_text())["env"][warm_kernel.SOCKET_VAR]
    forked = subprocess.run(
        warm_kernel.command(code), env={**env, warm_kernel.SOCKET_VAR: socket_path}, capture_output=True, text=True
    )
    cold = subprocess.run(
        warm_kernel.command(code), env={**env, warm_kernel.SOCKET_VAR: str(tmp_path / "none")}, capture_output=True
    )
    assert forked.stdout.strip() == "True ['-c'] True", forked.stderr
    assert cold.stdout.decode().strip() == "False ['-c'] True"


def test_mismatch_names_the_variable_and_allows_only_per_kernel_ones():
    own = {"PATH": "/bin", "OMP_NUM_THREADS": "2"}
    request = {"executable": sys.executable, "env": {**own, "JPY_PARENT_PID": "7", "PYTEST_CURRENT_TEST": "t"}}
    assert warm_kernel.mismatch(request, own) == ""
    assert warm_kernel.mismatch({**request, "env": {**own, "OMP_NUM_THREADS": "1"}}, own) == "OMP_NUM_THREADS differs"
    assert warm_kernel.mismatch({**request, "env": {"PATH": "/bin"}}, own) == "OMP_NUM_THREADS differs"
    assert "another Python" in warm_kernel.mismatch({**request, "executable": "/usr/bin/python9"}, own)


def test_a_kernel_that_fails_before_it_starts_is_refused_and_logged(warm, tmp_path):
    """The launcher waits for the forked kernel to say it started; a child that fails first (here: its launcher
    is already gone) ends the connection unstarted, so the launcher starts a cold kernel, and the failure is
    written beside the socket (and printed when the warm process stops)."""
    folder, env = warm
    spec = json.loads((folder / "kernels" / "warm-test" / "kernel.json").read_text())
    socket_path = spec["env"][warm_kernel.SOCKET_VAR]
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    request = {
        "executable": sys.executable,
        "cwd": str(tmp_path),
        "env": env,
        "path": list(sys.path),
        "args": ["-f", str(tmp_path / "never.json")],
        "code": None,
        "launcher": gone.pid,
    }
    with open(os.devnull, "w") as null:  # the child takes these as its streams
        saved = [os.dup(fd) for fd in (1, 2)]
        os.dup2(null.fileno(), 1), os.dup2(null.fileno(), 2)
        try:
            answer = warm_kernel._ask(socket_path, request)
        finally:
            for fd, copy in zip((1, 2), saved):
                os.dup2(copy, fd)
                os.close(copy)
    assert answer == {"refused": "the forked kernel ended before it started"}, answer
    log = open(socket_path + ".log").read()
    assert "failed to start" in log and "ProcessLookupError" in log, log
    os.unlink(socket_path + ".log")
