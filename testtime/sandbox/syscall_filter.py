"""The system calls a sandboxed program may make: one allowlist, rendered for both backends.

The policy is Docker's default seccomp profile for a container without capabilities (moby's
`profiles/seccomp/default.json`: everything else fails with EPERM; `socket` but for AF_VSOCK; `personality` for
its five harmless personas; `clone` without namespace flags; `clone3` fails with ENOSYS so that libc falls back
to `clone`), made stricter where no contest program has a use and a hostile one has:

- `io_uring_setup`, `io_uring_enter`, `io_uring_register`: a second way into the kernel that no seccomp rule can
  see through (its operations are not system calls), behind a share of the kernel's recent privilege
  escalations; Docker 20.10's profile allows them, later releases refuse them;
- `ptrace`, `process_vm_readv`, `process_vm_writev`: reading another process's memory (the zygote's, where a
  job's hidden expected outputs once were), which Docker allows on kernels since 4.8;
- only the native architecture: a 32-bit system call (`int 0x80` on x86_64) kills the thread, where Docker also
  allows the x86 and x32 tables.

`bpf_program()` is the filter as the compiled BPF bwrap's `--seccomp FD` loads (libseccomp's own compiler,
through `pyseccomp`: a ctypes binding to the system's libseccomp.so.2 that installs from PyPI without a compiler,
where libseccomp's official bindings are Cython built against its headers and are not on PyPI);
`docker_profile()` is the same policy as the JSON a container's `--security-opt seccomp=` takes.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import platform

from testtime.sandbox import SandboxError

# Grouped by what they are for; a name this host's libseccomp does not know is left out (stays refused).
ALLOWED = {
    # processes, threads, signals, waiting
    "fork vfork execve execveat exit exit_group wait4 waitid waitpid kill tkill tgkill getpid getppid gettid "
    "getpgid getpgrp setpgid getsid setsid pidfd_open pidfd_send_signal set_tid_address set_robust_list "
    "get_robust_list rseq restart_syscall rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo rt_sigreturn "
    "rt_sigsuspend rt_sigtimedwait rt_sigtimedwait_time64 rt_tgsigqueueinfo sigaltstack sigprocmask sigreturn "
    "signalfd signalfd4 pause futex futex_time64 futex_waitv membarrier prctl arch_prctl modify_ldt capget capset "
    "seccomp get_thread_area set_thread_area",
    # identity and limits (a job may drop, never gain: no capabilities)
    "getuid getuid32 geteuid geteuid32 getgid getgid32 getegid getegid32 getresuid getresuid32 getresgid "
    "getresgid32 getgroups getgroups32 setuid setuid32 setgid setgid32 setreuid setreuid32 setregid setregid32 "
    "setresuid setresuid32 setresgid setresgid32 setgroups setgroups32 setfsuid setfsuid32 setfsgid setfsgid32 "
    "getrlimit ugetrlimit setrlimit prlimit64 getrusage getpriority setpriority ioprio_get ioprio_set umask "
    "sched_getaffinity sched_setaffinity sched_getattr sched_setattr sched_getparam sched_setparam "
    "sched_getscheduler sched_setscheduler sched_get_priority_max sched_get_priority_min sched_rr_get_interval "
    "sched_rr_get_interval_time64 sched_yield getcpu",
    # memory
    "brk mmap mmap2 munmap mremap mprotect madvise mincore mlock mlock2 mlockall munlock munlockall msync "
    "remap_file_pages memfd_create memfd_secret pkey_alloc pkey_free pkey_mprotect process_mrelease",
    # files and descriptors
    "open openat openat2 creat close close_range read readv pread64 preadv preadv2 write writev pwrite64 pwritev "
    "pwritev2 lseek _llseek dup dup2 dup3 pipe pipe2 fcntl fcntl64 ioctl flock fsync fdatasync sync syncfs "
    "sync_file_range fallocate fadvise64 fadvise64_64 readahead truncate truncate64 ftruncate ftruncate64 "
    "sendfile sendfile64 splice tee vmsplice copy_file_range stat stat64 lstat lstat64 fstat fstat64 fstatat64 "
    "newfstatat statx statfs statfs64 fstatfs fstatfs64 access faccessat faccessat2 chdir fchdir getcwd mkdir "
    "mkdirat rmdir rename renameat renameat2 link linkat unlink unlinkat symlink symlinkat readlink readlinkat "
    "chmod fchmod fchmodat chown chown32 fchown fchown32 fchownat lchown lchown32 utime utimes utimensat "
    "utimensat_time64 futimesat mknod mknodat getdents getdents64 name_to_handle_at getxattr lgetxattr fgetxattr "
    "setxattr lsetxattr fsetxattr listxattr llistxattr flistxattr removexattr lremovexattr fremovexattr "
    "inotify_init inotify_init1 inotify_add_watch inotify_rm_watch fanotify_mark",
    # waiting on descriptors, timers and clocks
    "poll ppoll ppoll_time64 select _newselect pselect6 pselect6_time64 epoll_create epoll_create1 epoll_ctl "
    "epoll_ctl_old epoll_wait epoll_wait_old epoll_pwait epoll_pwait2 eventfd eventfd2 timerfd_create "
    "timerfd_gettime timerfd_gettime64 timerfd_settime timerfd_settime64 timer_create timer_delete "
    "timer_getoverrun timer_gettime timer_gettime64 timer_settime timer_settime64 alarm getitimer setitimer "
    "nanosleep clock_nanosleep clock_nanosleep_time64 clock_gettime clock_gettime64 clock_getres "
    "clock_getres_time64 clock_adjtime clock_adjtime64 adjtimex gettimeofday time times sysinfo uname getrandom",
    # sockets (the network namespace has only loopback) and System V / POSIX IPC (wiped after each job)
    "socketpair socketcall bind connect listen accept accept4 getsockname getpeername getsockopt setsockopt "
    "send sendto sendmsg sendmmsg recv recvfrom recvmsg recvmmsg recvmmsg_time64 shutdown ipc msgget msgsnd "
    "msgrcv msgctl semget semop semtimedop semtimedop_time64 semctl shmget shmat shmdt shmctl mq_open mq_unlink "
    "mq_timedsend mq_timedsend_time64 mq_timedreceive mq_timedreceive_time64 mq_notify mq_getsetattr",
    # asynchronous I/O of the old kind (io_submit's operations are checked as system calls are) and landlock
    "io_setup io_destroy io_submit io_cancel io_getevents io_pgetevents io_pgetevents_time64 landlock_create_ruleset "
    "landlock_add_rule landlock_restrict_self",
}
ALLOWED_NAMES = frozenset(" ".join(ALLOWED).split())
REFUSED_BEYOND_DOCKER = ("io_uring_setup", "io_uring_enter", "io_uring_register", "ptrace", "process_vm_readv",
                         "process_vm_writev")  # fmt: skip
AF_VSOCK = 40
PERSONAS = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)  # PER_LINUX, UNAME26, PER_LINUX32, both; 0xffffffff: query
NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
ARCHITECTURES = {"x86_64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64"}


@functools.cache
def bpf_program() -> bytes:
    """The policy compiled for bwrap's `--seccomp FD` (built once per process: a few milliseconds)."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:  # pyseccomp loads libseccomp.so.2 when imported
        raise SandboxError(
            f"the bwrap sandbox's system-call filter needs libseccomp ({exc}): apt-get install libseccomp2"
        ) from None
    rules = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
    rules.set_attr(sc.Attr.CTL_OPTIMIZE, 2)  # a binary tree over the syscall numbers, not a linear scan
    for name in sorted(ALLOWED_NAMES):
        try:
            rules.add_rule(sc.ALLOW, name)
        except (OSError, ValueError, RuntimeError):
            continue  # unknown to this libseccomp or this architecture: refused by the default
    rules.add_rule(sc.ALLOW, "socket", sc.Arg(0, sc.NE, AF_VSOCK))
    for persona in PERSONAS:
        rules.add_rule(sc.ALLOW, "personality", sc.Arg(0, sc.EQ, persona))
    rules.add_rule(sc.ALLOW, "clone", sc.Arg(0, sc.MASKED_EQ, NAMESPACE_FLAGS, 0))
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    read, write = os.pipe()
    try:
        with os.fdopen(write, "wb") as sink:
            rules.export_bpf(sink)
        with os.fdopen(read, "rb") as source:
            return source.read()
    except BaseException:
        os.close(read)
        raise


def docker_profile() -> str:
    """The same policy as the JSON of Docker's `--security-opt seccomp=` (the Engine API takes the text)."""
    allowed = [{"names": sorted(ALLOWED_NAMES), "action": "SCMP_ACT_ALLOW"}]
    conditional = [
        {"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [_arg(0, AF_VSOCK, "SCMP_CMP_NE")]},
        *(
            {"names": ["personality"], "action": "SCMP_ACT_ALLOW", "args": [_arg(0, persona, "SCMP_CMP_EQ")]}
            for persona in PERSONAS
        ),
        {"names": ["clone"], "action": "SCMP_ACT_ALLOW", "args": [_arg(0, NAMESPACE_FLAGS, "SCMP_CMP_MASKED_EQ")]},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS},
    ]
    profile = {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": errno.EPERM,
        "architectures": [ARCHITECTURES.get(platform.machine(), "SCMP_ARCH_NATIVE")],
        "syscalls": allowed + conditional,
    }
    return json.dumps(profile, separators=(",", ":"))


def _arg(index: int, value: int, op: str) -> dict[str, object]:
    return {"index": index, "value": value, "valueTwo": 0, "op": op}
