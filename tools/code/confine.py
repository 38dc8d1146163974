"""The launcher between the runner and bun when bubblewrap is not there: rlimits, what
namespaces it can take, Landlock or a mount-namespace view, the run's uid, then exec bun.
A program of its own (`python -I -S launch.py`, standard library only), not a preexec_fn,
which would fork() the bot's whole heap and run Python between fork and exec in a threaded
process. `--probe` prints what this kernel allows, for choosing the mode.
"""

from __future__ import annotations

import ctypes
import marshal
import os
import resource
import select
import signal
import sys

# Start-up time is the overhead of every run: `typing` would cost more than the rest of
# this module together.
MYPY = False
if MYPY:
    from typing import Any

# Run by launch.py (its folder on sys.path, no packages); imported by the tests.
try:
    from tools.code.diskuse import usage
    from tools.code.orphans import end_orphans
except ImportError:
    from diskuse import usage  # type: ignore[no-redef]
    from orphans import end_orphans  # type: ignore[no-redef]

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # same on every arch
PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE = 38, 1, 36, 4
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
SIOCSIFFLAGS = 0x8914
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41}
# For the seccomp filter: the audit arch the kernel reports and the syscall numbers.
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECCOMP_ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}  # arch, socket
SYS_IO_URING_SETUP = 425  # same on every arch
X32_BIT = 0x40000000
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
BPF_LD_ABS, BPF_JEQ, BPF_JGE, BPF_RET = 0x20, 0x15, 0x35, 0x06
EACCES, EPERM = 13, 1
AF_UNIX = 1
EGRESS_SOCKET = "egress.sock"  # in the proxy's folder (egress.py)
PROXY_PORT = 3128  # where HTTP_PROXY points, in the run's own network namespace
# statvfs flags that a bind remount inside a user namespace must keep (they are locked).
KEEP_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC | 1024 | 2048 | 4096

# Landlock filesystem rights, by the ABI that introduced them.
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1, 2, 4, 8
FS_ABI1 = (1 << 13) - 1
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1, 2
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
READ_EXEC = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
WATCH_EVERY_S = 0.1
DEVICES_RW = ("/dev/null", "/dev/zero", "/dev/full")
DEVICES_RO = ("/dev/random", "/dev/urandom")

_libc = ctypes.CDLL(None, use_errno=True)


class Refused(Exception):
    """The confinement asked for cannot be built here; the run must not start."""


def _check(ret: int, what: str) -> int:
    if ret < 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")
    return ret


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is missing or disabled."""
    ret = _libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(ret), 0)


def fs_rights(abi: int) -> int:
    later = ((2, FS_REFER), (3, FS_TRUNCATE), (5, FS_IOCTL_DEV))
    return FS_ABI1 | sum(right for since, right in later if abi >= since)


def landlock(abi: int, rules: list[tuple[str, int]], *, block_tcp: bool) -> None:
    """Restrict this process and its future children to `rules` (path, rights); every
    other path is denied, and TCP bind/connect too when `block_tcp` (ABI >= 4)."""
    handled = fs_rights(abi)
    net = NET_BIND_TCP | NET_CONNECT_TCP if block_tcp else 0
    if block_tcp and abi < 4:
        raise Refused(f"Landlock ABI {abi} cannot block TCP (needs 4)")
    # Abstract unix sockets and signals to processes outside the sandbox (ABI 6).
    scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL if abi >= 6 else 0
    attr = (ctypes.c_uint64 * 3)(handled, net, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    fd = _check(_libc.syscall(SYS_CREATE_RULESET, attr, ctypes.c_size_t(size), 0), "ruleset")
    try:
        for path, rights in rules:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # e.g. /lib32 on a machine without it
            try:
                allowed = rights & handled & (-1 if os.path.isdir(path) else FILE_RIGHTS)
                rule = ctypes.create_string_buffer(
                    allowed.to_bytes(8, "little") + pfd.to_bytes(4, "little", signed=True)
                )
                _check(_libc.syscall(SYS_ADD_RULE, fd, 1, rule, 0), f"rule {path}")
            finally:
                os.close(pfd)
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(_libc.syscall(SYS_RESTRICT_SELF, fd, 0), "restrict_self")
    finally:
        os.close(fd)


def deny_sockets(only_unix: bool = False) -> None:
    """A seccomp filter on this process and its children: socket() fails (EACCES) for
    every family, so the code opens no TCP, UDP, raw, netlink or Unix socket: without
    a network namespace nothing else keeps it from the host's 127.0.0.1 services and
    Unix sockets (Landlock rules TCP ports only, and no Unix socket before ABI 8).
    `only_unix`: in a network namespace of its own, only Unix sockets, which lead to
    the host's through paths Landlock cannot close. io_uring would create sockets past
    seccomp, so it is denied too, as are x32 calls and any other arch's. Needs
    no_new_privs (set first by the caller)."""
    found = SECCOMP_ARCH.get(os.uname().machine)
    if found is None:
        raise Refused(f"no socket filter for {os.uname().machine}: the run cannot start")
    arch, socket_nr = found
    deny, eperm = RET_ERRNO | EACCES, RET_ERRNO | EPERM
    # (code, jump if true, jump if false, k); a jump skips that many instructions.
    socket_rule = [(BPF_RET, 0, 0, deny)]
    if only_unix:
        socket_rule = [
            (BPF_LD_ABS, 0, 0, 16),  # seccomp_data.args[0]'s low half: the family
            (BPF_JEQ, 1, 0, AF_UNIX),
            (BPF_RET, 0, 0, RET_ALLOW),
            (BPF_RET, 0, 0, deny),
        ]
    head = [
        (BPF_LD_ABS, 0, 0, 4),  # seccomp_data.arch
        (BPF_JEQ, 1, 0, arch),
        (BPF_RET, 0, 0, eperm),
        (BPF_LD_ABS, 0, 0, 0),  # seccomp_data.nr
        (BPF_JGE, len(socket_rule) + 4, 0, X32_BIT),
        (BPF_JEQ, len(socket_rule) + 2, 0, SYS_IO_URING_SETUP),
        (BPF_JEQ, 1, 0, socket_nr),
        (BPF_RET, 0, 0, RET_ALLOW),
    ]
    prog = [*head, *socket_rule, (BPF_RET, 0, 0, deny), (BPF_RET, 0, 0, eperm)]
    raw = b"".join(
        code.to_bytes(2, sys.byteorder) + bytes((jt, jf)) + k.to_bytes(4, sys.byteorder)
        for code, jt, jf, k in prog
    )
    filt = ctypes.create_string_buffer(raw, len(raw))

    class Fprog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))

    fprog = Fprog(len(prog), ctypes.addressof(filt))
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def enter_namespaces(net: bool) -> bool:
    """New mount, PID, IPC (and network when off or through the egress proxy) namespaces;
    a user namespace first when we are not root. False when the kernel refuses them."""
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    if not net:
        flags |= CLONE_NEWNET
    if os.geteuid() != 0:
        real_uid, real_gid = os.getuid(), os.getgid()
        if _libc.unshare(CLONE_NEWUSER | flags) != 0:
            return False
        # Map only ourselves: the code stays our uid, with no capability on the host.
        for name, text in (("setgroups", "deny"), ("uid_map", f"{real_uid} {real_uid} 1"),
                           ("gid_map", f"{real_gid} {real_gid} 1")):  # fmt: skip
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        return True
    return int(_libc.unshare(flags)) == 0


def loopback_up() -> None:
    """A new network namespace starts with `lo` down; forward.js listens on it."""
    import fcntl
    import socket

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:  # struct ifreq: the name, then the flags (IFF_UP | IFF_LOOPBACK | IFF_RUNNING)
        ifreq = b"lo".ljust(16, b"\0") + (0x1 | 0x8 | 0x40).to_bytes(2, sys.byteorder)
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, ifreq.ljust(40, b"\0"))
    finally:
        sock.close()


def mount(src: str | None, dst: str, fstype: str | None, flags: int, data: str | None) -> None:
    enc = [None if v is None else v.encode() for v in (src, dst, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {dst}")


def bind_ro(src: str, dst: str) -> None:
    mount(src, dst, None, MS_BIND | MS_REC, None)
    keep = os.statvfs(dst).f_flag & KEEP_FLAGS
    mount(None, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY | keep, None)


def tmpfs(dst: str, size: int, uid: int | None, mode: str = "0700") -> None:
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode}{owner}")


def make_dirs(parent: str, names: tuple[str, ...], uid: int | None, exist_ok: bool) -> None:
    for d in names:
        os.makedirs(os.path.join(parent, d), exist_ok=exist_ok)
        if uid is not None:
            os.chown(os.path.join(parent, d), uid, uid)


def mount_point(path: str, is_dir: bool) -> str:
    """An empty directory or file at path to mount onto (its parents made)."""
    if is_dir:
        os.makedirs(path)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").close()
    return path


def bind_io(io: str, work: str, uid: int | None) -> None:
    make_dirs(work, ("input", "output"), uid, exist_ok=False)  # never an existing path
    bind_ro(os.path.join(io, "input"), os.path.join(work, "input"))
    mount(os.path.join(io, "output"), os.path.join(work, "output"), None, MS_BIND, None)


def build_view(root: str, plan: dict[str, Any]) -> None:
    """A new root holding only the system dirs, the /etc files bun needs, a few devices,
    a fresh /proc, bun, and size-capped /tmp and /work; then pivot into it."""
    # The bot runs under umask 077 (bot/ops/preflight.py): the mount points made here would
    # be 0700 and the run's uid could not reach /opt/bun/bun or /etc. The code gets
    # the bot's umask back for its own files.
    umask = os.umask(0o022)
    try:
        tmpfs(root, 1024 * 1024, None, "0755")
        os.makedirs(root + "/etc")
        for d in plan["system_dirs"]:
            if os.path.islink(d):
                os.symlink(os.readlink(d), root + d)
            elif os.path.isdir(d):
                bind_ro(d, mount_point(root + d, True))
        for f in plan["etc_files"]:
            if os.path.exists(f):
                bind_ro(f, mount_point(root + f, os.path.isdir(f)))
        for dev in (*DEVICES_RW, *DEVICES_RO):
            mount(dev, mount_point(root + dev, False), None, MS_BIND, None)
        bind_ro(plan["bun"], mount_point(root + plan["bun_inside"], False))
        if plan["egress"]:  # the proxy's socket folder and the relay bun preloads
            bind_ro(plan["egress"], mount_point(root + plan["egress_inside"], True))
            bind_ro(plan["egress_js"], mount_point(root + plan["egress_js_inside"], False))
        for d in ("/proc", "/tmp", "/work"):
            os.makedirs(root + d)
        if not mount_proc(root + "/proc"):
            raise Refused("the kernel refused a /proc for the PID namespace")
        for d in ("/tmp", "/work"):  # both of the size a work dir may take
            tmpfs(root + d, plan["work_bytes"], plan["uid"])
        bind_io(plan["io"], root + "/work", plan["uid"])
        os.chdir(root)
        nr = SYS_PIVOT_ROOT.get(os.uname().machine)
        if nr is None:
            raise Refused(f"pivot_root: unknown syscall number on {os.uname().machine}")
        _check(_libc.syscall(nr, b".", b"."), "pivot_root")
        _check(_libc.umount2(b".", MNT_DETACH), "umount old root")
        os.chdir("/")
        mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
    finally:
        os.umask(umask)


def mount_proc(dst: str) -> bool:
    """A /proc of our PID namespace only. The kernel refuses it where the host's /proc
    is partly masked (some containers); then there is no /proc at all."""
    try:
        mount("proc", dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        return True
    except OSError:
        return False


def set_limits(lim: dict[str, Any]) -> None:
    cpu = lim["cpu_s"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (lim["file_size"], lim["file_size"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (lim["open_files"], lim["open_files"]))
    resource.setrlimit(resource.RLIMIT_AS, (lim["address_space"], lim["address_space"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if lim["nproc"] is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (lim["nproc"], lim["nproc"]))


def relay(pid: int, watch: tuple[str, int] | None, egress: Any = None) -> None:
    """Stay as the parent of the confined child and exit as it exits. With `watch`
    (work dir, bytes): no namespaces, so kill the run when the dir grows past it (no
    tmpfs caps it) and its orphans when it ends (no PID namespace ends them)."""
    # Not dumpable: the code (same uid when we are not root) cannot ptrace us, and we
    # hold what it must not have (a host cwd, capabilities in our user namespace).
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    for stop in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(stop, lambda _s, _f: os.kill(pid, signal.SIGKILL))
    pidfd = os.pidfd_open(pid)
    if egress is not None:
        serve_egress(pidfd, *egress)
    while not select.select([pidfd], [], [], WATCH_EVERY_S if watch else None)[0]:
        if watch and usage(*watch)[0] > watch[1]:
            sys.stderr.write(f"sandbox: the work dir passed {watch[1] >> 20} MiB\n")
            sys.stderr.flush()
            os.killpg(0, signal.SIGKILL)  # our process group: the run and us
    _, status = os.waitpid(pid, 0)
    if watch:
        end_orphans()
    if os.WIFSIGNALED(status) and os.getpid() == 1:
        os._exit(128 + os.WTERMSIG(status))  # as init we cannot die of our own signal
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig != signal.SIGKILL:  # its handler cannot be set, not even to the default
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if not os.WIFSIGNALED(status) else 128)


def fork_relayed(watch: tuple[str, int] | None, egress: Any = None) -> None:
    """The parent relays the child's end (and the run's connections to the proxy, with
    `egress`) and never returns; the child goes on."""
    pid = os.fork()
    if pid:
        relay(pid, watch, egress)
    if egress is not None:
        egress[0].close()
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def serve_egress(pidfd: int, listener: Any, path: str) -> None:
    """Until `pidfd` is readable: the run's way out under Landlock. Each connection to
    the listener goes on to the egress proxy's socket, opened here, outside the seccomp
    filter that keeps the code itself from every Unix socket (the host's included).
    One thread (RLIMIT_NPROC may leave no room for more): an event loop, each side read
    only as fast as its peer takes it."""
    import asyncio

    async def forward(client: Any, back: Any) -> None:
        try:
            opened = asyncio.open_unix_connection(path)
            upstream, up = await asyncio.wait_for(opened, 5)
        except (OSError, TimeoutError):
            back.close()
            return
        try:
            await asyncio.gather(pipe(client, up), pipe(upstream, back))
        except asyncio.CancelledError:
            pass  # the run ended; the stream server would print a traceback into its stderr
        finally:
            back.close()
            up.close()

    async def serve() -> None:
        ended = asyncio.Event()
        asyncio.get_running_loop().add_reader(pidfd, ended.set)
        await asyncio.start_server(forward, sock=listener)
        await ended.wait()

    asyncio.run(serve())


async def pipe(src: Any, dst: Any) -> None:
    """Copy up to the end, then pass the end on (the other direction may go on)."""
    try:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
        if dst.can_write_eof():
            dst.write_eof()
    except OSError:
        dst.close()


def own_proc_entry() -> list[tuple[str, int]]:
    """Rules for our own /proc/<pid>, but for what shows the host's network (net/:
    its listening ports and Unix sockets) and the task/ dirs holding net/ again.
    (/proc/self: our pid in the namespace /proc was made for, not getpid())"""
    top = f"/proc/{os.readlink('/proc/self')}"
    # A rule on a directory covers everything under it: so none on the entry itself;
    # nor on its links (root, cwd, exe), which the rule would follow to their targets.
    paths = [f"{top}/{name}" for name in os.listdir(top) if name not in ("net", "task")]
    return [(p, FS_READ_FILE | FS_READ_DIR) for p in paths if not os.path.islink(p)]


def confine(plan: dict[str, Any]) -> None:
    mode, work, uid, net = plan["mode"], plan["work"], plan["uid"], plan["network"]
    abi = landlock_abi() if mode == "landlock" else 0
    if mode == "landlock" and abi < 1:
        raise Refused("this kernel has no Landlock")
    set_limits(plan["limits"])
    # Through the egress proxy, the network is a namespace of our own like when it is off.
    namespaced = plan["namespaces"] and enter_namespaces(net and not plan["egress"])
    if mode == "namespace" and not namespaced:
        raise Refused("the kernel refused the user/mount namespaces")
    egress = None
    if plan["egress"]:
        if not namespaced:
            raise Refused("the egress rule needs a network namespace, which the kernel refused")
        loopback_up()
        if mode == "landlock":  # (the namespace view holds no host socket: forward.js)
            import socket

            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind(("127.0.0.1", PROXY_PORT))  # where HTTP_PROXY points
            listener.listen(64)
            egress = (listener, os.path.join(plan["egress"], EGRESS_SOCKET))
    # The new PID namespace starts with our first child; without one, the parent
    # watches the work dir's size instead of a size-capped tmpfs.
    if not namespaced:
        _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    fork_relayed(None if namespaced else (work, plan["work_bytes"]), egress)
    if namespaced:
        # We are the namespace's init. bun must not be: the kernel drops signals an init
        # sends itself (process.kill(process.pid) would do nothing), so we stay as pid 1.
        fork_relayed(None)
        mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    argv, has_proc = list(plan["bun_argv"]), False
    if mode == "namespace":
        build_view(work, plan)
        work, argv[0] = "/work", plan["bun_inside"]
        if plan["egress"]:
            argv[argv.index(plan["egress_js"])] = plan["egress_js_inside"]
    else:
        if namespaced:
            tmpfs(work, plan["work_bytes"], uid)
            bind_io(plan["io"], work, uid)
            has_proc = mount_proc("/proc")
        else:  # no mounts: the files move into the work dir (the runner looks there too)
            for d in ("input", "output"):
                os.rename(os.path.join(plan["io"], d), os.path.join(work, d))
        make_dirs(work, (".home", ".tmp"), uid, exist_ok=True)
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    os.chdir(work)
    if mode == "landlock":
        rules = [(p, READ_EXEC) for p in (*plan["system_dirs"], *plan["etc_files"])]
        rules += [(d, FS_READ_FILE | FS_WRITE_FILE) for d in DEVICES_RW]
        rules += [(d, FS_READ_FILE) for d in DEVICES_RO]
        rules += [(plan["bun"], FS_EXECUTE | FS_READ_FILE), (work, fs_rights(abi))]
        if has_proc:  # our own /proc, holding only the sandbox's processes
            rules.append(("/proc", FS_READ_FILE | FS_READ_DIR))
        else:  # the host's: only bun's own entry (which bun aborts without)
            rules += own_proc_entry()
        landlock(abi, rules, block_tcp=not net and abi >= 4)
    else:
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if not net and not namespaced:  # no empty network namespace holds the network off
        deny_sockets()
    elif mode == "landlock":  # Landlock leaves paths to Unix sockets open; with egress,
        # the way out is 127.0.0.1:PROXY_PORT (serve_egress)
        deny_sockets(only_unix=True)
    os.execve(argv[0], argv, plan["env"])


def probe() -> str:
    """Landlock ABI, and whether namespaces work here, /proc included (tried in a
    throwaway child: some containers mask /proc, and bun cannot run without one)."""

    def namespaces_work() -> bool:
        if not enter_namespaces(False):
            return False
        pid = os.fork()  # the namespace's first process may mount its /proc
        if pid == 0:
            mount(None, "/", None, MS_REC | MS_PRIVATE, None)
            os._exit(0 if mount_proc("/proc") else 1)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0

    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if namespaces_work() else 1)
        except OSError:
            os._exit(1)
    namespaces = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    return f"landlock_abi={landlock_abi()} namespaces={int(namespaces)}"


def read_plan(fd: int) -> dict[str, Any]:
    """The plan comes first on stdin (8 hex digits of length, then marshal bytes); the
    rest is the program, left unread for bun. Read exactly, never past the plan."""

    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = os.read(fd, n - len(out))
            if not chunk:
                raise EOFError("stdin closed before the plan")
            out += chunk
        return out

    return marshal.loads(exactly(int(exactly(8), 16)))  # type: ignore[no-any-return]


def main() -> None:
    if sys.argv[1:] == ["--probe"]:
        print(probe())
        return
    try:
        # Started ahead of the run (the runner keeps one waiting), so the interpreter's
        # start-up is off the run's path; it blocks here until the plan arrives.
        plan = read_plan(0)
    except (EOFError, OSError, ValueError):
        os._exit(0)  # the runner went away, or closed us unused
    try:
        confine(plan)
    except (Refused, OSError) as exc:
        sys.stderr.write(f"sandbox: {exc}\n")
        os._exit(126)


if __name__ == "__main__":
    main()
