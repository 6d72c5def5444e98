#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""SFTP upload benchmark (issue 11, item 8). Prints figures beside the peer; asserts
nothing about timing. Root only (exit 77 otherwise): loop-mounted volumes.

One file of SIZE MB (random bytes, made once in the page cache) is uploaded with
OpenSSH's `sftp -b` (key login, the client's default cipher: chacha20-poly1305, and
with --cipher another one both servers offer) to
  - nodeagent-sftpd: the credentials file of an app whose volume is a fresh
    loop-mounted ext4 of SIZE x 1.125 + 128 MB owned by a mapped uid, exactly what the agent
    writes; the upload runs through the confined session (app uid, seccomp) and the
    safe path layer;
  - the peer, OpenSSH's own sshd with its sftp-server (Subsystem sftp
    /usr/lib/openssh/sftp-server), started privately on another loopback port with
    its own config, host key and authorized key (no system service is involved),
    writing into an identical fresh loop-mounted ext4.
Each upload is run RUNS times, alternating servers; the best and the median MB/s of
each are printed, and the ratio of the medians (target >= 0.8x OpenSSH). The time is
the whole `sftp -b` run (connection, key exchange and login included: about 0.1 s).

Run: sudo python3 bench/app-sftp/bench_sftp.py [--size-mb 1024] [--runs 3] [--cipher aes128-gcm@openssh.com]
NA_BUILD_DIR picks the build (default <source>/build).
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("NA_BUILD_DIR", os.path.join(SRC, "build"))
SFTPD = os.path.join(BUILD, "sftp", "nodeagent-sftpd")
SSHD = "/usr/sbin/sshd"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
UID = 1000000000 + 65536 * 7  # a mapped app uid, as app-ids.c hands out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what):
    for _ in range(200):
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{what} is not listening on {port}")


def volume(tmp, name, size_mb, owner):
    img, mnt = os.path.join(tmp, name + ".img"), os.path.join(tmp, name)
    os.makedirs(mnt)
    with open(img, "wb") as f:
        f.truncate((size_mb + size_mb // 8 + 128) << 20)  # room for the journal and inode tables
    subprocess.run(["/sbin/mkfs.ext4", "-q", "-m", "0", "-F", img], check=True)
    subprocess.run(["/bin/mount", "-o", "loop,nosuid,nodev", img, mnt], check=True)
    vol = os.path.join(mnt, "volume")
    os.makedirs(vol)
    os.chown(vol, owner, owner)
    return mnt, vol


def upload(port, user, key, local, cipher, cwd):
    batch = os.path.join(cwd, "batch")
    with open(batch, "w") as f:
        f.write(f"put {local} upload.bin\nrm upload.bin\n")
    cmd = ["/usr/bin/sftp", "-b", batch, "-P", str(port), "-i", key, "-o", "IdentitiesOnly=yes",
           "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]
    if cipher:
        cmd += ["-o", f"Ciphers={cipher}"]
    # The rm runs after the put: time the put alone with a second batch-free measure below.
    t0 = time.monotonic()
    r = subprocess.run(cmd + [f"{user}@127.0.0.1"], capture_output=True, text=True, cwd=cwd, timeout=3600)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"upload to {user}@{port} failed: {r.stdout}{r.stderr}")
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cipher", default=None)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skipped: needs root (loop-mounted volumes)")
        return 77
    for tool in (SFTPD, SSHD, SFTP_SERVER, "/usr/bin/sftp"):
        if not os.access(tool, os.X_OK):
            raise SystemExit(f"{tool} is missing (build, or scripts/deps.sh)")
    tmp = tempfile.mkdtemp(prefix="bench-sftp-")
    os.chmod(tmp, 0o755)
    procs, mounts = [], []
    try:
        key = os.path.join(tmp, "client_key")
        subprocess.run(["/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
        pub = open(key + ".pub").read().strip()
        local = os.path.join(tmp, "payload.bin")
        with open(local, "wb") as f:
            chunk = os.urandom(1 << 20)
            for i in range(a.size_mb):
                f.write(chunk[i % 7:] + chunk[:i % 7])

        # nodeagent-sftpd and its app.
        mnt, vol = volume(tmp, "app", a.size_mb, UID)
        mounts.append(mnt)
        users = os.path.join(tmp, "users")
        os.makedirs(users, 0o700)
        with open(os.path.join(users, "bench.json"), "w") as f:
            json.dump({"appId": "bench", "volumeDir": vol, "uid": UID, "gid": UID, "enabled": True,
                       "readOnly": False, "fileAccess": True, "passwordHash": None, "publicKeys": [pub]}, f)
        p1 = free_port()
        na = subprocess.Popen([SFTPD, "--listen", f"127.0.0.1:{p1}", "--users-dir", users, "--host-key",
                               os.path.join(tmp, "na_host_key")], stderr=open(os.path.join(tmp, "sftpd.log"), "w"))
        procs.append(na)
        wait_port(p1, na, "nodeagent-sftpd")

        # The peer: a private sshd with sftp-server, writing into its own volume.
        mnt2, vol2 = volume(tmp, "peer", a.size_mb, 0)
        mounts.append(mnt2)
        os.makedirs("/run/sshd", 0o755, exist_ok=True)  # sshd's privilege separation directory
        hk = os.path.join(tmp, "ssh_host_ed25519_key")
        subprocess.run(["/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hk], check=True)
        ak = os.path.join(tmp, "authorized_keys")
        with open(ak, "w") as f:
            f.write(pub + "\n")
        os.chmod(ak, 0o600)
        p2 = free_port()
        conf = os.path.join(tmp, "sshd_config")
        with open(conf, "w") as f:
            f.write(f"Port {p2}\nListenAddress 127.0.0.1\nHostKey {hk}\nPidFile none\nUsePAM no\n"
                    f"PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                    f"AuthorizedKeysFile {ak}\nStrictModes no\nSubsystem sftp {SFTP_SERVER} -d {vol2}\n"
                    f"LogLevel ERROR\n")
        peer = subprocess.Popen([SSHD, "-D", "-e", "-f", conf], stderr=open(os.path.join(tmp, "sshd.log"), "w"))
        procs.append(peer)
        wait_port(p2, peer, "sshd")

        cwd = os.path.join(tmp, "client")
        os.makedirs(cwd)
        ours, theirs = [], []
        for _ in range(a.runs):
            ours.append(a.size_mb / upload(p1, "bench", key, local, a.cipher, cwd))
            theirs.append(a.size_mb / upload(p2, "root", key, local, a.cipher, cwd))
        cipher = a.cipher or "client default (chacha20-poly1305@openssh.com)"
        print(f"SFTP upload of {a.size_mb} MB, {a.runs} runs each, cipher {cipher} (put + rm, login included)")
        print(f"  nodeagent-sftpd:          best {max(ours):8.1f} MB/s   median {statistics.median(ours):8.1f} MB/s")
        print(f"  OpenSSH sshd+sftp-server: best {max(theirs):8.1f} MB/s   median {statistics.median(theirs):8.1f} MB/s")
        print(f"  ratio (medians): {statistics.median(ours) / statistics.median(theirs):.2f}x   (target >= 0.8x)")
        return 0
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for m in mounts:
            subprocess.run(["/bin/umount", m], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
