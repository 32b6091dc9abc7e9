"""Free loopback ports for servers the tests start."""

from __future__ import annotations

import random
import socket

# Below Linux's ephemeral range (32768-60999 by default): a port the kernel hands out for bind(0) can be taken by
# any outgoing connection of another test worker before the server under test binds it.
_LOW, _HIGH = 20000, 32767


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, outside the range outgoing connections take theirs from."""
    for _ in range(200):
        port = random.randint(_LOW, _HIGH)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in {_LOW}-{_HIGH} after 200 tries")
