"""Loopback port allocation and readiness checks."""
import socket
import time


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago.  The kernel does not hand the
    same ephemeral port out again right away, which is good enough for
    daemons we start immediately afterwards."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_listening(host: str, port: int, timeout: float, alive=lambda: True) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"process died before listening on {host}:{port}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")
