"""Starting one planned run: its command, environment and pipes, and for bwrap its
options handed over on a pipe (`--args FD`) so they are not on a command line the code
can read (/proc/1/cmdline in its PID namespace: host paths of the run)."""

from __future__ import annotations

import asyncio
import os

from tools.code.sandbox import Plan


async def spawn(plan: Plan) -> asyncio.subprocess.Process:
    argv, read_fd = plan.argv, None
    if plan.piped_args:
        read_fd, write_fd = os.pipe()
        try:
            # A few KB: it fits in the pipe's buffer, so this write cannot block.
            os.write(write_fd, b"".join(arg.encode() + b"\0" for arg in plan.piped_args))
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        argv = [*argv[: plan.args_at], "--args", str(read_fd), *argv[plan.args_at :]]
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=plan.cwd,
            env=plan.env,
            preexec_fn=plan.preexec,
            start_new_session=True,
            pass_fds=() if read_fd is None else (read_fd,),
        )
    finally:
        if read_fd is not None:
            os.close(read_fd)
