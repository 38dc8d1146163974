"""GGUF conversions for `make test-real` (run by scripts/real_llm.py in its own venv, which
holds the `gguf` package: no torch).

    python real_llm_gguf.py retype SRC DST     chat model: legacy quants re-stored as F16
    python real_llm_gguf.py bert MODEL_ZIP DST  MiniLM (its PyPI wheel's zip) as a BERT GGUF

Why `retype`: small models keep many legacy-quant tensors (Q5_0, Q8_0: their widths are
not multiples of 256); stored as F16 they read about twice as fast on the server's portable
AVX2 build (measured: ~58 against ~28 prompt tokens a second on 2 cores), and some prebuilt
CPU backends use AVX-VNNI in their legacy-quant kernels and die with SIGILL without it.
K-quants, F16 and F32 are kept as they are.

`bert` follows llama.cpp's convert_hf_to_gguf.py for BertModel: the tensor names come from
gguf's own BERT name map, the WordPiece vocabulary becomes llama.cpp's "phantom space" form
(a word start is marked by U+2581, a `##` continuation loses its prefix), mean pooling.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as VT
from gguf.quants import dequantize

KEEP = {Q.F32, Q.F16, Q.BF16, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K}


def retype(src: Path, dst: Path) -> None:
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(dst, arch=arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        kind = field.types[0]
        if kind == VT.ARRAY:
            writer.add_key_value(key, field.contents(), kind, sub_type=field.types[-1])
        else:
            writer.add_key_value(key, field.contents(), kind)
    for t in reader.tensors:
        if t.tensor_type in KEEP:
            writer.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
        else:
            writer.add_tensor(t.name, dequantize(t.data, t.tensor_type).astype(np.float16))
    _finish(writer)


def _phantom(token: str) -> str:
    if token.startswith("[") and token.endswith("]"):
        return token
    return token[2:] if token.startswith("##") else "\u2581" + token


def bert(model_zip: Path, dst: Path) -> None:
    from safetensors.numpy import load

    with zipfile.ZipFile(model_zip) as zf:
        config = json.loads(zf.read("config.json"))
        tokenizer = json.loads(zf.read("tokenizer.json"))
        weights = load(zf.read("model.safetensors"))
    vocab: dict[str, int] = tokenizer["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    special = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}

    writer = gguf.GGUFWriter(dst, arch="bert")
    writer.add_name("all-MiniLM-L6-v2")
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_layer_norm_eps(config["layer_norm_eps"])
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("bert")
    writer.add_token_type_count(config["type_vocab_size"])
    writer.add_tokenizer_pre("default")
    writer.add_token_list([_phantom(t) for t in tokens])
    writer.add_token_types(
        [gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t in tokens]
    )
    # llama.cpp frames a BERT input as [CLS] ... [SEP]: bos and eos.
    writer.add_bos_token_id(vocab["[CLS]"])
    writer.add_eos_token_id(vocab["[SEP]"])
    writer.add_sep_token_id(vocab["[SEP]"])
    writer.add_pad_token_id(vocab["[PAD]"])
    writer.add_unk_token_id(vocab["[UNK]"])
    writer.add_mask_token_id(vocab["[MASK]"])

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, config["num_hidden_layers"])
    for name, array in weights.items():
        if name.endswith("position_ids") or name.startswith("pooler."):
            continue  # not part of the encoder llama.cpp runs
        new = names.get_name(name.removeprefix("bert."), try_suffixes=(".weight", ".bias"))
        if new is None:
            raise SystemExit(f"no GGUF name for tensor {name}")
        writer.add_tensor(new, array.astype(np.float32))
    _finish(writer)


def _finish(writer: gguf.GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    what, src, dst = sys.argv[1:4]
    {"retype": retype, "bert": bert}[what](Path(src), Path(dst))
