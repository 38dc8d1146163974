"""Audio in another container (MP3, WAV, FLAC, AAC...) re-encoded as OGG/Opus, the only
format Telegram plays as a voice message. Used only when a speech endpoint cannot give
Opus itself; PyAV (FFmpeg's libraries in a wheel, no ffmpeg binary to install) is imported
on the first conversion, so a bot whose endpoint speaks Opus never loads it."""

from __future__ import annotations

import io

RATE = 48_000  # Opus's native rate: no resampling inside the encoder


class ConvertError(Exception):
    """The bytes could not be decoded as audio, or PyAV is missing."""


class TooLong(ConvertError):
    """The audio plays longer than the cap; decoding stopped there."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"longer than {seconds:.0f} s")
        self.seconds = seconds


def to_ogg_opus(data: bytes, max_seconds: float) -> bytes:
    """OGG/Opus bytes of the first audio stream in `data` (mono, 48 kHz); TooLong as soon as
    the decoded audio passes `max_seconds` (a small file can hold hours of silence).
    Blocking: call it in a thread."""
    try:
        import av
    except ImportError:
        raise ConvertError("PyAV (the av package) is not installed") from None
    out = io.BytesIO()
    try:
        with av.open(io.BytesIO(data), "r") as src:
            if not src.streams.audio:
                raise ConvertError("no audio stream in it")
            with av.open(out, "w", format="ogg") as dst:
                stream = dst.add_stream("libopus", rate=RATE, layout="mono")
                declared = src.duration / 1_000_000 if src.duration else 0.0
                if declared > max_seconds:  # said by the header: nothing to decode
                    raise TooLong(declared)
                seconds = 0.0
                # The encoder's own resampler and frame FIFO take frames of any size and rate.
                for frame in src.decode(audio=0):
                    seconds += frame.samples / (frame.sample_rate or RATE)
                    if seconds > max_seconds:  # counted, as a header may say anything
                        raise TooLong(max(seconds, declared))
                    frame.pts = None
                    for packet in stream.encode(frame):
                        dst.mux(packet)
                for packet in stream.encode(None):
                    dst.mux(packet)
    except av.FFmpegError as exc:
        raise ConvertError(f"not audio FFmpeg can read ({type(exc).__name__})") from None
    return out.getvalue()
