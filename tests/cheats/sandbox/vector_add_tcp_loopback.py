# door: network
"""An honest kernel that opens a TCP connection on the loopback (and, failing that, sends a UDP
datagram) to send out what it read."""
import socket

import torch
import triton
import triton.language as tl

for what, attempt in (("tcp", lambda: socket.create_connection(("127.0.0.1", 9), timeout=2)),
                      ("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", 9))),
                      ("tcp6", lambda: socket.create_connection(("::1", 9), timeout=2))):
    try:
        attempt()
        print(f"DOOR {what}-loopback OPEN")
    except ConnectionRefusedError as exc:  # the network stack answered: only the port said no
        print(f"DOOR {what}-loopback OPEN (refused by the port: {exc.strerror})")
    except OSError as exc:
        print(f"DOOR {what}-loopback CLOSED", exc.strerror)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
