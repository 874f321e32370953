"""The ONNX sentence encoder: onnxruntime + tokenizers + numpy, no torch.

Texts are tokenised (truncated at the model's max length), sorted by length, run in
small dynamically padded batches, mean-pooled over the attention mask, L2-normalised and
put back in input order. With an :class:`~.embedding_cache.EmbeddingCache`, texts embedded
before (by the same model files and settings) are read back instead of being run again.

A bundle may hold several variants of one model (``fp32``, ``int8``, ``int8-dot``; see
:mod:`.precision`); ``precision="auto"`` picks by the CPU and says why in
:attr:`OnnxEncoder.precision_choice`.

Example:
    >>> enc = OnnxEncoder.from_bundle("models/bundles/default")  # doctest: +SKIP
    >>> enc.encode(["Either party may terminate."]).shape  # doctest: +SKIP
    (1, 384)
    >>> enc.precision_choice["precision"]  # doctest: +SKIP
    'int8-dot'
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from .bundle import Bundle, sha256_file
from .embedding_cache import EmbeddingCache, text_digest
from .analyzer import DEFAULT_ANALYZER, Analyzer, analyzer_from_record
from .encoders import DEFAULT_COSINE_TAU, EncoderLike, HashingEncoder, normalize_rows
from ..errors import BundleError, ConfigError, MeteoraError, ModelError
from .onnx_session import create_session, feed_for, load_tokenizer, pad_encodings, tokenize_batch
from .cpu_features import cpu_info
from .precision import MIN_COSINE, PRECISIONS, VARIANTS, below_bound, choose_precision, probe_cosine
from .sparse_encoder import SPARSE_KIND, OnnxSparseEncoder
from .token_memo import DEFAULT_TOKEN_MEMO_BYTES, TokenMemo

from .piece_vectors import PieceVectors
# what a bundle settles before its model runs (onnx_cross_encoder and the tests import these from here)
from .encoder_settings import POOLINGS, CacheSetting
from .encoder_settings import cache_key as _cache_key
from .encoder_settings import dynamic_activations as _dynamic_activations
from .encoder_settings import encoder_settings as _settings
from .encoder_settings import positive_int as _positive_int
from .encoder_settings import resolve_cache as _resolve_cache

__all__ = ["OnnxEncoder", "load_encoder", "POOLINGS", "CacheSetting"]

logger = logging.getLogger(__name__)


def pool(hidden: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
    """Pool token vectors ``(batch, seq, dim)`` into ``(batch, dim)`` ("mean" over the mask or "cls")."""
    if pooling == "cls":
        return hidden[:, 0, :]
    weights = mask[:, :, None].astype(np.float32)
    counts = np.maximum(weights.sum(axis=1), 1e-9)
    return (hidden * weights).sum(axis=1) / counts


class OnnxEncoder(PieceVectors):
    """A sentence encoder running an ONNX model exported by ``meteora-edge export encoder``.

    Args:
        model_path: the ``.onnx`` file (output ``last_hidden_state`` or the first output).
        tokenizer_path: its ``tokenizer.json``.
        max_length: tokens per text, including special tokens (longer texts are truncated).
        pooling: ``"mean"`` (attention-masked mean) or ``"cls"``.
        normalize: L2-normalise each embedding.
        threads: onnxruntime intra-op threads.
        batch_size: texts per model call (length-sorted, padded to the longest).
        max_batch_tokens: cap on ``texts × padded length`` per call, so long texts run in
            smaller batches (peak memory grows with it; attention with its square).
        pad_id: the padding token id.
        dimension: expected embedding size, checked against the graph when given.
        identity: what indexes and traces record; derived from the model's sha256 when absent.
        cache: where to keep embeddings between calls and processes (None: nowhere).
        cache_key: what the cache files vectors under; derived from the model and tokenizer
            sha256, the settings above and the onnxruntime version when absent.
        lazy: with a cache and a known ``dimension``, open the model and tokenizer only when a
            text is not in the cache (a fully cached call never starts onnxruntime); model
            errors then surface at that first call instead of here.
        cosine_tau: the cosine verification rung's threshold calibrated for this model, in
            [-1, 1] (a bundle records it as the ``cosine_tau`` setting; default 0.35, set for MiniLM).
        analyzer: the lexical analyser queries get with this encoder when no index says
            otherwise (a bundle records it as the ``analyzer`` setting; default ``english``).
        isolate_texts: run every text alone (no padding, no batch neighbours). A graph that
            quantises its activations per tensor at run time (the int8 variants) picks one
            scale for the whole batch, so a text's vector would depend on the texts it ran
            with (cosine about 0.99 to itself alone); isolated, it is the same vector however
            the texts are batched. :meth:`from_bundle` sets it for such variants.
        sessions: onnxruntime sessions (each with ``threads`` intra-op threads) that run batches
            at the same time; more than one helps index builds on cores shared with other
            work, and costs a copy of the model's weights per session.
        token_memo_bytes: how many bytes of word-piece vectors the model's runs leave in memory
            for :meth:`token_vectors` (the texts used last; 0: none). The token cover then reads
            a given passage's vectors from the pass that embedded it instead of running the
            model on it again. In this process only; nothing is written.

    Raises:
        ConfigError: an option is out of range.
        BundleError: the tokenizer is missing or unreadable.
        ModelError: the model cannot be loaded or does not produce ``(batch, seq, dimension)``.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        tokenizer_path: str | os.PathLike[str],
        *,
        max_length: int = 256,
        pooling: str = "mean",
        normalize: bool = True,
        threads: int = 1,
        batch_size: int = 8,
        max_batch_tokens: int = 512,
        pad_id: int = 0,
        dimension: int | None = None,
        identity: str | None = None,
        cache: EmbeddingCache | None = None,
        cache_key: str | None = None,
        lazy: bool = False,
        cosine_tau: float = DEFAULT_COSINE_TAU,
        analyzer: Analyzer = DEFAULT_ANALYZER,
        isolate_texts: bool = False,
        sessions: int = 1,
        token_memo_bytes: int = DEFAULT_TOKEN_MEMO_BYTES,
    ) -> None:
        if isinstance(cosine_tau, bool) or not isinstance(cosine_tau, (int, float)) or not -1.0 <= cosine_tau <= 1.0:
            raise ConfigError(f"cosine_tau must be a number in [-1, 1] (a cosine), got {cosine_tau!r}")
        if not isinstance(analyzer, Analyzer):
            raise ConfigError(f"analyzer must be an Analyzer, got {type(analyzer).__name__}")
        self.cosine_tau = float(cosine_tau)
        self.analyzer = analyzer
        self.max_length = _positive_int("max_length", max_length)
        self.batch_size = _positive_int("batch_size", batch_size)
        self.max_batch_tokens = _positive_int("max_batch_tokens", max_batch_tokens)
        self.threads = _positive_int("threads", threads)
        self.sessions = _positive_int("sessions", sessions)
        self.isolate_texts = bool(isolate_texts)
        if isinstance(token_memo_bytes, bool) or not isinstance(token_memo_bytes, int) or token_memo_bytes < 0:
            raise ConfigError(f"token_memo_bytes must be an integer >= 0 (0: keep none), got {token_memo_bytes!r}")
        self.token_memo = TokenMemo(token_memo_bytes)
        if pooling not in POOLINGS:
            raise ConfigError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        self.pooling = pooling
        self.normalize = bool(normalize)
        self.pad_id = int(pad_id)
        self.model_path = Path(model_path)
        self.tokenizer_path = Path(tokenizer_path)
        if cache is not None and not isinstance(cache, EmbeddingCache):
            raise ConfigError(f"cache must be an EmbeddingCache or None, got {type(cache).__name__}")
        self.cache = cache
        self._cache_key = cache_key
        self.precision_choice: dict[str, str] | None = None
        if not self.model_path.is_file():
            raise ModelError(f"ONNX model not found: {self.model_path}; install one with 'meteora-edge models install "
                             "minilm-l6-v2 --bundle DIR' (no torch), or export one with 'meteora-edge export encoder'")
        self._identity = identity
        self._load_lock = threading.Lock()
        self._session: Any = None
        self._more_sessions: list[Any] = []
        self._tokenizer: Any = None
        self._output = ""
        self._expected_dimension = dimension
        if lazy and cache is not None and dimension is not None:
            self.dimension = _positive_int("dimension", dimension)
        else:
            self._load()

    def _load(self) -> None:
        """Open the tokenizer and the onnxruntime session (once) and check the output shape."""
        with self._load_lock:
            if self._session is not None:
                return
            tokenizer = load_tokenizer(self.tokenizer_path, max_length=self.max_length)
            session = create_session(self.model_path, threads=self.threads)
            self._more_sessions = [create_session(self.model_path, threads=self.threads)
                                   for _ in range(self.sessions - 1)]
            outputs = session.get_outputs()
            spec = next((o for o in outputs if o.name == "last_hidden_state"), outputs[0])
            self._tokenizer, self._output = tokenizer, spec.name
            self._session = session
            try:
                self.dimension = self._check_output(spec, self._expected_dimension)
            except MeteoraError:
                self._session = None
                raise

    def _check_output(self, spec: Any, expected: int | None) -> int:
        shape = list(spec.shape or [])
        if len(shape) != 3:
            raise ModelError(
                f"{self.model_path}: output {spec.name!r} has shape {shape}, expected (batch, sequence, dimension); "
                "export a feature-extraction model"
            )
        declared = shape[-1] if isinstance(shape[-1], int) else None
        if expected is not None and declared is not None and declared != expected:
            raise BundleError(
                f"{self.model_path} produces {declared}-dimensional vectors but the manifest says {expected}; "
                "re-export the bundle"
            )
        dimension = declared if declared is not None else expected
        if dimension is None:
            dimension = int(self._run(tokenize_batch(self._tokenizer, ["dimension probe"])).shape[1])
        return int(dimension)

    @classmethod
    def from_bundle(
        cls,
        path: str | os.PathLike[str] | Bundle,
        *,
        threads: int = 1,
        precision: str = "auto",
        batch_size: int = 8,
        component: str = "encoder",
        cache: CacheSetting = None,
        sessions: int = 1,
    ) -> OnnxEncoder:
        """Load the encoder of a bundle after checking its files' sizes and hashes.

        Args:
            path: the bundle folder (or a loaded :class:`Bundle`).
            threads: onnxruntime intra-op threads.
            precision: ``"auto"`` (by the CPU, see :func:`choose_precision`), ``"fp32"``
                (exact), ``"int8"`` (mixed recipe) or ``"int8-dot"`` (for int8 dot-product CPUs).
            batch_size: texts per model call.
            component: the component name in the manifest.
            cache: where embeddings of the texts are kept between calls and processes. ``None``
                (the default): only when ``METEORA_EDGE_CACHE`` names a folder or is ``on`` —
                the library writes nothing derived from your texts unless asked. ``True``: the
                default cache (``METEORA_EDGE_CACHE``, else the user cache folder; ``off``
                disables it). ``False``: none. A folder, or an :class:`EmbeddingCache`.
            sessions: onnxruntime sessions running batches at once (see :class:`OnnxEncoder`).

        A variant whose manifest record says its activations are quantised per tensor at run
        time runs each text alone (``isolate_texts``), so its vectors do not depend on batching.
        With ``"auto"`` on a CPU without int8 dot-product instructions, an int8 choice is first
        run on the bundle's probe texts (:meth:`probe`); if its embeddings fall below
        :data:`~.precision.MIN_COSINE` of the recorded fp32 ones, fp32 runs instead and the
        reason says why (onnxruntime's AVX2 uint8×int8 kernels saturate on some models).

        Raises:
            ConfigError: an unknown precision or cache setting.
            BundleError: no such bundle/component/precision, tampered or truncated files,
                settings that make no sense.
        """
        if precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        bundle = path if isinstance(path, Bundle) else Bundle.load(path)
        comp = bundle.component(component)
        if comp.kind != "encoder":
            raise BundleError(f"component {component!r} of {bundle.root} is a {comp.kind!r}, not an encoder")
        if precision == "auto":
            chosen, reason = choose_precision(comp.files, report=comp.report)
        else:
            chosen, reason = precision, "asked for"
            if precision not in comp.files:
                have = ", ".join(p for p in VARIANTS if p in comp.files) or "none"
                raise BundleError(
                    f"bundle {bundle.root} has no {precision} encoder (it has: {have}); "
                    f"use --precision auto or re-export with --quantize int8"
                )
        if "tokenizer" not in comp.files:
            raise BundleError(f"encoder of bundle {bundle.root} lists no tokenizer file; re-export the bundle")
        settings = _settings(comp.settings, bundle.root)
        calibration = {"cosine_tau": float(comp.settings.get("cosine_tau", DEFAULT_COSINE_TAU))}
        if "analyzer" in comp.settings:
            calibration["analyzer"] = analyzer_from_record(comp.settings["analyzer"], where=f"bundle {bundle.root}",
                                                           error=BundleError)
        tokenizer = bundle.file(component, "tokenizer")
        source = comp.source or bundle.root.name
        resolved_cache = _resolve_cache(cache)  # once: a fallback to fp32 shares it

        def build(variant: str) -> OnnxEncoder:
            isolated = _dynamic_activations(comp.settings, variant)
            key = _cache_key(comp.files[variant].sha256, comp.files["tokenizer"].sha256,
                             {**settings, **({"isolated": True} if isolated else {})})
            return cls(
                bundle.file(component, variant),
                tokenizer,
                threads=threads,
                batch_size=batch_size,
                identity=f"onnx:{source}:{comp.files[variant].sha256[:12]}:{variant}",
                cache=resolved_cache,
                cache_key=key,
                lazy=True,
                isolate_texts=isolated,
                sessions=sessions,
                **settings,
                **calibration,
            )

        encoder = build(chosen)
        if precision == "auto" and chosen != "fp32" and "fp32" in comp.files and not cpu_info().int8_dot:
            # no int8 dot-product instructions: onnxruntime's uint8×int8 kernels can saturate on some
            # models where the export's CPU did not, so the variant is checked here before it runs
            worst = encoder.probe(comp.settings.get("probe"))
            if below_bound(chosen, worst):
                encoder = build("fp32")
                reason = (f"{reason}; but {chosen} on this CPU (no int8 dot-product instructions) gave embeddings "
                          f"too far from fp32 (min cosine {worst:.3f} < {MIN_COSINE[chosen]}), so fp32 runs")
                chosen = "fp32"
        encoder.precision_choice = {"requested": precision, "precision": chosen, "reason": reason}
        logger.info("encoder %s: precision %s (%s)", bundle.root, chosen, reason)
        return encoder

    def probe(self, record: object) -> float | None:
        """The least cosine of this model's embeddings of a bundle's probe texts to the fp32
        embeddings recorded with them (the manifest's ``probe`` setting); None without a record.
        Through the embedding cache when there is one: its vectors were computed on this machine
        by this model, so a repeated check costs a lookup and a warm selection still starts no
        onnxruntime session."""
        if not isinstance(record, Mapping) or not record.get("texts"):
            return None
        vectors = self.encode([str(t) for t in record["texts"]])
        return probe_cosine(vectors, record)

    @property
    def identity(self) -> str:
        """``onnx:<source>:<sha256 prefix>:<precision>``, recorded by local indexes and traces."""
        if self._identity is None:
            self._identity = f"onnx:{self.model_path.name}:{sha256_file(self.model_path)[:12]}"
        return self._identity

    @property
    def cache_key(self) -> str:
        """What the embedding cache files this encoder's vectors under: a hash of the model and
        tokenizer files' sha256, the settings that change a vector and the onnxruntime version."""
        if self._cache_key is None:
            settings = {"max_length": self.max_length, "pooling": self.pooling, "normalize": self.normalize,
                        "pad_id": self.pad_id, **({"isolated": True} if self.isolate_texts else {})}
            self._cache_key = _cache_key(sha256_file(self.model_path), sha256_file(self.tokenizer_path), settings)
        return self._cache_key

    @property
    def input_names(self) -> tuple[str, ...]:
        self._load()
        return tuple(i.name for i in self._session.get_inputs())

    def encode(self, texts: list[str], *, check: Callable[[], None] | None = None) -> np.ndarray:
        """Embed ``texts`` into a float32 ``(len(texts), dimension)`` array, in input order.

        With a cache, texts seen before are read from it and only the others are run (and
        then stored); the vectors are the ones the model produced, bit for bit. ``check`` is
        called before each batch (the batches are the same with it or without); what it raises
        stops the work there.

        Raises:
            ConfigError: an item is not a string.
            ModelError: onnxruntime fails while running.
        """
        texts = self._checked(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self.cache is None:
            return self._encode(texts) if check is None else self._encode(texts, check)
        key = self.cache_key
        digests = [text_digest(t) for t in texts]
        found = self.cache.lookup(key, digests, dimension=self.dimension)
        todo = list({d: t for d, t in zip(digests, texts) if d not in found}.items())
        if todo:
            fresh_texts = [t for _, t in todo]
            computed = self._encode(fresh_texts) if check is None else self._encode(fresh_texts, check)
            fresh = {d: computed[row] for row, (d, _) in enumerate(todo)}
            self.cache.store(key, fresh)
            found.update(fresh)
        return np.stack([found[d] for d in digests]).astype(np.float32, copy=False)

    def _encode(self, texts: list[str], check: Callable[[], None] | None = None) -> np.ndarray:
        """Run the model on ``texts`` (non-empty strings list) in length-sorted batches."""
        self._load()
        encodings = tokenize_batch(self._tokenizer, texts)  # once: the lengths order the batches
        lengths = [len(e.ids) for e in encodings]
        order = np.argsort(lengths, kind="stable")[::-1]
        batches = []
        start = 0
        while start < len(texts):
            longest = lengths[order[start]]
            size = 1 if self.isolate_texts else max(1, min(self.batch_size, self.max_batch_tokens // max(longest, 1)))
            batches.append(order[start : start + size])
            start += size
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        sessions = [self._session, *self._more_sessions][: len(batches)]

        def work(k: int) -> None:  # session k runs batches k, k + n, ... (longest first: the shares even out)
            for rows in batches[k :: len(sessions)]:
                if check is not None:
                    check()
                batch = [encodings[i] for i in rows]
                hidden, mask = self._hidden(batch, sessions[k])
                out[rows] = self._pooled(hidden, mask)
                self._remember([texts[i] for i in rows], batch, hidden)

        if len(sessions) == 1:
            work(0)
        else:
            with ThreadPoolExecutor(len(sessions), thread_name_prefix="meteora-edge-encoder") as pool:
                list(pool.map(work, range(len(sessions))))  # onnxruntime runs without the GIL
        return out

    def _run(self, batch: list[Any], session: Any = None) -> np.ndarray:
        """Embed one batch of tokenizer encodings (on ``session``, by default the first)."""
        return self._pooled(*self._hidden(batch, session))

    def _pooled(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        vectors = pool(hidden, mask, self.pooling)
        return normalize_rows(vectors).astype(np.float32) if self.normalize else vectors.astype(np.float32)

    def _hidden(self, batch: list[Any], session: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """The model's token vectors ``(batch, seq, dim)`` for one batch of encodings, and its attention mask."""
        session = session or self._session
        ids, mask = pad_encodings(batch, pad_id=self.pad_id)
        feed = feed_for(session, {"input_ids": ids, "attention_mask": mask})
        try:
            hidden = session.run([self._output], feed)[0]
        except Exception as exc:  # onnxruntime raises its own pybind exception types
            raise ModelError(f"onnxruntime failed on {self.model_path.name}: {str(exc)[:300]}") from None
        return np.asarray(hidden, dtype=np.float32), mask

    @staticmethod
    def _checked(texts: list[str]) -> list[str]:
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise ConfigError(f"texts[{i}] is {type(text).__name__}, expected str")
        return texts

    def __repr__(self) -> str:
        return (
            f"OnnxEncoder({self.model_path.name!r}, dimension={self.dimension}, max_length={self.max_length}, "
            f"pooling={self.pooling!r}, threads={self.threads}, sessions={self.sessions}, batch_size={self.batch_size}, "
            f"cache={str(self.cache.path) if self.cache else None!r})"
        )


def load_encoder(
    bundle: str | os.PathLike[str] | Bundle | None,
    *,
    threads: int = 1,
    precision: str = "auto",
    cache: CacheSetting = None,
    index_encoder: str | None = None,
    sessions: int = 1,
) -> EncoderLike:
    """The encoder the CLI uses: the bundle's ONNX encoder, or :class:`HashingEncoder` without one.

    The hashing encoder never uses the cache (hashing a text is faster than looking it up).
    When the bundle also holds a learned sparse model (a ``sparse_encoder`` component), the
    encoder carries it as ``sparse_encoder`` (an :class:`~.sparse_encoder.OnnxSparseEncoder`).

    Args:
        bundle: the bundle folder, or None for the hashing encoder.
        threads, precision, cache, sessions: see :meth:`OnnxEncoder.from_bundle`.
        index_encoder: the encoder id an index recorded (``onnx:…:int8``); with
            ``precision="auto"`` the variant it names is run when the bundle has it (and the
            reason says so when it differs from the CPU's choice), so an index built on
            another CPU keeps matching.

    Raises:
        BundleError, ModelError, MissingExtraError, ConfigError: see :meth:`OnnxEncoder.from_bundle`.
    """
    if bundle is None:
        return HashingEncoder()
    loaded = bundle if isinstance(bundle, Bundle) else Bundle.load(bundle)
    encoder = _dense_encoder(loaded, threads=threads, precision=precision, cache=cache, index_encoder=index_encoder,
                             sessions=sessions)
    sparse = next((name for name, comp in loaded.components.items() if comp.kind == SPARSE_KIND), None)
    if sparse is not None:  # the lexical half of the hybrid score can then be the learned sparse model's
        encoder.sparse_encoder = OnnxSparseEncoder.from_bundle(loaded, component=sparse, threads=threads)  # type: ignore[union-attr]
    return encoder


def _dense_encoder(loaded: Bundle, *, threads: int, precision: str, cache: CacheSetting, index_encoder: str | None,
                   sessions: int) -> EncoderLike:
    if "encoder" not in loaded.components:
        return HashingEncoder()  # e.g. a bundle holding only the llm so far; traces name the encoder used
    comp = loaded.components["encoder"]
    variant = index_encoder.rsplit(":", 1)[-1] if index_encoder and precision == "auto" else None
    cpu_choice = choose_precision(comp.files, report=comp.report)[0]
    if variant not in VARIANTS or variant not in comp.files or variant == cpu_choice:
        return OnnxEncoder.from_bundle(loaded, threads=threads, precision=precision, cache=cache, sessions=sessions)
    encoder = OnnxEncoder.from_bundle(loaded, threads=threads, precision=variant, cache=cache, sessions=sessions)
    reason = "the index was built with it"
    if variant != "fp32" and "fp32" in comp.files and not cpu_info().int8_dot:
        worst = encoder.probe(comp.settings.get("probe"))
        if below_bound(variant, worst):  # its queries would be noise here; fp32 stays close to the index's vectors
            encoder = OnnxEncoder.from_bundle(loaded, threads=threads, precision="fp32", cache=cache, sessions=sessions)
            reason = (f"the index was built with {variant}, but {variant} on this CPU gave embeddings too far from "
                      f"fp32 (min cosine {worst:.3f} < {MIN_COSINE[variant]}), so fp32 runs")
            variant = "fp32"
    encoder.precision_choice = {"requested": "auto", "precision": variant, "reason": reason}
    return encoder
