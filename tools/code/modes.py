"""Choosing the sandbox mode for this machine, and saying what it protects.

bwrap where it works; else Landlock (kernel >= 5.13); else user + mount namespaces;
else nothing runs unless the owner asked for CODE_SANDBOX=unsafe-basic.
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass

from tools.code.confine import SECCOMP_ARCH
from tools.code.sandbox import LAUNCHER_ARGV, Mode, bwrap_path, bwrap_works

INSTALL_BWRAP = "install bubblewrap (apt-get install bubblewrap)"


def bwrap_advice() -> str:
    """What to do for the full sandbox: install bubblewrap, or, when it is installed but
    refused here (a container without user namespaces), make it usable."""
    if bwrap_path() is None:
        return INSTALL_BWRAP
    return (
        "let the installed bubblewrap work (it was refused, see why above: it needs user "
        "namespaces, or root; in Docker, a seccomp profile that allows them)"
    )


@dataclass(frozen=True)
class Kernel:
    landlock_abi: int  # 0: no Landlock
    namespaces: bool  # user (or, as root, plain) mount/PID/net namespaces work


@functools.lru_cache(maxsize=1)
def probe_kernel() -> Kernel:
    """Asked of confine.py in a child, so the answer is exactly what a run will get."""
    argv = [*LAUNCHER_ARGV, "--probe"]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=10, env={})
        found = dict(item.split("=", 1) for item in res.stdout.split())
        return Kernel(int(found["landlock_abi"]), found["namespaces"] == "1")
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return Kernel(0, False)


def choose_mode(setting: str) -> tuple[Mode | None, str]:
    """The mode to use and a line saying why; None: no run is allowed, the line says why."""
    if setting == "off":
        return "off", "CODE_SANDBOX=off: no sandbox, only a clean environment"
    bwrap = bwrap_path()
    if bwrap is not None:
        problem = bwrap_works(bwrap)
        if problem is None:
            return "bwrap", f"bubblewrap at {bwrap}"
        no_bwrap = f"bwrap present but unusable ({problem})"
    else:
        no_bwrap = "bwrap not installed"
    k = probe_kernel()
    # Landlock leaves Unix sockets (and, without namespaces, the network) open: a seccomp
    # filter closes them, built for the arches confine.py knows.
    if k.landlock_abi >= 1 and os.uname().machine in SECCOMP_ARCH:
        return "landlock", f"Landlock ABI {k.landlock_abi}, {no_bwrap}"
    if k.namespaces:
        return "namespace", f"user/mount namespaces, no Landlock, {no_bwrap}"
    if setting == "unsafe-basic":
        return "basic", f"CODE_SANDBOX=unsafe-basic, {no_bwrap}, no Landlock or namespaces"
    return None, (
        f"Code execution is off because this machine offers no sandbox ({no_bwrap}, no "
        f"Landlock, no user namespaces): {INSTALL_BWRAP}, or set CODE_SANDBOX=unsafe-basic "
        "to run code with limits only and the whole filesystem readable."
    )


def protection(mode: Mode, network: bool, private_networks: bool = False) -> str:
    """What the mode guards, for the startup log and `sidekick doctor`."""
    k = probe_kernel() if mode in ("landlock", "namespace") else Kernel(0, False)
    if not network:
        net = "off"
    elif private_networks:
        net = "on, every address (CODE_NETWORK=all)"
    elif mode == "bwrap" or (mode in ("landlock", "namespace") and k.namespaces):
        net = "public addresses only (own network namespace, out through the egress proxy)"
    elif mode == "landlock":
        net = (
            "OFF: the public-only rule needs a network namespace, which this machine refuses "
            "(a seccomp filter denies every socket; CODE_NETWORK=all opens every address)"
        )
    else:
        net = "on, every address (the public-only rule needs a network namespace)"
    if mode in ("bwrap", "namespace"):
        view = "mount namespace with only" if mode == "namespace" else "only"
        files = f"files: {view} system dirs and a private 128 MiB /work and /tmp"
        procs = "processes: own PID namespace"
        net = net if network else "off (empty network namespace)"
    elif mode == "landlock":
        files = "files: Landlock, reads only runtime paths, writes only its work dir"
        files += ", a 128 MiB tmpfs" if k.namespaces else ", killed past 128 MiB"
        procs = "processes: own PID namespace" if k.namespaces else "processes: rlimits"
        if not network:
            net = "off (" + ("network namespace" if k.namespaces else "seccomp: no sockets") + ")"
    elif mode == "basic":
        files = "files: NOT protected, the code can read whatever the bot's user can"
        procs = "processes: rlimits, a throwaway uid when root"
        net = net if network else "off only when root (network namespace)"
    else:
        return "nothing: no limits, the code can read and write what the bot can"
    return f"{files}; network {net}; {procs}; limits: CPU, memory, file size, open files"


if __name__ == "__main__":  # `make install` says which sandbox runs without bwrap
    found, why = choose_mode("on")
    print(f"{found}: {why}; protects {protection(found, True)}" if found else why)
