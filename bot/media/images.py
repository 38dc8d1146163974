"""Images for the model: decoded with Pillow, downscaled to the provider's limits, data URI."""

from __future__ import annotations

import base64
import io
import warnings

from bot.media.errors import MediaError

MAX_PIXELS = 60_000_000  # refuse decompression bombs before decoding
KEEP_BYTES = 4 * 1024 * 1024  # a small enough JPEG/PNG/WebP/GIF is sent as it is
FORMATS = {"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp", "GIF": "image/gif"}
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff")


def prepare(data: bytes, max_side: int) -> tuple[str, tuple[int, int]]:
    """A data URI the model can read, and the size sent. Raises MediaError on a bad image."""
    # Imported on the first image, not at start-up: most bots never need it.
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():  # our own pixel limit below says it more plainly
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
        width, height = img.size
        if width * height > MAX_PIXELS:
            raise MediaError(f"This image is too large to read ({width}×{height} pixels).")
        fmt = img.format or ""
        if fmt in FORMATS and max(width, height) <= max_side and len(data) <= KEEP_BYTES:
            return _uri(FORMATS[fmt], data), (width, height)
        img.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
        has_alpha = img.mode in ("RGBA", "LA") or "transparency" in img.info
        out = io.BytesIO()
        if has_alpha:
            img.convert("RGBA").save(out, "PNG", optimize=True)
            mime = "image/png"
        else:
            img.convert("RGB").save(out, "JPEG", quality=85)
            mime = "image/jpeg"
        return _uri(mime, out.getvalue()), img.size
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError, ValueError):
        raise MediaError(
            "I could not read this image (a format I do not know, or a damaged file)."
        ) from None


def _uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
