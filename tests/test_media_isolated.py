"""Untrusted documents are read in a child process under limits: a crafted slow PDF is
stopped at its deadline with one line for the user while the bot keeps serving, and a DOCX
zip bomb does not balloon the bot's memory."""

from __future__ import annotations

import asyncio
import io
import os
import resource
import time
import zipfile
import zlib
from pathlib import Path

import pytest

from bot.media import extract, isolated
from bot.media.errors import MediaError
from tests.media_helpers import make_docx, make_pdf, pdf_file

W = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def slow_pdf(ops: int) -> bytes:
    """One page whose compressed content stream holds `ops` text operators: a file of a
    few KB that pypdf's text extraction spends minutes of CPU on."""
    stream = zlib.compress(b"BT /F1 12 Tf " + b"(a) Tj " * ops + b"ET", 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return pdf_file(objects)


def docx_bomb(xml_bytes: int) -> bytes:
    """A DOCX of ~140 KB whose document.xml is `xml_bytes` of one-letter paragraphs."""
    para = b"<w:p><w:r><w:t>a</w:t></w:r></w:p>"
    body = para * (xml_bytes // len(para))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(
            "word/document.xml",
            b"<w:document " + W + b"><w:body>" + body + b"</w:body></w:document>",
        )
    return out.getvalue()


def our_parsers() -> list[int]:
    """Pids of document-reading children of this process still alive."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"child_main" in cmdline:
            found.append(int(entry.name))
    return found


async def test_slow_pdfs_are_stopped_and_the_bot_keeps_serving(tmp_path: Path) -> None:
    path = tmp_path / "slow.pdf"
    path.write_bytes(slow_pdf(3_000_000))
    assert path.stat().st_size < 64 * 1024
    # More parses at once than the default thread pool has threads (min(32, cpus + 4)):
    # in threads they would take all of it; as children they take none.
    parses = [
        asyncio.create_task(isolated.extract_file(path, f"slow{i}.pdf", None, 10, timeout_s=6))
        for i in range(min(32, (os.cpu_count() or 1) + 4) + 1)
    ]
    for _ in range(20):  # other users' thread work goes on meanwhile
        await asyncio.wait_for(asyncio.to_thread(time.sleep, 0.001), 5)
    assert not any(p.done() for p in parses)
    for parse in parses:
        with pytest.raises(MediaError) as caught:
            await asyncio.wait_for(parse, 120)
        line = str(caught.value)
        assert "needed more time or memory than I give one document" in line
        assert "\n" not in line
    assert our_parsers() == []  # killed and reaped, not left running


async def test_a_docx_zip_bomb_stays_out_of_the_bots_memory(tmp_path: Path) -> None:
    path = tmp_path / "bomb.docx"
    path.write_bytes(docx_bomb(45 * 2**20))
    assert path.stat().st_size < 512 * 1024
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    got = await isolated.extract_file(path, "bomb.docx", None, 10, timeout_s=120)
    grew_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert got.kind == "docx" and got.truncated and len(got.text) == extract.MAX_CHARS
    assert grew_kib < 100 * 1024, grew_kib


def test_a_docx_zip_bomb_is_read_as_a_stream(tmp_path: Path) -> None:
    # In the child too it stays small: well under the child's address-space limit,
    # checked here in a process of its own. VmHWM, not ru_maxrss: Linux carries ru_maxrss
    # over exec, so a big parent (the whole suite) would count as this process's peak.
    import subprocess
    import sys

    path = tmp_path / "bomb.docx"
    path.write_bytes(docx_bomb(45 * 2**20))
    script = (
        "import re, sys; from pathlib import Path; from bot.media import extract; "
        "got = extract.extract_file(Path(sys.argv[1]), 'b.docx', None, 10); "
        "hwm = re.search(r'VmHWM:\\s+(\\d+)', Path('/proc/self/status').read_text()); "
        "print(len(got.text), hwm.group(1))"
    )
    res = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300
    )
    chars, peak_kib = map(int, res.stdout.split())
    assert chars == extract.MAX_CHARS
    assert peak_kib < 400 * 1024, peak_kib  # as one tree it took over 600 MiB


async def test_the_child_reads_good_documents_and_reports_bad_ones(tmp_path: Path) -> None:
    pdf = tmp_path / "r.pdf"
    pdf.write_bytes(make_pdf(["line 1", "line 2", "line 3"]))
    got = await isolated.extract_file(pdf, "r.pdf", "application/pdf", 2, timeout_s=60)
    assert (got.kind, got.pages, got.pages_read, got.truncated) == ("pdf", 3, 2, True)
    assert "line 2" in got.text and "line 3" not in got.text
    docx = tmp_path / "d.docx"
    docx.write_bytes(make_docx(["Hello", "World & more"]))
    got = await isolated.extract_file(docx, "d.docx", None, 10, timeout_s=60)
    assert got.text == "Hello\nWorld & more"
    bad = tmp_path / "a.pdf"
    bad.write_bytes(b"%PDF-1.4 junk")
    with pytest.raises(MediaError, match="could not read this PDF"):
        await isolated.extract_file(bad, "a.pdf", None, 10, timeout_s=60)
    note = tmp_path / "n.txt"
    note.write_bytes(b"plain words")
    got = await isolated.extract_file(note, "n.txt", None, 10, timeout_s=60)
    assert (got.kind, got.text) == ("text", "plain words")


async def test_a_dripping_transcription_ends_at_one_deadline() -> None:
    # Each read gets a byte well within httpx's per-read timeout: only a deadline for the
    # whole call stops it, with the one sentence for the user.
    import httpx
    from aiohttp import web

    from bot.media.transcribe import Transcriber

    async def drip(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        while True:
            await resp.write(b" ")
            await asyncio.sleep(0.2)

    app = web.Application()
    app.router.add_post("/v1/audio/transcriptions", drip)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with httpx.AsyncClient() as http:
            t = Transcriber(http, f"http://127.0.0.1:{port}/v1", None, "whisper-1", timeout_s=1)
            with pytest.raises(MediaError, match="took too long"):
                await asyncio.wait_for(t.transcribe(b"OggS", "v.ogg", "audio/ogg"), 60)
    finally:
        await runner.cleanup()
