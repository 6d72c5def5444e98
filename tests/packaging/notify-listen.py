# SPDX-License-Identifier: GPL-2.0-or-later
"""Stand-in for systemd's notification socket: receives sd_notify datagrams on a unix
socket and appends each to a file, one message a line, until killed."""
import os
import socket
import sys

path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o666)
with open(out, "a", buffering=1) as f:
    f.write("LISTENING\n")
    while True:
        msg = s.recv(4096).decode("utf-8", "replace")
        f.write(msg.replace("\n", " ") + "\n")
