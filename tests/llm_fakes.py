"""A stand-in for ``llama_cpp.Llama``: byte tokens, scripted replies, no weights.

Tokens: ``<|im_start|>`` = 1, ``<|im_end|>`` = 2 (parsed only with ``special=True``), every
other byte b = 256 + b. Replies are strings or callables ``prompt_text -> str``; the stop
strings and ``max_tokens`` (counted in bytes) are applied like llama-cpp-python does. With
``logits`` (a callable ``prompt_text -> {text: logit}``), a ``logits_processor`` sees a
vocabulary of 512 logits where the first token of each text gets its value (others -10).
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIALS = {"<|im_start|>": 1, "<|im_end|>": 2}


class FakeLlama:
    def __init__(
        self,
        replies: Sequence[str | Callable[[str], str]] = (),
        *,
        n_ctx: int = 4096,
        template: str | None = CHATML,
        raises: Exception | None = None,
        delay: float = 0.0,
        logits: Callable[[str], dict[str, float]] | None = None,
    ) -> None:
        self.replies = list(replies)
        self._n_ctx = n_ctx
        self.metadata = {"tokenizer.chat_template": template} if template else {}
        self.raises = raises
        self.delay = delay
        self.logits = logits
        self.calls: list[dict[str, Any]] = []
        self.resets = 0
        self._busy = threading.Lock()
        self.overlapped = False

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        s = text.decode("utf-8")
        out: list[int] = []
        i = 0
        while i < len(s):
            hit = next((k for k in SPECIALS if special and s.startswith(k, i)), None)
            if hit:
                out.append(SPECIALS[hit])
                i += len(hit)
            else:
                out += [256 + b for b in s[i].encode("utf-8")]
                i += 1
        return out

    def detokenize(self, tokens: list[int], prev_tokens: list[int] | None = None, special: bool = False) -> bytes:
        names = {v: k for k, v in SPECIALS.items()}
        out = b""
        for t in tokens:
            if t in names:
                out += names[t].encode() if special else b""
            elif t >= 256:
                out += bytes([t - 256])
        return out

    def n_ctx(self) -> int:
        return self._n_ctx

    def token_bos(self) -> int:
        return -1

    def token_eos(self) -> int:
        return 2

    def reset(self) -> None:
        self.resets += 1

    def prompt_text(self, call: int = -1) -> str:
        return self.detokenize(self.calls[call]["prompt"], special=True).decode("utf-8")

    def create_completion(self, prompt: list[int], **kw: Any) -> dict[str, Any]:
        if not self._busy.acquire(blocking=False):
            self.overlapped = True
            self._busy.acquire()
        try:
            self.calls.append({"prompt": list(prompt), **kw})
            if self.delay:
                time.sleep(self.delay)
            if self.raises is not None:
                raise self.raises
            if kw.get("logits_processor") and self.logits is not None:
                import numpy as np

                vector = np.full(512, -10.0, dtype=np.float32)
                for text, value in self.logits(self.prompt_text()).items():
                    vector[self.tokenize(text.encode("utf-8"))[0]] = value
                for processor in kw["logits_processor"]:
                    vector = processor(list(prompt), vector)
            reply = self.replies.pop(0) if self.replies else ""
            text = reply(self.prompt_text()) if callable(reply) else reply
            finish = "stop"
            cut = [text.find(s) for s in kw.get("stop") or [] if s and s in text]
            if cut:
                text = text[: min(cut)]
            data = text.encode("utf-8")
            if len(data) > kw["max_tokens"]:
                text, finish = data[: kw["max_tokens"]].decode("utf-8", errors="ignore"), "length"
            return {
                "choices": [{"text": text, "finish_reason": finish}],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(text.encode("utf-8"))},
            }
        finally:
            self._busy.release()


def write_gguf(path: Path, metadata: dict[str, Any], *, n_tensors: int = 1, version: int = 3, magic: bytes = b"GGUF",
               tensor_elements: int = 8) -> Path:
    """A small valid GGUF: string/int/bool metadata and ``n_tensors`` F32 tensors of ``tensor_elements``
    zeros each (infos, alignment padding to 32 bytes and data), for the header readers."""

    def string(s: str) -> bytes:
        data = s.encode("utf-8")
        return struct.pack("<Q", len(data)) + data

    body = b""
    for key, value in metadata.items():
        body += string(key)
        if isinstance(value, bool):
            body += struct.pack("<I?", 7, value)
        elif isinstance(value, int):
            body += struct.pack("<Iq", 11, value)
        elif isinstance(value, list):
            body += struct.pack("<IIQ", 9, 8, len(value)) + b"".join(string(v) for v in value)
        else:
            body += struct.pack("<I", 8) + string(str(value))
    tensor_bytes = -(-tensor_elements * 4 // 32) * 32
    for i in range(n_tensors):  # name, 1 dimension, its size, type F32 (0), offset into the data section
        body += string(f"t{i}") + struct.pack("<IQIQ", 1, tensor_elements, 0, i * tensor_bytes)
    header = struct.pack("<4sIQQ", magic, version, n_tensors, len(metadata)) + body
    header += b"\0" * (-len(header) % 32)
    path.write_bytes(header + b"\0" * (n_tensors * tensor_bytes))
    return path
