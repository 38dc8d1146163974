"""Starting one planned run: its command, environment and pipes, and for bwrap its
options handed over on a pipe (`--args FD`) so they are not on a command line the code
can read (/proc/1/cmdline in its PID namespace: host paths of the run)."""

from __future__ import annotations

import asyncio
import os

from tools.code.sandbox import Plan


async def spawn(plan: Plan) -> asyncio.subprocess.Process:
    if not plan.piped_args:
        return await asyncio.create_subprocess_exec(
            *plan.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=plan.cwd,
            env=plan.env,
            preexec_fn=plan.preexec,
            start_new_session=True,
        )
    data = b"".join(arg.encode() + b"\0" for arg in plan.piped_args)
    read_fd, write_fd = os.pipe()
    try:
        # A few KB: it fits in the pipe's buffer, so this write cannot block.
        try:
            os.write(write_fd, data)
        finally:
            os.close(write_fd)
        at = plan.args_at
        return await asyncio.create_subprocess_exec(
            *plan.argv[:at],
            "--args",
            str(read_fd),
            *plan.argv[at:],
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=plan.cwd,
            env=plan.env,
            preexec_fn=plan.preexec,
            start_new_session=True,
            pass_fds=(read_fd,),
        )
    finally:
        os.close(read_fd)
