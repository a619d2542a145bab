"""The grading sandbox's seccomp filter: a small classic-BPF program, written out by hand, that bwrap loads
(`bwrap --seccomp FD`) into every process of the sandbox before the submission's code runs.

It follows the deny lists of Docker's default profile (moby `profiles/seccomp/default.json`) and of
Flatpak (`common/flatpak-run.c`, `setup_seccomp`) for what a notebook never needs: debugging other
processes (`ptrace`, `process_vm_readv/writev`, `kcmp`, `pidfd_getfd`), namespaces and mounts (`mount`,
`umount2`, `pivot_root`, `chroot`, `unshare`, `setns`, `clone` with a `CLONE_NEW*` flag, the new mount
API), the kernel keyring (`keyctl`, `add_key`, `request_key`), `bpf`, `perf_event_open`, `userfaultfd`,
`io_uring`, modules, kexec, reboot, swap, clocks, host names, `syslog`, handles (`open_by_handle_at`),
`ioctl(TIOCSTI/TIOCLINUX)` (typing into a terminal), and `setsid`: a new session would be a new
scheduling autogroup, so a hog forking sessions would get more CPU than its neighbours.
Refused calls fail with EPERM (ENOSYS for `clone3` and the new mount API, so that glibc falls back to
`clone`, whose flags the filter can read). The program first checks the architecture: a system call
made with another calling convention (32-bit `int 0x80`, x32) is killed or refused, never allowed, as
the numbers below are those of the native one.

    python -m tools.grading.seccomp   # prints the filter, one instruction a line
"""

from __future__ import annotations

import errno
import platform
import struct

# classic BPF (linux/bpf_common.h, linux/filter.h) and seccomp (linux/seccomp.h, linux/audit.h) constants
BPF_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JGE_K = 0x05 | 0x30 | 0x00
BPF_JSET_K = 0x05 | 0x40 | 0x00
BPF_RET_K = 0x06 | 0x00
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
OFFSET_NR, OFFSET_ARCH, OFFSET_ARGS = 0, 4, 16  # struct seccomp_data
X32_SYSCALL_BIT = 0x40000000

CLONE_NAMESPACES = (
    0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
)  # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
# socket(domain, ...) and socketpair(domain, ...): only these families (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK),
# as Docker's default profile; others, AF_VSOCK among them (not namespaced: it reaches the host's agents),
# fail with EAFNOSUPPORT, which programs take as "no such family here"
SOCKET_FAMILIES = (1, 2, 10, 16)

# Refused by number: name -> errno. The numbers of each architecture are in SYSCALLS.
DENY = {
    name: errno.EPERM
    for name in (
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "kcmp",
        "pidfd_getfd",
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "unshare",
        "setns",
        "keyctl",
        "add_key",
        "request_key",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "reboot",
        "swapon",
        "swapoff",
        "acct",
        "quotactl",
        "quotactl_fd",
        "open_by_handle_at",
        "name_to_handle_at",
        "lookup_dcookie",
        "settimeofday",
        "clock_settime",
        "adjtimex",
        "clock_adjtime",
        "syslog",
        "vhangup",
        "nfsservctl",
        "fanotify_init",
        "sethostname",
        "setdomainname",
        "setsid",
        # x86 only
        "iopl",
        "ioperm",
        "modify_ldt",
        "uselib",
        "_sysctl",
    )
}
DENY.update(
    {
        name: errno.ENOSYS
        for name in ("clone3", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr")
    }
)

# System call numbers: x86_64 from asm/unistd_64.h, aarch64 from asm-generic/unistd.h
# (tests/test_seccomp.py checks both tables against the headers where they are installed).
SYSCALLS = {
    "x86_64": dict(
        ioctl=16,
        socket=41,
        socketpair=53,
        clone=56,
        ptrace=101,
        syslog=103,
        setsid=112,
        uselib=134,
        vhangup=153,
        modify_ldt=154,
        pivot_root=155,
        _sysctl=156,
        adjtimex=159,
        chroot=161,
        acct=163,
        settimeofday=164,
        mount=165,
        umount2=166,
        swapon=167,
        swapoff=168,
        reboot=169,
        sethostname=170,
        setdomainname=171,
        iopl=172,
        ioperm=173,
        init_module=175,
        delete_module=176,
        quotactl=179,
        nfsservctl=180,
        lookup_dcookie=212,
        clock_settime=227,
        kexec_load=246,
        add_key=248,
        request_key=249,
        keyctl=250,
        unshare=272,
        perf_event_open=298,
        fanotify_init=300,
        name_to_handle_at=303,
        open_by_handle_at=304,
        clock_adjtime=305,
        setns=308,
        process_vm_readv=310,
        process_vm_writev=311,
        kcmp=312,
        finit_module=313,
        kexec_file_load=320,
        bpf=321,
        userfaultfd=323,
        io_uring_setup=425,
        io_uring_enter=426,
        io_uring_register=427,
        open_tree=428,
        move_mount=429,
        fsopen=430,
        fsconfig=431,
        fsmount=432,
        fspick=433,
        clone3=435,
        pidfd_getfd=438,
        mount_setattr=442,
        quotactl_fd=443,
    ),
    "aarch64": dict(
        lookup_dcookie=18,
        ioctl=29,
        umount2=39,
        mount=40,
        pivot_root=41,
        nfsservctl=42,
        chroot=51,
        vhangup=58,
        quotactl=60,
        acct=89,
        unshare=97,
        kexec_load=104,
        init_module=105,
        delete_module=106,
        clock_settime=112,
        syslog=116,
        ptrace=117,
        reboot=142,
        setsid=157,
        sethostname=161,
        setdomainname=162,
        settimeofday=170,
        adjtimex=171,
        add_key=217,
        request_key=218,
        keyctl=219,
        clone=220,
        swapon=224,
        swapoff=225,
        perf_event_open=241,
        fanotify_init=262,
        name_to_handle_at=264,
        open_by_handle_at=265,
        clock_adjtime=266,
        setns=268,
        process_vm_readv=270,
        process_vm_writev=271,
        kcmp=272,
        finit_module=273,
        bpf=280,
        userfaultfd=282,
        kexec_file_load=294,
        io_uring_setup=425,
        io_uring_enter=426,
        io_uring_register=427,
        open_tree=428,
        move_mount=429,
        fsopen=430,
        fsconfig=431,
        fsmount=432,
        fspick=433,
        clone3=435,
        pidfd_getfd=438,
        mount_setattr=442,
        quotactl_fd=443,
    ),
}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64


class Unsupported(RuntimeError):
    """No filter is written for this machine's architecture."""


def _insn(code, k, jt=0, jf=0):
    return (code, jt, jf, k)


def instructions(arch=None):
    """The filter as a list of (code, jt, jf, k) for `arch` (this machine's by default)."""
    arch = arch or platform.machine()
    if arch not in SYSCALLS:
        raise Unsupported(f"the grading sandbox has a seccomp filter for {', '.join(SYSCALLS)}, not {arch}")
    numbers = SYSCALLS[arch]
    prog = [
        _insn(BPF_LD_W_ABS, OFFSET_ARCH),
        _insn(BPF_JEQ_K, AUDIT_ARCH[arch], jt=1, jf=0),
        _insn(BPF_RET_K, RET_KILL_PROCESS),  # another calling convention: never allowed
        _insn(BPF_LD_W_ABS, OFFSET_NR),
    ]
    if arch == "x86_64":  # the x32 ABI shares the architecture value: refuse all of it
        prog += [_insn(BPF_JGE_K, X32_SYSCALL_BIT, jt=0, jf=1), _insn(BPF_RET_K, RET_ERRNO | errno.EPERM)]
    for name, err in sorted(DENY.items(), key=lambda item: numbers.get(item[0], -1)):
        if name in numbers:
            prog += [_insn(BPF_JEQ_K, numbers[name], jt=0, jf=1), _insn(BPF_RET_K, RET_ERRNO | err)]
    low_arg = lambda i: OFFSET_ARGS + 8 * i  # noqa: E731  (low 32 bits, little-endian)
    # clone(flags, ...): refused when the flags ask for a new namespace
    prog += [
        _insn(BPF_JEQ_K, numbers["clone"], jt=0, jf=4),
        _insn(BPF_LD_W_ABS, low_arg(0)),
        _insn(BPF_JSET_K, CLONE_NAMESPACES, jt=0, jf=1),
        _insn(BPF_RET_K, RET_ERRNO | errno.EPERM),
        _insn(BPF_RET_K, RET_ALLOW),
    ]
    # ioctl(fd, request, ...): TIOCSTI and TIOCLINUX refused
    prog += [
        _insn(BPF_JEQ_K, numbers["ioctl"], jt=0, jf=5),
        _insn(BPF_LD_W_ABS, low_arg(1)),
        _insn(BPF_JEQ_K, TIOCSTI, jt=2, jf=0),
        _insn(BPF_JEQ_K, TIOCLINUX, jt=1, jf=0),
        _insn(BPF_RET_K, RET_ALLOW),
        _insn(BPF_RET_K, RET_ERRNO | errno.EPERM),
    ]
    # socket(domain, ...), socketpair(domain, ...): the families of SOCKET_FAMILIES only
    n = len(SOCKET_FAMILIES)
    for call in ("socket", "socketpair"):
        prog += [_insn(BPF_JEQ_K, numbers[call], jt=0, jf=n + 3), _insn(BPF_LD_W_ABS, low_arg(0))]
        prog += [_insn(BPF_JEQ_K, family, jt=n - i, jf=0) for i, family in enumerate(SOCKET_FAMILIES)]
        prog += [_insn(BPF_RET_K, RET_ERRNO | errno.EAFNOSUPPORT), _insn(BPF_RET_K, RET_ALLOW)]
    prog.append(_insn(BPF_RET_K, RET_ALLOW))
    return prog


def program(arch=None):
    """The filter as bytes, the `struct sock_filter` array that `bwrap --seccomp FD` reads."""
    return b"".join(struct.pack("<HBBI", *insn) for insn in instructions(arch))


def denied_numbers(arch=None):
    """{system call number: errno} of the calls refused whatever their arguments."""
    numbers = SYSCALLS[arch or platform.machine()]
    return {numbers[name]: err for name, err in DENY.items() if name in numbers}


if __name__ == "__main__":
    for i, (code, jt, jf, k) in enumerate(instructions()):
        print(f"{i:3d}  code={code:#06x} jt={jt} jf={jf} k={k:#010x}")
