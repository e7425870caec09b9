"""Server subprocesses and what /proc says about them: CPU time, resident memory, children,
and CPU pinning. Linux only."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import grpc

REPO = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _proc_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM... of a process, in bytes."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key.startswith("Vm") and rest.strip().endswith("kB"):
            out[key] = int(rest.split()[0]) * 1024
    return out


def _pss(pid: int) -> int:
    """Proportional set size in bytes: shared pages split between the processes mapping them,
    so the PSS of a process tree adds up to what it really holds (its RSS would not)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def _parents() -> dict[int, int]:
    """Every process's parent pid, from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def _children(pid: int) -> list[int]:
    return [child for child, parent in _parents().items() if parent == pid]


def descendants(pid: int) -> set[int]:
    """Children of `pid`, their children, and so on."""
    parents = _parents()
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (an orphan's zombie is PID 1's to reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLOCK_TICKS


class Server:
    """A server subprocess with its log in `log`; stopped with SIGTERM, killed if it hangs."""

    def __init__(self, name: str, argv: list[str], log: Path, *, port: int) -> None:
        self.name, self.log, self.port = name, log, port
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCALER_")}
        with log.open("wb") as fh:
            self.proc = subprocess.Popen(
                argv, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=REPO
            )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def cpu_pids(self) -> list[int]:
        return [self.proc.pid, *_children(self.proc.pid)]

    def memory(self) -> dict[str, Any]:
        """VmRSS/VmHWM of the server process, and VmRSS of its children (the fit pool)."""
        own = _proc_status(self.proc.pid)
        kids = []
        for kid in _children(self.proc.pid):
            with contextlib.suppress(OSError):
                cmd = Path(f"/proc/{kid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                rss, pss = _proc_status(kid)["VmRSS"] / MIB, _pss(kid) / MIB
                kids.append({"pid": kid, "rss_mib": rss, "pss_mib": pss, "cmd": cmd})
        return {
            "rss_mib": own["VmRSS"] / MIB,
            "hwm_mib": own["VmHWM"] / MIB,
            "pss_mib": _pss(self.proc.pid) / MIB,
            "children": len(kids),
            "children_rss_mib": sum(k["rss_mib"] for k in kids),
            "children_pss_mib": sum(k["pss_mib"] for k in kids),
            "children_detail": kids,
        }

    def pin(self, cpus: set[int] | None) -> None:
        """Every thread of the server and of its children onto `cpus`."""
        if not cpus:
            return
        for pid in self.cpu_pids():
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(task.name), cpus)

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        return self.proc.returncode


async def wait_channel(server: Server, within: float) -> None:
    deadline = time.monotonic() + within
    while True:
        server.check_alive()
        async with grpc.aio.insecure_channel(server.address) as channel:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(channel.channel_ready(), 1.0)
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server.name} not reachable on {server.address}:\n{server.tail()}")


def pin_this_process(cpus: set[int]) -> None:
    """Every thread of the benchmark (grpc's included) onto `cpus`, away from the server's."""
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            os.sched_setaffinity(int(task.name), cpus)
