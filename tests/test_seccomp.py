"""The grading sandbox's seccomp filter (tools/grading/seccomp.py): its system call numbers are the kernel's,
and inside a real sandbox every call it lists is refused while ordinary ones still work.

Needs Debian's bubblewrap for the second part: skipped with a message without it, failed under CI.
"""

from __future__ import annotations

import errno
import json
import platform
import re
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
from conftest import unavailable

from tools.grading import sandbox, seccomp

HEADERS = {"x86_64": "/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "aarch64": "/usr/include/asm-generic/unistd.h"}
REQUIRED = [
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "unshare",
    "setns",
    "keyctl",
    "bpf",
    "perf_event_open",
]


@pytest.mark.parametrize("arch", sorted(seccomp.SYSCALLS))
def test_numbers_are_the_kernels(arch):
    header = Path(HEADERS[arch])
    if not header.exists():
        pytest.skip(f"{header} is not installed (Debian's linux-libc-dev)")
    defined = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", header.read_text())}
    for name, number in seccomp.SYSCALLS[arch].items():
        assert defined.get(name) == number, f"{arch}: {name} is {defined.get(name)} in {header}, {number} here"
    assert set(REQUIRED) <= set(seccomp.DENY)


PROBE = r"""
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return 0 if r != -1 else ctypes.get_errno()
out = {"denied": {str(nr): call(nr, -1, 0, 0, 0, 0) for nr in NUMBERS},
       "clone_newuser": call(CLONE, 0x10000000 | 17, 0, 0, 0, 0),
       "tiocsti": call(IOCTL, 0, 0x5412, 0),
       "getppid": call(GETPPID)}
import socket
families = {}
for name in ("AF_VSOCK", "AF_PACKET", "AF_BLUETOOTH", "AF_ALG", "AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"):
    family = getattr(socket, name, None)
    if family is None:
        continue
    try:
        kind = socket.SOCK_RAW if name == "AF_NETLINK" else socket.SOCK_STREAM if name != "AF_ALG" else socket.SOCK_SEQPACKET
        socket.socket(family, kind).close()
        families[name] = 0
    except OSError as err:
        families[name] = err.errno
out["families"] = families
try:
    socket.socketpair(getattr(socket, "AF_VSOCK", 40), socket.SOCK_STREAM)
    out["vsock_pair"] = 0
except OSError as err:
    out["vsock_pair"] = err.errno
print(json.dumps(out))
"""


def test_the_sandbox_refuses_what_the_filter_lists():
    if not sandbox.bwrap_path():
        unavailable(sandbox.INSTALL_HINT)
    arch = platform.machine()
    denied = seccomp.denied_numbers(arch)
    numbers = seccomp.SYSCALLS[arch]
    source = (
        PROBE.replace("NUMBERS", repr(sorted(denied)))
        .replace("CLONE", str(numbers["clone"]))
        .replace("IOCTL", str(numbers["ioctl"]))
        .replace("GETPPID", str({"x86_64": 110, "aarch64": 173}[arch]))
    )
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)
        (Path(tmp) / "probe.py").write_text(source)
        (Path(tmp) / "probe.py").chmod(0o644)
        outcome = sandbox.run(
            [str(Path(sys.prefix).resolve() / "bin" / "python"), "-I", "/grading/probe.py"], tmp, tmp, 60
        )
        assert outcome.returncode == 0, outcome.stderr.read_text()[-2000:]
        result = json.loads(outcome.stdout.read_text())
    for nr, err in denied.items():
        name = next(n for n, v in numbers.items() if v == nr)
        assert result["denied"][str(nr)] == err, f"{name}: errno {result['denied'][str(nr)]}, expected {err}"
    assert result["clone_newuser"] == errno.EPERM, "clone(CLONE_NEWUSER) was not refused"
    assert result["tiocsti"] == errno.EPERM, "ioctl(TIOCSTI) was not refused"
    assert result["getppid"] == 0, "an ordinary system call was refused"
    families = result["families"]
    for name in ("AF_VSOCK", "AF_PACKET", "AF_BLUETOOTH", "AF_ALG"):
        if name in families:  # not namespaced (vsock reaches the host's agents) or not needed: refused
            assert families[name] == errno.EAFNOSUPPORT, f"socket({name}) gave errno {families[name]}"
    assert result["vsock_pair"] == errno.EAFNOSUPPORT, "socketpair(AF_VSOCK) was not refused"
    for name in ("AF_UNIX", "AF_INET", "AF_INET6"):
        assert families[name] == 0, f"socket({name}) was refused inside the sandbox"
