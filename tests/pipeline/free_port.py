#!/usr/bin/env python3
"""Prints a TCP port free on 127.0.0.1 for a test's MASTER_PORT, drawn below
the kernel's ephemeral range (32768..) so that no outgoing connection of a
parallel test takes it between this check and the bind of rank 0."""
import random
import socket

while True:
    p = random.randrange(10000, 32000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        break
    except OSError:
        pass
    finally:
        s.close()
print(p)
