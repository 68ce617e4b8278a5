"""Images for chat requests: read the header, downscale to a longest side, encode as a base64 data URL.

PNG and JPEG images that already fit are sent byte for byte. Larger ones are resized with a Lanczos filter so
that their longest side is ``max_side`` and re-encoded in their own format (JPEG at quality 90); images in any
other format Pillow reads are sent as PNG. The result depends only on the image bytes, ``max_side`` and
``ENCODING``, which is why the cache key holds those three and not the encoded bytes.
"""

from __future__ import annotations

import base64
import io

from PIL import Image, ImageOps

# Part of every image's cache key: bump it when the downscaling or encoding below changes what is sent.
ENCODING = 1
JPEG_QUALITY = 90
MIME = {"PNG": "image/png", "JPEG": "image/jpeg"}


def inspect(data: bytes) -> tuple[str, int, int]:
    """(format, width, height) from the image header; ValueError when the bytes are not an image Pillow reads."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            return im.format or "", im.width, im.height
    except (OSError, Image.DecompressionBombError, SyntaxError) as exc:
        raise ValueError(f"not a readable image ({exc})") from None


def target_size(width: int, height: int, max_side: int | None) -> tuple[int, int]:
    """The size after downscaling: unchanged when it fits, else the longest side equals ``max_side``."""
    longest = max(width, height)
    if max_side is None or longest <= max_side:
        return width, height
    scale = max_side / longest
    return max(1, round(width * scale)), max(1, round(height * scale))


def encode(data: bytes, max_side: int | None) -> tuple[str, bytes]:
    """(MIME type, bytes) as sent: the original bytes when they fit and are PNG/JPEG, else resized and re-encoded."""
    with Image.open(io.BytesIO(data)) as im:
        fmt = im.format or ""
        size = target_size(im.width, im.height, max_side)
        if size == (im.width, im.height) and fmt in MIME:
            return MIME[fmt], data
        # Re-encoding drops EXIF, so apply its orientation first.
        img = ImageOps.exif_transpose(im)
        if size != (img.width, img.height):
            size = target_size(img.width, img.height, max_side)
            img = img.resize(size, Image.Resampling.LANCZOS)
        out = io.BytesIO()
        if fmt == "JPEG":
            if img.mode not in ("RGB", "L"):
                img = img.convert("RGB")
            img.save(out, "JPEG", quality=JPEG_QUALITY)
            return MIME["JPEG"], out.getvalue()
        if img.mode not in ("1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"):
            img = img.convert("RGBA" if "A" in img.mode else "RGB")
        img.save(out, "PNG")
        return MIME["PNG"], out.getvalue()


def data_url(data: bytes, max_side: int | None) -> str:
    """``data:<mime>;base64,<...>`` for an image, downscaled to ``max_side`` first."""
    mime, payload = encode(data, max_side)
    return f"data:{mime};base64,{base64.b64encode(payload).decode('ascii')}"
