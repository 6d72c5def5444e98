#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A UDP port exposure with real datagrams (issue 21 item 6): a real Debian image
(tests/harness/realimages.py "user1000": minbase, whose perl-base has IO::Socket::INET)
runs a UDP echo server as its user 1000; a client in a namespace of its own, outside
the node's, sends datagrams to the node's public address and external port and gets
each echo back through the DNAT (the reply leaves through the same rule's connection
tracking, from the public address and port); after app.exposure.remove the rule is gone
and a datagram gets no answer. The image is built (downloads) before the case enters
its private network namespace, and cached."""
import os
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "harness"))
from nodeagent_harness import SRC, check, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import app_job, deploy_params, need_root, ok, output, texts  # noqa: E402
from test_app_net import CLIENT, PUBLIC, TABLE, app_addr, client_ns, net_conf  # noqa: E402

REALIMAGES = os.path.join(SRC, "tests", "harness", "realimages.py")
IMAGE = "user1000"
PORT, EXTERNAL = 8081, 20005

# Each datagram comes back as "echo <datagram>" to whoever sent it.
ECHO_SERVER = ("use IO::Socket::INET; $| = 1; "
               f"my $s = IO::Socket::INET->new(LocalPort => {PORT}, Proto => 'udp') or die \"bind: $!\"; "
               "print \"ready\\n\"; "
               "while (1) { my $d; my $peer = $s->recv($d, 2048); next unless defined $peer; "
               "$s->send(\"echo $d\", 0, $peer); }")

# Run in the client's namespace by the host's Python: send one datagram, print the
# answer and the address it came from, or "timeout".
CLIENT_PY = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(float(sys.argv[4]))
s.bind((sys.argv[1], 0))
s.sendto(sys.argv[3].encode(), (sys.argv[2], %d))
try:
    data, addr = s.recvfrom(2048)
    print(data.decode(), addr[0], addr[1])
except socket.timeout:
    print("timeout")
""" % EXTERNAL


def udp_conf(s):
    conf = net_conf(s)
    subprocess.run([sys.executable, REALIMAGES, "install", IMAGE, "--images-dir", conf["apps"]["images_dir"]],
                   check=True, capture_output=True)
    return conf


def datagram(client, text, timeout=1.0):
    r = subprocess.run(["nsenter", "-t", str(client.pid), "-n", "/usr/bin/python3", "-c", CLIENT_PY, CLIENT, PUBLIC,
                        text, str(timeout)], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0, r)
    return r.stdout.strip()


def exposure_chain():
    return subprocess.run(["nft", "list", "chain", "inet", TABLE, "exposures"], capture_output=True,
                          text=True).stdout


@needs("root")
@with_setup(agent_conf=udp_conf)
def udp_echo(s):
    need_root()
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(
        name="udp", hostname="udp", template={"image": f"{IMAGE}:1", "command": ["/usr/bin/perl", "-e", ECHO_SERVER],
                                               "startedPattern": "^ready$", "stop": None}), timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_for(lambda: "ready" in texts(output(s, app)), 20, "the echo server's ready line")
    client = client_ns()
    try:
        u = str(uuid.uuid4())
        exp = ok(app_job(s, "app.exposure.add", app, {"exposureId": u, "type": "port", "containerPort": PORT,
                                                     "externalPort": EXTERNAL, "protocol": "udp"}))
        check(exp["externalPort"] == EXTERNAL and exp["protocol"] == "udp", exp)
        check(f"udp dport {EXTERNAL} dnat ip to {app_addr(s, app)}:{PORT}" in exposure_chain(), exposure_chain())
        # A datagram in, its echo out: from the public address and the external port (the
        # reply un-NATed by the connection the DNAT made), to the client's own port.
        answers = []

        def echoed(text):
            answers.append(datagram(client, text))
            return answers[-1] if answers[-1] != "timeout" else None
        got = wait_for(lambda: echoed("ping-1"), 20, f"an echo of ping-1 (answers: {answers})")
        check(got == f"echo ping-1 {PUBLIC} {EXTERNAL}", got)
        for i in range(2, 6):
            got = datagram(client, f"ping-{i}", timeout=5)
            check(got == f"echo ping-{i} {PUBLIC} {EXTERNAL}", got)
        big = "x" * 1400
        check(datagram(client, big, timeout=5) == f"echo {big} {PUBLIC} {EXTERNAL}", "a 1400-byte datagram")
        # Removed: the rule is gone and datagrams get no answer.
        ok(app_job(s, "app.exposure.remove", app, {"exposureId": u}))
        chain = exposure_chain()
        check(f"udp dport {EXTERNAL}" not in chain and "dnat" not in chain, chain)
        check(datagram(client, "after-remove", timeout=2) == "timeout", "an answer after the exposure's removal")
        check(ok(app_job(s, "app.exposure.list", app)) == [], "exposures left")
        ok(app_job(s, "app.delete", app))
    finally:
        client.kill()
        client.wait()


CASES = {"udp_echo": udp_echo}

if __name__ == "__main__":
    # Built here, in the host's network namespace, before the case enters its private one.
    if sys.argv[1:2] == ["udp_echo"] and os.geteuid() == 0:
        if subprocess.run([sys.executable, REALIMAGES, "build", IMAGE]).returncode != 0:
            sys.exit(1)
    sys.exit(run_cases(CASES))
