"""The learned sparse encoder (SPLADE): a text becomes weighted vocabulary terms, no torch.

The ONNX graph takes ``input_ids``, ``attention_mask`` (and ``token_type_ids`` when it
declares it) and returns one row per text over the whole vocabulary, ``sparse``
``(batch, vocab)``: the maximum over the text's unmasked tokens of ``log(1 + ReLU(logits))``
of the masked-language-model head. Most of a row is zero; what is not names the text's own
words and the words it implies (a clause about "disclose" also weighs "secret", "secrecy"),
which is what BM25 cannot do.

Each text keeps its :data:`DEFAULT_MAX_TERMS` heaviest terms (SPLADE-tiny gives a sentence 25 to
150 non-zero terms and a 100-word paragraph 100 to 270, so the cap trims only the longest
passages; it bounds memory and the postings of an index). A vector is a :class:`SparseVector`: term ids ascending, float32 weights.

The vocabulary head (``hidden × vocab`` per token) costs most of the time, so batches are capped
in tokens (``max_batch_tokens``): the head's intermediate ``(tokens, vocab)`` projection grows with
it, and it is cheapest while it stays in the CPU's cache (:data:`DEFAULT_BATCH_TOKENS`).

Example:
    >>> enc = OnnxSparseEncoder.from_bundle("models/bundles/default")  # doctest: +SKIP
    >>> vec = enc.encode_sparse(["The receiving party shall not disclose the confidential information."])[0]  # doctest: +SKIP
    >>> [enc.term(i) for i in vec.top(3)]  # doctest: +SKIP
    ['confidential', 'shall', 'party']
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BundleError, ConfigError, MeteoraError, ModelError
from .bundle import Bundle, sha256_file
from .onnx_session import create_session, feed_for, load_tokenizer, pad_encodings, tokenize_batch
from .sparse_index import SparseVector, sparsify

__all__ = ["DEFAULT_BATCH_TOKENS", "DEFAULT_MAX_TERMS", "SPARSE_KIND", "OnnxSparseEncoder"]

#: Terms kept per text (the heaviest; ties to the lower term id).
DEFAULT_MAX_TERMS = 256
#: The bundle component kind of a sparse encoder.
SPARSE_KIND = "sparse_encoder"
_OUTPUT = "sparse"
_VARIANTS = ("fp32", "int8-dot", "int8")


#: Tokens per model call (texts × padded length; a longer text runs alone). The head's ``(tokens, vocab)``
#: projection is written by the MatMul and read back by the max over tokens: at 64 tokens (7.8 MB) it
#: mostly stays in cache. One thread, 40 HotpotQA sentences: 108 ms at 64 tokens against 184 ms at
#: 512 (Intel Xeon, AVX-512, AMX); paragraphs alike (0.81 s against 0.89 s for 60).
DEFAULT_BATCH_TOKENS = 64

class OnnxSparseEncoder:
    """A SPLADE model run by onnxruntime: texts to :class:`SparseVector`.

    Args:
        model_path: the ``.onnx`` file (output ``sparse``, ``(batch, vocab)``).
        tokenizer_path: its ``tokenizer.json``.
        max_length: tokens per text, including special tokens (longer texts are truncated).
        max_terms: terms kept per text (the heaviest).
        threads: onnxruntime intra-op threads.
        max_batch_tokens: cap on ``texts × padded length`` per model call (see :data:`DEFAULT_BATCH_TOKENS`).
        pad_id: the padding token id.
        identity: what indexes and traces record; derived from the model's sha256 when absent.
        output: the graph's output holding the pooled vectors.

    Raises:
        ConfigError: an option is out of range.
        BundleError: the tokenizer is missing or unreadable.
        ModelError: the model cannot be loaded or does not output ``sparse`` ``(batch, vocab)``.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        tokenizer_path: str | os.PathLike[str],
        *,
        max_length: int = 256,
        max_terms: int = DEFAULT_MAX_TERMS,
        threads: int = 1,
        max_batch_tokens: int = DEFAULT_BATCH_TOKENS,
        pad_id: int = 0,
        identity: str | None = None,
        output: str = _OUTPUT,
    ) -> None:
        for name, value in (("max_length", max_length), ("max_terms", max_terms), ("threads", threads),
                            ("max_batch_tokens", max_batch_tokens)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        self.max_length, self.max_terms, self.threads = max_length, max_terms, threads
        self.max_batch_tokens, self.pad_id = max_batch_tokens, int(pad_id)
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise ModelError(f"sparse ONNX model not found: {self.model_path}; install it with 'meteora-edge models install'")
        self._tokenizer = load_tokenizer(tokenizer_path, max_length=max_length)
        self._session = create_session(self.model_path, threads=threads)
        self._lock = threading.Lock()
        self._output = output
        outputs = {o.name: o for o in self._session.get_outputs()}
        spec = outputs.get(output)
        shape = list(spec.shape or []) if spec is not None else []
        if spec is None or len(shape) != 2:
            raise ModelError(f"{self.model_path}: expected an output {output!r} of shape (batch, vocab), the graph has "
                             f"{', '.join(f'{o.name} {list(o.shape or [])}' for o in outputs.values())}; "
                             "build it with 'meteora-edge models install'")
        vocab = self._tokenizer.get_vocab_size()
        if isinstance(shape[1], int) and shape[1] != vocab:
            raise ModelError(f"{self.model_path} scores {shape[1]} terms but its tokenizer has {vocab}; "
                             "the model and tokenizer do not belong together")
        self.vocab_size = int(vocab)
        self._identity = identity

    @property
    def identity(self) -> str:
        """What indexes record: the model's sha256 prefix, variant and ``max_terms`` (``sparse:…``)."""
        if self._identity is None:
            self._identity = f"sparse:onnx:{sha256_file(self.model_path)[:12]}:{self.max_terms}"
        return self._identity

    @classmethod
    def from_bundle(cls, path: str | os.PathLike[str] | Bundle, *, component: str = SPARSE_KIND,
                    threads: int = 1, precision: str = "auto", max_terms: int = DEFAULT_MAX_TERMS) -> OnnxSparseEncoder:
        """The bundle's sparse encoder, after checking its files' sizes and hashes.

        ``precision`` ``"auto"`` runs fp32 when the bundle has it (else int8-dot, else int8).

        Raises:
            BundleError: no such component, another kind, missing or tampered files.
            ModelError: the graph is not a sparse encoder's.
        """
        if precision not in ("auto", *_VARIANTS):
            raise ConfigError(f"precision must be one of auto, {', '.join(_VARIANTS)}, got {precision!r}")
        bundle = path if isinstance(path, Bundle) else Bundle.load(path)
        comp = bundle.component(component)
        if comp.kind != SPARSE_KIND:
            raise BundleError(f"component {component!r} of {bundle.root} is a {comp.kind!r}, not a {SPARSE_KIND}")
        # fp32 first: the int8 recipes quantise the vocabulary head's input per tensor, which moves the weights
        variant = precision if precision != "auto" else next((v for v in _VARIANTS if v in comp.files), None)
        if variant not in comp.files:
            have = ", ".join(v for v in _VARIANTS if v in comp.files) or "none"
            raise BundleError(f"{SPARSE_KIND} of bundle {bundle.root} has no {variant or 'model'} file (it has: {have}); "
                              "install it again with 'meteora-edge models install'")
        settings = comp.settings
        identity = f"sparse:{component}:{comp.files[variant].sha256[:12]}:{variant}:{max_terms}"
        return cls(bundle.file(component, variant), bundle.file(component, "tokenizer"),
                   max_length=int(settings.get("max_length", 256)), max_terms=max_terms,
                   pad_id=int(settings.get("pad_id", 0)), threads=threads, identity=identity,
                   output=str(settings.get("output", _OUTPUT)))

    def term(self, term_id: int) -> str:
        """The vocabulary entry of ``term_id`` (for showing a vector's terms)."""
        return str(self._tokenizer.id_to_token(int(term_id)))

    def term_id(self, token: str) -> int | None:
        """The id of a vocabulary entry, or None."""
        found = self._tokenizer.token_to_id(token)
        return None if found is None else int(found)

    def encode_sparse(self, texts: Sequence[str]) -> list[SparseVector]:
        """Each text's sparse vector, in input order (an empty text has no terms).

        Raises:
            InputError: a text that is not valid Unicode.
            ModelError: the tokenizer or the model failed.
        """
        batch = list(texts)
        if not batch:
            return []
        encodings = tokenize_batch(self._tokenizer, batch)
        lengths = [len(e.ids) for e in encodings]
        order = sorted(range(len(batch)), key=lambda i: lengths[i])
        out: list[SparseVector | None] = [None] * len(batch)
        start = 0
        while start < len(order):
            end = start + 1  # grow the batch while texts × the longest length stays under the cap
            while end < len(order) and (end + 1 - start) * lengths[order[end]] <= self.max_batch_tokens:
                end += 1
            chunk = order[start:end]
            rows = self._run([encodings[i] for i in chunk])
            for i, row in zip(chunk, rows):
                out[i] = sparsify(row, self.max_terms)
            start = end
        return [v for v in out if v is not None]

    def _run(self, encodings: list[Any]) -> np.ndarray:
        ids, mask = pad_encodings(encodings, pad_id=self.pad_id)
        feed = feed_for(self._session, {"input_ids": ids, "attention_mask": mask})
        try:
            with self._lock:
                result = self._session.run([self._output], feed)[0]
        except MeteoraError:
            raise
        except Exception as exc:  # onnxruntime raises its own pybind exception types
            raise ModelError(f"the sparse model failed on a batch of {len(encodings)} texts: {str(exc)[:200]}") from None
        rows = np.asarray(result, dtype=np.float32)
        if rows.shape != (len(encodings), self.vocab_size) or not np.isfinite(rows).all():
            raise ModelError(f"the sparse model returned shape {rows.shape} (or non-finite values) for "
                             f"{len(encodings)} texts; expected ({len(encodings)}, {self.vocab_size})")
        return rows

    def __repr__(self) -> str:
        return f"OnnxSparseEncoder({str(self.model_path)!r}, max_terms={self.max_terms})"
