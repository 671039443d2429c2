"""A throwaway redis-server on a free local port, for the remote cache's tests and benchmark.

Install the server with `apt-get install -y redis-server` (scripts/test.sh does).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Final

SERVER: Final = "redis-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RedisServer:
    """`redis-server` started on a free port with no persistence, in `directory`."""

    def __init__(self, directory: Path, maxmemory: str = "0") -> None:
        binary = shutil.which(SERVER)
        if binary is None:
            raise FileNotFoundError(f"{SERVER} is not on PATH (apt-get install -y redis-server)")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "no", "--dir", str(directory), "--maxmemory", maxmemory]
        args += ["--maxmemory-policy", "noeviction"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{SERVER} exited with {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{SERVER} did not answer on port {self.port} within {timeout} s")

    def stop(self) -> None:
        """Kill the server (abruptly, as a crash would)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
