"""The model's size as the server says it (bot/llm/client.py ModelSize): llama-server's
model list and Ollama's /api/show, read from their answers."""

from __future__ import annotations

from bot.llm.client import _from_models, _ollama_size

# GET /v1/models of the xllamacpp 2026.10.11549 llama-server the real tier runs, serving
# Qwen2.5-Coder-1.5B-Instruct Q4_K_M (asked on 2026-12-06; `models` list shortened).
LLAMA_SERVER = {
    "object": "list",
    "data": [
        {
            "id": "qwen2.5-coder-1.5b-instruct-q4_k_m",
            "object": "model",
            "owned_by": "llamacpp",
            "meta": {
                "vocab_type": 2,
                "n_vocab": 151936,
                "n_ctx": 4096,
                "n_ctx_train": 32768,
                "n_embd": 1536,
                "n_params": 1777088000,
                "size": 1111370240,
                "ftype": "Q4_K - Medium",
            },
        }
    ],
}


def test_llama_server_says_n_params_of_the_model_asked() -> None:
    assert _from_models(LLAMA_SERVER, "qwen2.5-coder-1.5b-instruct-q4_k_m", "n_params") == (
        1_777_088_000
    )
    assert _from_models(LLAMA_SERVER, "another", "n_params") is None
    assert _from_models(LLAMA_SERVER, "qwen2.5-coder-1.5b-instruct-q4_k_m") == 4096


def test_ollama_says_a_parameter_size() -> None:
    assert _ollama_size({"details": {"parameter_size": "1.5B"}}) == 1_500_000_000
    assert _ollama_size({"details": {"parameter_size": "494.03M"}}) == 494_030_000
    assert _ollama_size({"details": {"parameter_size": ""}}) is None
    assert _ollama_size({"details": "x"}) is None and _ollama_size([]) is None
