"""The wrapper process bash_command runs its shell under; every descendant dies with the call.

Run as a script (`python -I -S process_reaper.py STATUS_FD COMMAND`, stdlib only, so it starts in
~20 ms), never imported by the package. It makes itself a child subreaper
(`prctl(PR_SET_CHILD_SUBREAPER)`), so whatever the command does to its session or process group
(`setsid`, `nohup`, `disown`, a double fork), an orphaned descendant is re-parented to this
process instead of init. It starts `bash -c COMMAND` with stdout/stderr on the call's output
pipe and writes `EXIT_CODE SUBREAPER` to STATUS_FD when the shell exits. Its stdin is the
control pipe: at EOF (the tool closed it, or the tool's process died) it SIGKILLs every
descendant found under it in /proc, reaps, and repeats until it has no child left, then kills
its own process group (itself included), which also covers the case where `prctl` is not
available and orphans went to init.

See docs/tools.md (Shell) for the guarantees and their limits.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

PR_SET_CHILD_SUBREAPER = 36
CLEANUP_SECONDS = 5.0
"""How long the cleanup keeps killing; only a process stuck in the kernel (state D) lasts it out."""


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants; False where prctl is unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> list[int]:
    """Pids of every live process below `root`, read from /proc (empty where /proc is missing)."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def kill_descendants() -> None:
    """SIGKILL and reap descendants until none is left (or CLEANUP_SECONDS have passed)."""
    deadline = time.monotonic() + CLEANUP_SECONDS
    me = os.getpid()
    while True:
        for pid in descendants(me):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return  # no child, live or zombie: as a subreaper, that means no descendant at all
        if time.monotonic() > deadline:
            return
        time.sleep(0.005)


def main(argv: list[str]) -> None:
    status_fd, command = int(argv[1]), argv[2]
    subreaper = become_subreaper()
    devnull = os.open(os.devnull, os.O_RDWR)
    shell = subprocess.Popen(["bash", "-c", command], stdin=devnull, stdout=1, stderr=2)

    def report() -> None:
        code = shell.wait()
        os.write(status_fd, f"{code} {int(subreaper)}\n".encode())
        os.close(status_fd)

    # The output pipe is the command's now: this process's copies would keep it open.
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    threading.Thread(target=report, daemon=True).start()
    try:
        while os.read(0, 4096):
            pass
    finally:
        kill_descendants()
        os.killpg(0, signal.SIGKILL)  # stragglers of the group; ends this process too


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM also cleans up
    main(sys.argv)
