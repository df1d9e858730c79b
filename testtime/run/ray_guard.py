"""A guard for the Ray instance a driver starts itself (`--ray local`): its processes end with the driver.

Ray's local head (GCS, raylet, log monitor) notices a dead driver, but the agents the raylet starts (the
dashboard and runtime-env agents) are re-parented to init and live on after a `kill -9` of the driver. The
guard is a small process that holds the read end of a pipe whose write end only the driver has: it notes the
driver's descendants every half second while the driver lives, and when the pipe closes (the driver exited,
however it died) it kills those of them still alive (matched by start time, so a recycled pid is spared).
"""

from __future__ import annotations

import os
import subprocess
import sys

GUARD_SOURCE = """
import os, select, signal, sys, time
import psutil

driver, read_fd = int(sys.argv[1]), int(sys.argv[2])
known = {}
while True:
    ready, _, _ = select.select([read_fd], [], [], 0.5)
    if ready and not os.read(read_fd, 1):
        break  # the driver's end closed: it is gone
    try:
        for child in psutil.Process(driver).children(recursive=True):
            if child.pid != os.getpid():
                known[child.pid] = child.create_time()
    except psutil.Error:
        break
time.sleep(1.0)  # a clean exit's own shutdown goes first
for pid, started in known.items():
    try:
        process = psutil.Process(pid)
        if process.create_time() == started:
            process.kill()
    except psutil.Error:
        continue
"""


def guard_descendants() -> None:
    """Start the guard for this process (once per process; the pipe's write end stays open until exit)."""
    global _guard
    if _guard is not None:
        return
    read_fd, write_fd = os.pipe()
    os.set_inheritable(read_fd, True)
    _guard = subprocess.Popen(
        [sys.executable, "-c", GUARD_SOURCE, str(os.getpid()), str(read_fd)],
        pass_fds=(read_fd,),
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C to the driver's group does not end the guard before it acts
    )
    os.close(read_fd)
    os.set_inheritable(write_fd, False)  # Ray's processes must not hold it open, or the guard never wakes


_guard: subprocess.Popen[bytes] | None = None
