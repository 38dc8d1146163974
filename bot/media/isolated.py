"""PDF and DOCX text read in a child process under CPU, memory and time limits. A parser in a
thread cannot be stopped: a crafted PDF kept one busy for half an hour, and a small DOCX grew
to hundreds of MB in the bot's memory. The kernel ends a child past its limits, we kill it at
the deadline, and its bare environment holds no token or key for an exploit to find."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import resource
import sys
from dataclasses import asdict
from pathlib import Path

from bot.media import extract
from bot.media.errors import MediaError

log = logging.getLogger(__name__)

MEMORY_BYTES = 1024**3  # address space of the child: the interpreter, pypdf and the text
ROOT = str(Path(__file__).resolve().parents[2])  # the project, for the child's imports
CHILD = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from bot.media.isolated import child_main; child_main(sys.argv[2:])"
)
TOO_MUCH = "Reading {name} needed more time or memory than I give one document; I gave up."


async def extract_file(
    path: Path, name: str, mime: str | None, max_pages: int, timeout_s: float
) -> extract.Extracted:
    """extract.extract_file for PDF and DOCX in a limited child; other kinds (a bounded
    read of the first bytes) in a thread. Raises MediaError with one line for the user."""
    if extract.kind_of(name, mime) not in ("pdf", "docx"):
        return await asyncio.to_thread(extract.extract_file, path, name, mime, max_pages)
    cpu = max(1, int(timeout_s))
    argv = [str(path), name, mime or "", str(max_pages), str(cpu), str(MEMORY_BYTES)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-c",
        CHILD,
        ROOT,
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        start_new_session=True,
    )
    try:
        async with asyncio.timeout(timeout_s):
            out, err = await proc.communicate()
    except TimeoutError:
        log.info("reading %s passed %.0f s: stopped", name, timeout_s)
        raise MediaError(TOO_MUCH.format(name=name)) from None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    try:
        got = json.loads(out)
    except ValueError:
        # Killed by its CPU limit, or out of memory (MemoryError, or a crash in C).
        log.info("reading %s failed: exit %s %s", name, proc.returncode, err[-300:])
        raise MediaError(TOO_MUCH.format(name=name)) from None
    if "error" in got:
        raise MediaError(str(got["error"]))
    return extract.Extracted(**got)


def child_main(args: list[str]) -> None:
    """In the child: set the limits, read the file, print the result (or its error)."""
    path, name, mime, max_pages, cpu, memory = args
    resource.setrlimit(resource.RLIMIT_CPU, (int(cpu), int(cpu) + 1))
    resource.setrlimit(resource.RLIMIT_AS, (int(memory), int(memory)))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        got = extract.extract_file(Path(path), name, mime or None, int(max_pages))
        result: dict[str, object] = asdict(got)
    except MediaError as exc:
        result = {"error": str(exc)}
    except MemoryError:
        result = {"error": TOO_MUCH.format(name=name)}
    sys.stdout.write(json.dumps(result))
