"""The isolation probes' hostile programs (`probes.py` says what each must achieve): each tries to read what it
must not, leave something behind for the next job, or change the harness it runs in.
"""

EXPECTED_PREFIX = "EXPECTED-"  # the shape of the probes' hidden expected output


# Searches the job's own objects (frames up the stack, every object the collector knows) and every process's
# memory it can open through /proc for anything shaped like an expected output, and prints what it finds.
HUNT_EXPECTED_OUTPUT = f"""import gc, os, re, sys
pattern = re.compile(rb"{EXPECTED_PREFIX}[0-9a-f]{{32}}")
found = set()
def look(value):
    text = value if isinstance(value, (bytes, bytearray)) else str(value).encode(errors="replace")
    found.update(m.decode() for m in pattern.findall(text))
frame = sys._getframe()
while frame is not None:
    for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
        look(repr(value)[:100000])
    frame = frame.f_back
for obj in gc.get_objects():
    if isinstance(obj, (dict, list, tuple)):
        look(repr(obj)[:100000])
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        maps = open(f"/proc/{{pid}}/maps").read().splitlines()
        mem = open(f"/proc/{{pid}}/mem", "rb", 0)
    except OSError:
        continue
    for line in maps:
        start, end = (int(x, 16) for x in line.split()[0].split("-"))
        if "r" in line.split()[1] and end - start < 1 << 28:
            try:
                mem.seek(start)
                look(mem.read(end - start))
            except (OSError, ValueError, OverflowError):
                pass
print(sorted(found)[0] if found else "none found")"""

FILL_SCRATCH = """import os
written = {}
for folder in ("/tmp", "/dev/shm"):
    written[folder] = 0
    try:
        for i in range(10**6):
            with open(f"{folder}/fill-{i}", "wb") as f:
                f.write(b"x" * (1 << 20))
            written[folder] += 1
    except OSError:
        pass
print(written)"""

CLEAN_SLATE = """import os
left = {f: os.listdir(f) for f in ("/tmp", "/dev/shm") if os.path.isdir(f)}
for i in range(16):  # room for 8 MiB again (files are capped at the output limit, 1 MiB)
    with open(f"/tmp/room-{i}", "wb") as f:
        f.write(b"x" * (512 << 10))
print("ok" if not any(left.values()) else left)"""

DAEMON = """import ctypes, os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, b"tt-probe-daemon", 0, 0, 0)
        time.sleep(600)
    os._exit(0)
time.sleep(0.2)
print("forked")"""

NO_DAEMON = """import os
names = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        names.append(open(f"/proc/{pid}/comm").read().strip())
    except OSError:
        pass
print("ok" if "tt-probe-daemon" not in names else names)"""

SYSV = """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.shmget(0, 1 << 20, 0o1000 | 0o600), libc.semget(0, 1, 0o1000 | 0o600), libc.msgget(0, 0o1000 | 0o600))"""

NO_SYSV = """entries = []
for kind in ("shm", "sem", "msg"):
    try:
        entries += open(f"/proc/sysvipc/{kind}").read().strip().splitlines()[1:]
    except OSError:
        pass
print("ok" if not entries else entries)"""

NOTHING_ELSE_WRITABLE = """import os
allowed = ("/tmp", "/dev/shm", "/dev/mqueue", "/proc", "/sys", "/dev/pts")
writable = []
for line in open("/proc/self/mounts"):
    point = line.split()[1]
    if point in allowed or point.startswith(("/proc/", "/sys/")) or not os.path.isdir(point):
        continue
    try:
        with open(os.path.join(point, ".probe"), "w") as f:
            f.write("x")
        writable.append(point)
    except OSError:
        pass
print("ok" if not writable else writable)"""


# Writes to every descriptor it holds beyond stdio: the harness's report channel among them.
def _report_writer(payload: str) -> str:
    return f"""import os
for fd in range(3, 256):
    try:
        os.write(fd, {payload})
    except OSError:
        pass
print("ok")"""


FORGED_REPORT = _report_writer(
    """b'{"index": 0, "status": "pwned", "stdout": [1, 2], "seconds": "soon", "error": null, "result": null}\\n'"""
)
GARBAGE_REPORT = _report_writer("b'garbage that is not JSON' * 100 + b'\\n'")
FLOOD_REPORT = """import os
chunk = b"x" * (1 << 20)
for fd in range(3, 256):
    try:
        os.fstat(fd)
    except OSError:
        continue
    try:
        for _ in range(64):  # 64 MiB without a newline
            os.write(fd, chunk)
    except OSError:
        pass
print("ok")"""

# The report pipe made to block again, then more printed than a pipe holds: the job process's report can no
# longer nudge the supervisor when the pipe is full (it waits in its write), so the supervisor must drain it
# unasked.
BLOCKING_REPORT = """import os
for fd in range(3, 256):
    try:
        os.set_blocking(fd, True)
    except OSError:
        pass
print("ok" + " " * 300000)"""
# Every pipe it holds but the first (its report pipe) closed: the nudge at the job's end never comes.
NO_NUDGE = """import os, stat
pipes = []
for fd in range(3, 256):
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            pipes.append(fd)
    except OSError:
        pass
for fd in pipes[1:]:
    os.close(fd)
print("ok")"""

DEEP_TREE = """import os
os.chdir("/tmp")
for i in range(3000):
    os.mkdir("d")
    os.chdir("d")
os.symlink("/tmp", "loop")
os.symlink("loop2", "loop1")
os.symlink("loop1", "loop2")
os.mkdir("locked")
open("locked/file", "w").write("x")
os.chmod("locked", 0)
os.chdir("/tmp")
os.mkdir("/tmp/shut")
os.chmod("/tmp/shut", 0)
print("built")"""

STOP_ZYGOTE = """import os, signal
os.kill(os.getppid(), signal.SIGSTOP)  # the job process's parent is the zygote
print("stopped it")"""

MQUEUE = """import ctypes, os
rt = ctypes.CDLL("librt.so.1", use_errno=True)
rt.mq_open.restype = ctypes.c_int
q = rt.mq_open(b"/tt-probe", os.O_CREAT | os.O_RDWR, 0o600, None)
print(q, rt.mq_send(q, b"left behind", 11, 0) if q >= 0 else "no queue")"""

NO_MQUEUE = """import ctypes, os
rt = ctypes.CDLL("librt.so.1", use_errno=True)
rt.mq_open.restype = ctypes.c_int
q = rt.mq_open(b"/tt-probe", os.O_RDONLY)
print("ok" if q < 0 else "read a queue an earlier job left")"""

KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}  # add_key, keyctl
KEYRING_KEY = """import ctypes, os
add_key, keyctl = {numbers}.get(os.uname().machine, (None, None))
libc = ctypes.CDLL(None, use_errno=True)
made = []
for ring in (-3, -4, -5):  # session, user and user-session keyrings
    if add_key is not None:
        made.append(libc.syscall(add_key, b"user", b"tt-probe-%d" % -ring, b"left behind", 11, ring))
print(made)"""

NO_KEYRING_KEY = """import ctypes, os
add_key, keyctl = {numbers}.get(os.uname().machine, (None, None))
libc = ctypes.CDLL(None, use_errno=True)
found = []
for ring in (-3, -4, -5):
    if keyctl is not None:
        for name in (3, 4, 5):  # KEYCTL_SEARCH: a key the earlier job made, in any keyring we can reach
            key = libc.syscall(keyctl, 10, ring, b"user", b"tt-probe-%d" % name, 0)
            if key >= 0:
                found.append(name)
print("ok" if not found else f"found keys {{found}}")"""

# The filter the program runs under (2: a seccomp filter) and the kernel's second way in that it must refuse:
# io_uring_setup has one number on every architecture; the program never submits anything.
SYSCALL_FILTERED = """mode = [line.split()[1] for line in open("/proc/self/status") if line.startswith("Seccomp:")]
print("ok" if mode == ["2"] else f"Seccomp: {mode}")"""

IO_URING = """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)  # struct io_uring_params
ring = libc.syscall(425, 4, params)
print("ok" if ring < 0 else "an io_uring was set up")"""

TRACE_ANOTHER = """import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
child = os.fork()
if child == 0:
    time.sleep(5)
    os._exit(0)
attached = libc.ptrace(16, child, 0, 0)  # PTRACE_ATTACH
os.kill(child, 9)
print("ok" if attached != 0 else "attached to another process")"""

# Opens (never writes) every host kernel setting a root-mapped uid could change.
HOST_KERNEL_SETTINGS = """import os
writable = []
paths = ["/proc/sysrq-trigger", "/proc/sys/vm/drop_caches", "/proc/sys/kernel/core_pattern"]
for folder, _, files in os.walk("/proc/sys"):
    paths += [os.path.join(folder, f) for f in files]
for path in paths:
    if path.startswith("/proc/sys/net/"):
        continue  # the sandbox's own network namespace
    try:
        os.close(os.open(path, os.O_WRONLY))
        writable.append(path)
    except OSError:
        pass
print("ok" if not writable else writable[:5])"""

# Children that leave their session spin for a second each; the CPU they got together must fit one CPU.
CPU_HOG_CHILDREN = """import os, time
readers = []
for _ in range(4):
    read, write = os.pipe()
    if os.fork() == 0:
        os.setsid()
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            pass
        os.write(write, str(time.process_time()).encode())
        os._exit(0)
    os.close(write)
    readers.append(read)
used = sum(float(os.read(r, 64) or 0) for r in readers)
print("ok" if used <= 1.35 else f"{used:.2f} CPU-seconds in 1 s")"""

# Each changes, for good, what every later job process would inherit from the zygote (the job process's parent)
# and the supervisor (PID 1): their resource limits, nice value and policy, or CPUs. Unprivileged, a process may
# do this to any other of its uid. The matching checks below look for the change in a later job.
LOWER_HARNESS_LIMITS = """import os, resource
for pid in (1, os.getppid()):
    for limit, value in ((resource.RLIMIT_NOFILE, 77), (resource.RLIMIT_CPU, 3)):
        try:
            resource.prlimit(pid, limit, (value, value))
        except (OSError, ValueError):
            pass
print("lowered")"""

LOWER_HARNESS_PRIORITY = """import os
for pid in (1, os.getppid()):
    for change in (lambda: os.setpriority(os.PRIO_PROCESS, pid, 13),
                   lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))):
        try:
            change()
        except OSError:
            pass
print("lowered")"""

# ioprio_set/ioprio_get (no libc wrapper); the idle I/O class (3 << 13) set on the zygote once reached every later
# job of the worker on both backends
IOPRIO = {"x86_64": (251, 252), "aarch64": (30, 31)}
LOWER_HARNESS_IO_PRIORITY = """import ctypes, os
ioprio_set = {ioprio}.get(os.uname().machine, (None, None))[0]
libc = ctypes.CDLL(None, use_errno=True)
for pid in (1, os.getppid()):
    if ioprio_set is not None:
        libc.syscall(ioprio_set, 1, pid, 3 << 13)
print("lowered")"""

HARNESS_IO_PRIORITY_INTACT = """import ctypes, os
ioprio_get = {ioprio}.get(os.uname().machine, (None, None))[1]
libc = ctypes.CDLL(None, use_errno=True)
idle = [pid for pid in (0, 1, os.getppid()) if ioprio_get is not None and libc.syscall(ioprio_get, 1, pid) >> 13 == 3]
print("ok" if not idle else f"I/O priority idle in {{idle}}")"""

NARROW_HARNESS_CPUS = """import os
for pid in (1, os.getppid()):
    try:
        os.sched_setaffinity(pid, {min(os.sched_getaffinity(pid))})
    except OSError:
        pass
print("narrowed")"""

# This job process, its zygote and the supervisor: no limit, priority or CPU set that the programs above leave.
HARNESS_LIMITS_INTACT = """import os, resource
changed = [pid for pid in (0, 1, os.getppid()) if resource.prlimit(pid, resource.RLIMIT_NOFILE)[1] == 77]
print("ok" if not changed else f"limits changed in {changed}")"""

HARNESS_PRIORITY_INTACT = """import os
changed = [pid for pid in (0, 1, os.getppid())
           if os.getpriority(os.PRIO_PROCESS, pid) == 13 or os.sched_getscheduler(pid) == os.SCHED_IDLE]
print("ok" if not changed else f"priority changed in {changed}")"""

HARNESS_CPUS_INTACT = """import os
narrowed = [pid for pid in (0, 1, os.getppid()) if len(os.sched_getaffinity(pid)) == 1]
print("ok" if not narrowed or os.cpu_count() == 1 else f"CPUs narrowed in {narrowed}")"""
