"""The media building blocks on bad and good input: extraction, images, code files, vision."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from bot.app import App
from bot.errors import ProviderError
from bot.llm.vision import NOT_SHOWN, VisionGate, VisionState, without_images
from bot.media import extract, images
from bot.media.errors import MediaError
from bot.media.transcribe import Transcriber
from tests.fakes.openai_server import FakeOpenAI
from tests.media_helpers import make_docx, make_image, make_noise_jpeg, make_pdf
from tools.chat import Completion, ModelWrapper, OnText, text_model
from tools.code import files


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_pdf_pages_are_read_up_to_the_limit(tmp_path: Path) -> None:
    path = write(tmp_path, "r.pdf", make_pdf([f"line {i}" for i in range(1, 11)]))
    got = extract.extract_file(path, "r.pdf", "application/pdf", max_pages=4)
    assert (got.kind, got.pages, got.pages_read, got.truncated) == ("pdf", 10, 4, True)
    assert "line 4" in got.text and "line 5" not in got.text


def test_damaged_pdf_and_docx_are_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(MediaError, match="could not read this PDF"):
        extract.extract_file(write(tmp_path, "a.pdf", b"%PDF-1.4 junk"), "a.pdf", None, 10)
    with pytest.raises(MediaError, match="could not read this DOCX"):
        extract.extract_file(write(tmp_path, "a.docx", b"PK not a zip"), "a.docx", None, 10)


def test_docx_paragraphs(tmp_path: Path) -> None:
    path = write(tmp_path, "d.docx", make_docx(["Hello", "World & more"]))
    got = extract.extract_file(path, "d.docx", None, 10)
    assert (got.kind, got.text) == ("docx", "Hello\nWorld & more")


def test_text_encodings_and_binary(tmp_path: Path) -> None:
    utf8 = extract.extract_file(write(tmp_path, "a.md", "\ufeff# Título".encode()), "a.md", None, 1)
    assert (utf8.kind, utf8.text) == ("text", "# Título")
    latin = extract.extract_file(
        write(tmp_path, "b.txt", "café".encode("cp1252")), "b.txt", None, 1
    )
    assert latin.text == "café"
    unknown_text = extract.extract_file(write(tmp_path, "notes", b"plain words"), "notes", None, 1)
    assert unknown_text.kind == "text"
    blob = extract.extract_file(write(tmp_path, "x.bin", b"\x00\x01\x02" * 10), "x.bin", None, 1)
    assert (blob.kind, blob.text) == ("binary", "")


def test_long_text_is_cut_at_the_read_limit(tmp_path: Path) -> None:
    path = write(tmp_path, "big.csv", b"a,b\n" * (extract.TEXT_READ_BYTES // 4 + 10))
    got = extract.extract_file(path, "big.csv", "text/csv", 1)
    assert got.truncated and len(got.text) == extract.TEXT_READ_BYTES


def test_small_image_is_sent_as_is_and_big_one_downscaled() -> None:
    small = make_image(100, 50)
    uri, size = images.prepare(small, 2048)
    assert size == (100, 50) and base64.b64decode(uri.split(",", 1)[1]) == small
    big = make_noise_jpeg(3000, 1000, quality=70)
    uri, size = images.prepare(big, 1024)
    assert uri.startswith("data:image/jpeg;base64,") and size == (1024, 341)
    decoded = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])))
    assert decoded.size == (1024, 341)


def test_bad_images_are_refused() -> None:
    with pytest.raises(MediaError, match="could not read this image"):
        images.prepare(b"not an image", 2048)
    out = io.BytesIO()
    Image.new("1", (10_000, 10_000)).save(out, "PNG")  # 100 Mpx, a few KB: a bomb
    with pytest.raises(MediaError, match="too large"):
        images.prepare(out.getvalue(), 2048)


def test_output_files_are_collected_safely(tmp_path: Path) -> None:
    out = tmp_path / files.OUTPUT_DIR
    (out / "sub").mkdir(parents=True)
    (out / "chart.png").write_bytes(b"png")
    (out / "sub" / "t.csv").write_bytes(b"a")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not send")
    (out / "link.txt").symlink_to(secret)
    os.link(secret, out / "hard.txt")
    os.mkfifo(out / "pipe")
    got = files.collect(tmp_path)
    assert got.files == [("chart.png", b"png"), ("t.csv", b"a")]
    assert sorted(s.split(":")[0] for s in got.skipped) == ["hard.txt", "link.txt", "pipe"]


def test_output_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "MAX_OUTPUT_FILES", 2)
    monkeypatch.setattr(files, "MAX_OUTPUT_FILE_BYTES", 10)
    out = tmp_path / files.OUTPUT_DIR
    out.mkdir()
    for name, size in (("a", 5), ("b", 50), ("c", 5), ("d", 5)):
        (out / name).write_bytes(b"x" * size)
    got = files.collect(tmp_path)
    assert [name for name, _ in got.files] == ["a", "c"]
    assert got.skipped == ["b: over 0 MB", "d: more than 2 files"]


def test_input_store_names_and_pruning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "KEEP_INPUT_FILES", 2)
    store = files.InputStore(tmp_path)
    assert store.write("tg1", "../../etc/passwd", b"x") == "passwd"
    os.utime(store.dir_for("tg1") / "passwd", (999, 999))
    assert files.safe_name("my report (final).pdf") == "my_report_final_.pdf"
    assert files.safe_name("...") == "file"
    for i, name in enumerate(("a.txt", "b.txt", "c.txt")):
        store.write("tg1", name, b"x")
        os.utime(store.dir_for("tg1") / name, (1000 + i, 1000 + i))
    store.write("tg1", "d.txt", b"x")
    assert sorted(p.name for p in store.dir_for("tg1").iterdir()) == ["c.txt", "d.txt"]


def test_stage_copies_inputs(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "data.csv").write_bytes(b"1,2")
    (inputs / ".dl-partial").write_bytes(b"half")
    work = tmp_path / "work"
    work.mkdir()
    files.stage(work, inputs, None)
    assert [p.name for p in (work / "input").iterdir()] == ["data.csv"]
    (work / "input" / "data.csv").write_bytes(b"changed")
    assert (inputs / "data.csv").read_bytes() == b"1,2"  # the original is untouched
    assert (work / "output").is_dir()


def test_without_images_keeps_text() -> None:
    msgs = [{"role": "user", "content": [{"type": "text", "text": "hi"},
             {"type": "image_url", "image_url": {"url": "data:,"}}]}]  # fmt: skip
    assert without_images(msgs) == [{"role": "user", "content": f"hi\n{NOT_SHOWN}"}]


class Refuses:
    def __init__(self, message: str, status: int = 400) -> None:
        self.error = ProviderError(message, status)
        self.calls: list[list[dict[str, object]]] = []

    async def stream(
        self,
        messages: list[dict[str, object]],
        tools: object = None,
        on_text: OnText | None = None,
        *,
        model: str | None = None,
        on_wait: OnText | None = None,
    ) -> Completion:
        self.calls.append(messages)
        if any(isinstance(m["content"], list) for m in messages):
            raise self.error
        return Completion(content="ok")

    async def complete(self, *args: object, **kwargs: object) -> Completion:
        return Completion(content="ok")

    async def context_tokens(self, model: str | None = None) -> int | None:
        return None

    async def parameters(self, model: str | None = None) -> int | None:
        return None


IMAGE_MSG = [{"role": "user", "content": [{"type": "text", "text": "x"},
              {"type": "image_url", "image_url": {"url": "data:,"}}]}]  # fmt: skip


async def test_vision_gate_remembers_a_refusal_per_model(tmp_path: Path) -> None:
    state = tmp_path / "vision.json"
    llm = Refuses("HTTP 400: model does not support image input")
    seen = VisionState("auto", "m1", state)
    gate = VisionGate(llm, seen, "not shown")
    assert seen.enabled()
    out = await gate.stream(IMAGE_MSG)
    # What was dropped comes back with the completion, for the person to read.
    assert out.content == "ok" and out.notes == ["not shown"]
    assert not seen.enabled() and len(llm.calls) == 2
    assert not VisionState("auto", "m1", state).enabled()
    assert VisionState("auto", "other-model", state).enabled()


async def test_vision_gate_passes_other_errors(tmp_path: Path) -> None:
    seen = VisionState("auto", "m", None)
    gate = VisionGate(Refuses("HTTP 400: context length exceeded"), seen, "not shown")
    with pytest.raises(ProviderError):
        await gate.stream(IMAGE_MSG)
    assert seen.enabled()
    gate = VisionGate(Refuses("image server busy", status=503), seen, "not shown")
    with pytest.raises(ProviderError):
        await gate.stream(IMAGE_MSG)


async def test_transcriber_errors_are_sentences(fake_llm: FakeOpenAI) -> None:
    async with httpx.AsyncClient() as http:
        t = Transcriber(http, fake_llm.base_url, "key", "whisper-1", timeout_s=0.2)
        fake_llm.transcribe_error = 401
        with pytest.raises(MediaError, match="SPEECH_API_KEY"):
            await t.transcribe(b"x", "v.ogg", "audio/ogg")
        fake_llm.transcribe_error = 500
        with pytest.raises(MediaError, match="HTTP 500"):
            await t.transcribe(b"x", "v.ogg", "audio/ogg")
        fake_llm.transcribe_error, fake_llm.transcribe_delay = None, 1.0
        with pytest.raises(MediaError, match="took too long"):
            await t.transcribe(b"x", "v.ogg", "audio/ogg")
        off = Transcriber(http, None, None, "whisper-1", timeout_s=1)
        with pytest.raises(MediaError, match="SPEECH_BASE_URL"):
            await off.transcribe(b"x", "v.ogg", "audio/ogg")


def test_pdf_without_text_layer_gives_no_text(tmp_path: Path) -> None:
    path = write(tmp_path, "scan.pdf", make_pdf(["", ""]))
    got = extract.extract_file(path, "scan.pdf", None, 10)
    assert (got.pages, got.text) == (2, "")


async def test_doctor_probes_transcription_without_sending_audio(
    app: App, fake_llm: FakeOpenAI
) -> None:
    from bot.media.doctor import check_media

    lines = {r.name: r for r in await check_media(app)}
    assert lines["transcription"].ok and "answers" in lines["transcription"].detail
    assert fake_llm.transcriptions[0].get("file") is None  # nothing to transcribe, no bill
    assert "not known yet" in lines["vision"].detail
    fake_llm.transcribe_error = 404  # a model endpoint without speech-to-text
    lines = {r.name: r for r in await check_media(app)}
    assert lines["transcription"].ok and "not offered" in lines["transcription"].detail
    fake_llm.transcribe_error = 500  # one that has it, failing
    lines = {r.name: r for r in await check_media(app)}
    assert not lines["transcription"].ok and "HTTP 500" in lines["transcription"].detail


def test_speech_url_setting(tmp_path: Path) -> None:
    from bot.config import load_settings
    from bot.errors import ConfigError

    assert load_settings(speech_base_url="OFF").speech_base_url == "off"
    assert load_settings(speech_base_url="http://h:8000/v1/").speech_base_url == (
        "http://h:8000/v1"
    )
    with pytest.raises(ConfigError, match="SPEECH_BASE_URL: must start with http"):
        load_settings(speech_base_url="localhost:8000")


def test_a_request_without_images_streams_past_the_vision_gate() -> None:
    llm = Refuses("unused")
    gate = VisionGate(llm, VisionState("auto", "m", None), "not shown")
    # A wrapper that passes streams on (metering's) is passed too; one that acts on each
    # stream is kept, and hands it on to the gate itself.
    assert text_model(ModelWrapper(gate)) is llm

    class Acting(ModelWrapper):
        async def stream(self, *args: Any, **kwargs: Any) -> Completion:
            return await self.inner.stream(*args, **kwargs)

    acting = Acting(gate)
    assert text_model(ModelWrapper(acting)) is acting
