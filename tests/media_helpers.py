"""Small real files for the media tests: PDFs with text, PNGs, DOCX, and the updates."""

from __future__ import annotations

import io
import zipfile
from typing import Any

from PIL import Image


def make_pdf(pages: list[str]) -> bytes:
    """A valid PDF with one line of Helvetica text per page (xref offsets computed)."""
    objects: list[bytes] = []
    n = len(pages)
    font_id = 3 + 2 * n
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    for i, text in enumerate(pages):
        safe = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({safe}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return pdf_file(objects)


def pdf_file(objects: list[bytes]) -> bytes:
    """A PDF of these object bodies (1 is the catalog), with its xref table and trailer."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{i} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for off in offsets:
        out.write(f"{off:010d} 00000 n \n".encode())
    out.write(
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


def make_image(width: int, height: int, fmt: str = "PNG", color: str = "red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, fmt)
    return out.getvalue()


def make_noise_jpeg(width: int, height: int, quality: int = 95) -> bytes:
    """A JPEG that does not compress well (about 1 MB at 1600x1200)."""
    import os

    img = Image.frombytes("RGB", (width, height), os.urandom(width * height * 3))
    out = io.BytesIO()
    img.save(out, "JPEG", quality=quality)
    return out.getvalue()


def make_docx(paragraphs: list[str]) -> bytes:
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    from xml.sax.saxutils import escape

    body = "".join(f"<w:p><w:r><w:t>{escape(p)}</w:t></w:r></w:p>" for p in paragraphs)
    xml = f'<?xml version="1.0"?><w:document xmlns:w="{w}"><w:body>{body}</w:body></w:document>'
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml", xml)
    return out.getvalue()


def voice(file_id: str, size: int, duration: int = 3) -> dict[str, Any]:
    return {"voice": {"file_id": file_id, "file_unique_id": f"u{file_id}", "duration": duration,
                      "mime_type": "audio/ogg", "file_size": size}}  # fmt: skip


def photo(file_id: str, size: int, caption: str | None = None) -> dict[str, Any]:
    sizes = [{"file_id": file_id, "file_unique_id": f"u{file_id}", "width": 800, "height": 600,
              "file_size": size}]  # fmt: skip
    return {"photo": sizes, **({"caption": caption} if caption else {})}


def document(
    file_id: str, size: int | None, name: str, mime: str, caption: str | None = None
) -> dict[str, Any]:
    doc: dict[str, Any] = {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_name": name,
                           "mime_type": mime}  # fmt: skip
    if size is not None:
        doc["file_size"] = size
    return {"document": doc, **({"caption": caption} if caption else {})}
