"""How a run is confined: the command line, the environment built from nothing, rlimits.

Modes, best first (modes.py chooses): `bwrap`, bubblewrap, in which the bot's database,
`.env`, `~/.ssh` and `/proc/<bot pid>` do not exist, and killing bwrap ends every process
the code started; `landlock` and `namespace`, the same built by confine.py where bwrap is
missing; `basic` (CODE_SANDBOX=unsafe-basic: clean environment, rlimits, as root a
throwaway uid; the filesystem stays readable); `off` (clean environment and work dir only).
A run with a network namespace of its own reaches only public addresses, through the egress
proxy (egress.py), unless CODE_NETWORK=all; Landlock alone cannot hold it to that, so there
the network is off; basic and off leave the host's network open, and say so.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import marshal
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

from tools.code.bun import BunInfo
from tools.code.confine import set_limits
from tools.code.egress import PROXY_PORT, RELAY_JS, SOCKET_NAME
from tools.code.files import INPUT_DIR, OUTPUT_DIR, io_dir

log = logging.getLogger(__name__)

Mode = Literal["bwrap", "landlock", "namespace", "basic", "off"]
CONFINED: tuple[Mode, ...] = ("landlock", "namespace")  # run through confine.py

# bun aborts at start with too little address space and runs without its JIT with a bit
# more (bench/code_exec.py --memory finds the thresholds): 3 GiB keeps the JIT and still
# stops a memory bomb at `RangeError: Out of memory`.
ADDRESS_SPACE_BYTES = 3 * 1024**3
FILE_SIZE_BYTES = 64 * 1024**2
OPEN_FILES = 256
# /work and /tmp are tmpfs of this size (RAM-backed), so the code cannot fill a disk.
WORK_SIZE_BYTES = 128 * 1024**2
# Per-run uid when we are root: RLIMIT_NPROC counts every task (threads too) of the
# real uid, and is ignored for root, so each concurrent slot gets its own uid.
SLOT_UID_BASE = 61000
TASKS_PER_RUN = 128  # bun's own threads, and room for a few child processes

WORK_IN_SANDBOX = "/work"
BUN_IN_SANDBOX = "/opt/bun/bun"
EGRESS_IN_SANDBOX = "/run/sidekick"  # the egress proxy's socket folder (egress.py)
RELAY_JS_IN_SANDBOX = "/opt/sidekick/forward.js"  # egress.py RELAY_JS
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = (
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
)
LAUNCHER_ARGV = [sys.executable, "-I", "-S", str(Path(__file__).with_name("launch.py"))]


@dataclass(frozen=True)
class Limits:
    cpu_s: int | None  # None: leave as is (likewise nproc and address_space)
    nproc: int | None
    address_space: int | None = ADDRESS_SPACE_BYTES
    file_size: int = FILE_SIZE_BYTES
    open_files: int = OPEN_FILES


@dataclass(frozen=True)
class Plan:
    """Everything needed to start one run."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    preexec: Callable[[], None] | None
    stdin_prefix: bytes = b""  # what confine.py reads before the program: its plan
    # bwrap's options and command, handed over on a pipe (`--args FD`) rather than on
    # its command line, which the code could read as /proc/1/cmdline (host paths).
    piped_args: tuple[str, ...] = ()
    args_at: int = 0  # where `--args FD` goes in argv: before the command


def egress_env(socket_folder: str) -> dict[str, str]:
    """Bun's fetch through forward.js to the proxy (both spellings: tools differ)."""
    proxy = f"http://127.0.0.1:{PROXY_PORT}"
    return {
        "HTTP_PROXY": proxy,
        "HTTPS_PROXY": proxy,
        "http_proxy": proxy,
        "https_proxy": proxy,
        "SIDEKICK_EGRESS_SOCKET": f"{socket_folder}/{SOCKET_NAME}",
    }


def relayed_argv(bun: BunInfo, path: str, relay_js: str, script: str = "-") -> list[str]:
    """Bun with forward.js preloaded; `-`: the code on stdin."""
    return [path, "run", "--preload", relay_js, *bun.run_flags, script]


def clean_env(home: str, tmp: str) -> dict[str, str]:
    """The child's whole environment. Never derived from os.environ: that holds the
    Telegram token and API keys; BUN_OPTIONS / NODE_OPTIONS could preload code."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "DO_NOT_TRACK": "1",
        "TZ": "UTC",
    }


def egress_capable(mode: Mode, namespaces: bool) -> bool:
    """Whether runs get a network namespace of their own, with the egress proxy its only way out."""
    return mode == "bwrap" or (mode in CONFINED and namespaces)


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def bwrap_works(bwrap: str) -> str | None:
    """None when bwrap can build our kind of sandbox here, else why not."""
    argv = [bwrap, *_system_binds(), "--proc", "/proc", "--dev", "/dev", "--unshare-pid"]
    argv += ["--perms", "1777", "--size", "1048576", "--tmpfs", "/tmp"]  # bwrap >= 0.5
    argv += ["--die-with-parent", "--clearenv", "/bin/true"]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None if res.returncode == 0 else (res.stderr.strip() or f"exit {res.returncode}")


# Runners built in this process so far; each gets its own block of 32 uids.
_runner_blocks = itertools.count()


def uid_block() -> int | None:
    """The first throwaway uid of a new runner's block, when we can switch uid (root +
    setpriv). Spread by pid and runner so two bots, a doctor run or parallel test runs
    on one host never share a uid: basic mode kills every process of the uid after a run."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    return SLOT_UID_BASE + ((os.getpid() * 31 + next(_runner_blocks)) % 2000) * 32


def own_task_count() -> int:
    """Our uid's tasks (threads) now: the base for RLIMIT_NPROC when we are not root."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                continue
    return count


def rlimit_argv(limits: Limits) -> list[str] | None:
    """`prlimit ... --` setting the limits, or None when it is missing. Preferred over a
    pre-exec hook: any preexec_fn makes Python fork() the bot's whole heap on every run."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        return None
    argv = [prlimit, f"--fsize={limits.file_size}", f"--nofile={limits.open_files}", "--core=0"]
    if limits.cpu_s is not None:
        argv.append(f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}")
    if limits.address_space is not None:
        argv.append(f"--as={limits.address_space}")
    if limits.nproc is not None:
        argv.append(f"--nproc={limits.nproc}")
    return [*argv, "--"]


def drop_uid_argv(uid: int | None) -> list[str]:
    if uid is None:
        return []
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--"]


def _system_binds() -> list[str]:
    # bwrap makes missing parent dirs 0700: the throwaway uid could not enter /etc, /opt.
    dirs = ("/etc", "/opt", "/opt/bun", "/opt/sidekick", "/run")
    out = [arg for d in dirs for arg in ("--perms", "0755", "--dir", d)]
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            out += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            out += ["--ro-bind", d, d]
    for f in ETC_FILES:
        out += ["--ro-bind-try", f, f]
    return out


def sealed(env: dict[str, str]) -> list[str]:
    """bwrap's closing options: its own namespaces, ended with its parent, only `env`."""
    argv = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    argv += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv"]
    return argv + [arg for key, value in env.items() for arg in ("--setenv", key, value)]


def build_plan(
    mode: Mode,
    bun: BunInfo,
    workdir: Path,
    *,
    network: bool,
    limits: Limits,
    uid: int | None,
    namespaces: bool = True,
    egress: Path | None = None,
) -> Plan:
    """One run in `workdir`. `namespaces`: whether confine.py tries them (False tests the
    Landlock-only path); `egress`: the proxy's socket folder, when the network goes through it."""
    egress = egress if network else None
    if mode == "bwrap":
        env = clean_env(WORK_IN_SANDBOX, "/tmp")
        if egress is not None:
            env |= egress_env(EGRESS_IN_SANDBOX)
        argv = [bwrap_path() or "bwrap", *_system_binds()]
        argv += ["--ro-bind", bun.path, BUN_IN_SANDBOX]
        size = str(WORK_SIZE_BYTES)
        # Sticky and world-writable, as the code may run as the throwaway uid in there.
        argv += ["--proc", "/proc", "--dev", "/dev"]
        for d in ("/tmp", WORK_IN_SANDBOX):
            argv += ["--perms", "1777", "--size", size, "--tmpfs", d]
        io = io_dir(workdir)
        argv += ["--ro-bind", str(io / INPUT_DIR), f"{WORK_IN_SANDBOX}/{INPUT_DIR}"]
        argv += ["--bind", str(io / OUTPUT_DIR), f"{WORK_IN_SANDBOX}/{OUTPUT_DIR}"]
        argv += ["--chdir", WORK_IN_SANDBOX]
        bun_argv = bun.argv(BUN_IN_SANDBOX)
        if not network or egress is not None:
            # Only loopback in here (which bwrap brings up): with egress, the way out
            # is the proxy's socket.
            argv.append("--unshare-net")
        if egress is not None:
            argv += ["--ro-bind", str(egress), EGRESS_IN_SANDBOX]
            argv += ["--ro-bind", str(egress / RELAY_JS.name), RELAY_JS_IN_SANDBOX]
            bun_argv = relayed_argv(bun, BUN_IN_SANDBOX, RELAY_JS_IN_SANDBOX)
        argv += sealed(env)
        command = [*drop_uid_argv(uid), *bun_argv]
        plan = _with_limits([argv[0], *command], env, workdir, limits)
        at = len(plan.argv) - len(command)
        return dataclasses.replace(plan, piped_args=tuple(argv[1:]), args_at=at)
    if mode in CONFINED:
        return confined_plan(mode, bun, workdir, network, limits, uid, namespaces, egress)
    env = clean_env(str(workdir / ".home"), str(workdir / ".tmp"))
    prefix: list[str] = []
    if mode == "basic" and not network:
        # Without bwrap only root can take the network away (a fresh, empty netns).
        unshare = shutil.which("unshare")
        if os.geteuid() == 0 and unshare:
            prefix = [unshare, "--net", "--"]
        else:
            log.warning("CODE_NETWORK=off cannot be enforced without bwrap when not root")
    if mode == "off":
        return Plan(bun.argv(), env, str(workdir), None)
    return _with_limits([*prefix, *drop_uid_argv(uid), *bun.argv()], env, workdir, limits)


def confined_plan(
    mode: Mode,
    bun: BunInfo,
    workdir: Path,
    network: bool,
    limits: Limits,
    uid: int | None,
    namespaces: bool,
    egress: Path | None = None,
) -> Plan:
    """`python -I -S launch.py`, the plan on its stdin (confine.py)."""
    inside = mode == "namespace"
    relay = egress / RELAY_JS.name if egress else RELAY_JS
    plan: dict[str, object] = {
        "mode": mode,
        "work": str(workdir),
        "io": str(io_dir(workdir)),
        "uid": uid,
        "network": network,
        "namespaces": namespaces,
        "bun": bun.path,
        "bun_inside": BUN_IN_SANDBOX,
        # Under Landlock, confine.py itself listens where HTTP_PROXY points (serve_egress).
        "bun_argv": relayed_argv(bun, bun.path, str(relay)) if egress and inside else bun.argv(),
        "egress": str(egress) if egress else None,
        "egress_inside": EGRESS_IN_SANDBOX,
        "egress_js": str(relay),
        "egress_js_inside": RELAY_JS_IN_SANDBOX,
        "system_dirs": list(SYSTEM_DIRS),
        "etc_files": [*ETC_FILES, "/etc/ld.so.cache"],
        "work_bytes": WORK_SIZE_BYTES,
        "limits": dataclasses.asdict(limits),
    }
    if inside:
        env = clean_env(WORK_IN_SANDBOX, "/tmp")
        env |= egress_env(EGRESS_IN_SANDBOX) if egress else {}
    else:
        env = clean_env(str(workdir / ".home"), str(workdir / ".tmp"))
        env |= egress_env(str(egress)) if egress else {}
    plan["env"] = env
    data = marshal.dumps(plan)
    # The same command for every run, so the runner can start one ahead of time.
    return Plan(LAUNCHER_ARGV, {}, "/", None, b"%08x" % len(data) + data)


def _with_limits(argv: list[str], env: dict[str, str], workdir: Path, limits: Limits) -> Plan:
    prefix = rlimit_argv(limits)
    if prefix is None:
        # Runs in the child between fork and exec (only when prlimit is missing).
        return Plan(argv, env, str(workdir), partial(set_limits, dataclasses.asdict(limits)))
    return Plan([*prefix, *argv], env, str(workdir), None)


def prepare_workdir(base: Path | None, uid: int | None, mode: Mode) -> Path:
    """A fresh private `<run>/work`, in a new folder only we can create entries in (so no
    other local account can make `<run>/work.io` first); remove it with
    `tree.remove_tree(path.parent)`."""
    import tempfile

    run = Path(tempfile.mkdtemp(prefix="sidekick-code-", dir=base))
    if uid is not None:
        os.chmod(run, 0o711)  # the run's uid passes through to work/, sees nothing else
    path = run / "work"
    os.mkdir(path, 0o700)
    dirs = [path]
    if mode in ("basic", "off"):  # confine.py makes these itself, after its mounts
        dirs += [path / ".home", path / ".tmp"]
        for d in dirs[1:]:
            d.mkdir(0o700)
    if uid is not None:
        for d in dirs:
            os.chown(d, uid, uid)
    return path
