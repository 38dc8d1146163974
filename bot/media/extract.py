"""Text out of PDF (pypdf), DOCX (its XML) and plain text, bounded in pages, characters and
DOCX's uncompressed size (a zip bomb stays a small read). Runs in the child (isolated.py)."""

from __future__ import annotations

import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from bot.media.errors import MediaError

log = logging.getLogger(__name__)

MAX_CHARS = 2_000_000  # extracted PDF/DOCX text kept (the code tool reads all of it)
TEXT_READ_BYTES = 1024 * 1024  # of a text file, read for the model (the file stays whole)
MAX_DOCX_XML_BYTES = 50 * 1024 * 1024
TEXT_EXTENSIONS = {
    ".txt", ".md", ".markdown", ".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".xml", ".yaml",
    ".yml", ".toml", ".ini", ".cfg", ".log", ".html", ".htm", ".py", ".js", ".ts", ".tsx",
    ".jsx", ".mjs", ".go", ".rs", ".java", ".kt", ".c", ".h", ".cpp", ".hpp", ".cs", ".rb",
    ".php", ".sh", ".sql", ".swift", ".r", ".lua", ".css", ".scss", ".tex", ".rst", ".srt",
}  # fmt: skip
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


@dataclass
class Extracted:
    kind: str  # pdf | docx | text | binary
    text: str  # empty for binary
    pages: int | None = None  # PDF pages in the file
    pages_read: int | None = None
    truncated: bool = False


def kind_of(name: str, mime: str | None) -> str:
    lower = name.lower()
    if lower.endswith(".pdf") or mime == "application/pdf":
        return "pdf"
    if lower.endswith(".docx"):
        return "docx"
    ext = lower[lower.rfind(".") :] if "." in lower else ""
    if ext in TEXT_EXTENSIONS or (mime or "").startswith("text/") or mime == "application/json":
        return "text"
    return "binary"


def extract_file(path: Path, name: str, mime: str | None, max_pages: int) -> Extracted:
    """Read `path` within the limits; raises MediaError when the file is unreadable."""
    kind = kind_of(name, mime)
    if kind == "pdf":
        return _pdf(path, max_pages)
    if kind == "docx":
        return _docx(path)
    with path.open("rb") as f:
        data = f.read(TEXT_READ_BYTES + 1)
    if kind == "text" or _looks_like_text(data):
        cut = len(data) > TEXT_READ_BYTES
        return Extracted("text", _decode(data[:TEXT_READ_BYTES]), truncated=cut)
    return Extracted("binary", "")


def _pdf(path: Path, max_pages: int) -> Extracted:
    from pypdf import PdfReader  # imported on first use: it is slow to import
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            raise MediaError("This PDF is password-protected, so I cannot read it.")
        total = len(reader.pages)
        parts: list[str] = []
        size = 0
        for number, page in enumerate(reader.pages[:max_pages], 1):
            text = (page.extract_text() or "").strip()
            parts.append(f"--- page {number} ---\n{text}")
            size += len(text)
            if size > MAX_CHARS:
                break
    except MediaError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        log.info("PDF not readable: %s", exc)
        raise MediaError("I could not read this PDF (it seems damaged).") from None
    # A scan has pages but no text layer: say so rather than hand over empty page markers.
    text, read = "\n\n".join(parts) if size else "", len(parts)
    return Extracted("pdf", text[:MAX_CHARS], total, read, read < total or size > MAX_CHARS)


def _docx(path: Path) -> Extracted:
    """Paragraph by paragraph as the XML streams in, each dropped once read: a small file
    can hold tens of MB of tiny elements, hundreds of MB as one tree."""
    paragraphs: list[str] = []
    size = 0
    try:
        with zipfile.ZipFile(path) as z:
            info = z.getinfo("word/document.xml")
            if info.file_size > MAX_DOCX_XML_BYTES:
                raise MediaError("This DOCX is too large to read.")
            with z.open(info) as f:  # reads stop at the declared size
                open_elements: list[ElementTree.Element] = []
                for event, node in ElementTree.iterparse(f, events=("start", "end")):
                    if event == "start":
                        open_elements.append(node)
                        continue
                    open_elements.pop()
                    if node.tag != f"{_W}p":
                        continue
                    text = _paragraph(node)
                    paragraphs.append(text)
                    size += len(text) + 1
                    if open_elements:
                        open_elements[-1].remove(node)
                    if size > MAX_CHARS:
                        break
    except MediaError:
        raise
    except (zipfile.BadZipFile, KeyError, ElementTree.ParseError, OSError):
        raise MediaError("I could not read this DOCX (it seems damaged).") from None
    text = "\n".join(paragraphs).strip()
    return Extracted("docx", text[:MAX_CHARS], truncated=len(text) > MAX_CHARS)


def _paragraph(p: ElementTree.Element) -> str:
    bits = []
    for node in p.iter():
        if node.tag == f"{_W}t" and node.text:
            bits.append(node.text)
        elif node.tag == f"{_W}tab":
            bits.append("\t")
        elif node.tag in (f"{_W}br", f"{_W}cr"):
            bits.append("\n")
    return "".join(bits)


def _looks_like_text(data: bytes) -> bool:
    head = data[:4096]
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > len(head) - 4  # a multi-byte character cut at the end
    return True


def _decode(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")
