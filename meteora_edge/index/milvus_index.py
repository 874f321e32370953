"""A Milvus collection as a corpus index (extra ``[milvus]``): Milvus Lite in a folder, or a server.

One row per chunk::

    id        INT64 primary key     the chunk id, 0..n-1 (as in a local index)
    vector    FLOAT_VECTOR(dim)     L2-normalised embedding; AUTOINDEX, metric COSINE
    text      VARCHAR (analysed)    the chunk's text (at most 65 535 bytes)
    sparse    SPARSE_FLOAT_VECTOR   written by Milvus's BM25 function from ``text``;
                                    SPARSE_INVERTED_INDEX, metric BM25 (k1 1.5, b 0.75)
    sha256, source, file            VARCHAR: the text's hash, the document id, the file
    position, start, end            INT64: place in the document, character offsets
    metadata                        JSON: the document's metadata

The collection's properties say who wrote it: ``meteora_edge.format``
(``meteora-edge-milvus``), ``meteora_edge.format_version``, ``meteora_edge.encoder`` and
``meteora_edge.dimension``, ``meteora_edge.chunk_size``/``overlap``, ``meteora_edge.created``
and ``meteora_edge.analyzer``. Opening refuses a collection without them (the analyser may be
absent: an older collection), of a newer format, or built by another encoder.

**Analyser.** The ``text`` field is analysed by Milvus's own analyser set as close to this
package's ``english`` analyser as Milvus allows: the standard tokenizer, lower-casing, the
same English stop words and Milvus's English (Snowball) stemmer; the collection records
``meteora_edge.analyzer = english``, and the pipeline's own lexical scores over its
candidates (ECSE's hybrid score) use the ``english`` analyser. Milvus applies no NFKC
folding and no CJK bigrams (its standard tokenizer splits by Unicode word rules), and
Milvus Lite 3 honours only the tokenizer and the stop words (no stemming). A collection
without the property (built before analysers were recorded) keeps Milvus's default
analyser and is scored with ``unicode-words``.

**Search.** kNN runs in Milvus; the BM25 fallback and the lexical half of hybrid scoring run
through Milvus's full-text search. Those scores are *Milvus's* BM25 (its analyser, its IDF,
and in Milvus Lite per-segment statistics), not this package's: the hybrid ranking
standardises each score list, so what matters is the order within one query, but the numbers
differ from a local index over the same corpus. A collection without the BM25 function (a
server older than Milvus 2.5 cannot create one) is refused by ``bm25_search`` and
``lexical_scores`` with one line; ``scoring="dense"`` with ``n_min=None`` still runs.

**Writes.** :meth:`MilvusIndex.build` fills a temporary collection ``NAME__building_xxxxxxxx``
and switches it into place only when complete: with ``overwrite`` the old collection is first
renamed aside (``NAME__replaced_xxxxxxxx``), the new one renamed to ``NAME``, and only then is
the old one dropped; a failed switch renames the old one back. A switch a kill interrupted
(``NAME`` missing, its old collection aside) is undone by the next command that opens ``NAME``;
the next write (``build`` or ``add``) also drops the temporary collections killed builds left.
:meth:`MilvusIndex.add` records the first id it writes in the collection's properties
(``meteora_edge.pending_add``) before inserting and removes it once the rows are flushed; a
failed insert deletes what it inserted, and an add that was killed is undone by the next
write, so re-running it adds each document once. There is no writer lock: run one writer per
collection at a time (a write removes another writer's temporary collection).
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from ..errors import CollectionError, InputError
from ..models.analyzer import ANALYZERS, ENGLISH, LEGACY_ANALYZER, STOP_WORDS, Analyzer
from ..models.encoders import EncoderLike, encoder_id, normalize_rows
from .chunk_records import Progress, chunk_records, embed_batches
from .content_hashes import source_counts, unseen_documents
from .corpus import SourceDocument
from .milvus_location import MilvusLocation, connect, milvus_error

__all__ = ["MilvusIndex", "MILVUS_FORMAT", "MILVUS_FORMAT_VERSION"]

MILVUS_FORMAT = "meteora-edge-milvus"
MILVUS_FORMAT_VERSION = 1
_P = "meteora_edge."
_TEXT_BYTES = 65_535
_INSERT_BATCH = 512
_FETCH_BATCH = 4096
_TOP_K = 16_384  # Milvus's largest search limit
_RECORD_FIELDS = ("text", "sha256", "source", "position", "start", "end", "metadata", "file")
_WORD = re.compile(r"\w", re.UNICODE)
_BUILDING, _REPLACED = "__building_", "__replaced_"
_PENDING = _P + "pending_add"

logger = logging.getLogger(__name__)

#: Milvus's analyser settings for the ``english`` analyser (stop words before stemming, as ours).
MILVUS_ENGLISH = {"tokenizer": "standard",
                  "filter": ["lowercase", {"type": "stop", "stop_words": sorted(STOP_WORDS)},
                             {"type": "stemmer", "language": "english"}]}


def _call(location: MilvusLocation, what: str, method: Any, *args: Any, **kwargs: Any) -> Any:
    """Call the client; a pymilvus error becomes one CollectionError line."""
    from pymilvus.exceptions import MilvusException

    try:
        return method(*args, **kwargs)
    except MilvusException as exc:
        raise CollectionError(f"Milvus {what} failed on {location.label}: {milvus_error(exc)}") from None


def _schema(client: Any, dimension: int) -> tuple[Any, Any]:
    from pymilvus import DataType, Function, FunctionType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dimension)
    schema.add_field("text", DataType.VARCHAR, max_length=_TEXT_BYTES, enable_analyzer=True,
                     analyzer_params=MILVUS_ENGLISH)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("sha256", DataType.VARCHAR, max_length=64)
    schema.add_field("source", DataType.VARCHAR, max_length=_TEXT_BYTES)
    schema.add_field("file", DataType.VARCHAR, max_length=_TEXT_BYTES, nullable=True)
    for name in ("position", "start", "end"):
        schema.add_field(name, DataType.INT64)
    schema.add_field("metadata", DataType.JSON)
    schema.add_function(Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["text"],
                                 output_field_names=["sparse"]))
    indexes = client.prepare_index_params()
    indexes.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="COSINE")
    indexes.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                      params={"bm25_k1": 1.5, "bm25_b": 0.75})
    return schema, indexes


def _rows(lines: list[bytes], vectors: np.ndarray) -> list[dict[str, Any]]:
    rows = []
    for line, vector in zip(lines, vectors):
        record = json.loads(line)
        if len(record["text"].encode("utf-8")) > _TEXT_BYTES:
            raise InputError(f"a chunk of document {record['source']!r} has {len(record['text'].encode('utf-8'))} "
                             f"bytes of text, over Milvus's VARCHAR limit of {_TEXT_BYTES}; use a smaller --chunk-size")
        rows.append({"id": record["id"], "vector": vector.tolist(),
                     **{name: record.get(name) for name in _RECORD_FIELDS}})
    return rows


def _insert(client: Any, location: MilvusLocation, name: str, rows: list[dict[str, Any]]) -> None:
    for lo in range(0, len(rows), _INSERT_BATCH):
        _call(location, "insert", client.insert, name, rows[lo : lo + _INSERT_BATCH])
    _call(location, "flush", client.flush, name)


def _id_filter(ids: Sequence[int]) -> str:
    return f"id in [{', '.join(str(int(i)) for i in ids)}]"


class MilvusIndex:
    """A corpus index stored in a Milvus collection. Use :meth:`build`, :meth:`open` and :meth:`add`.

    Implements :class:`~meteora_edge.index.corpus_index.CorpusIndex`, so
    ``EvidencePipeline(config, encoder=enc, index=MilvusIndex.open(location, encoder=enc))``
    runs the whole pipeline over it. Close it (or use ``with``) to drop the connection.
    """

    def __init__(self, client: Any, location: MilvusLocation, properties: dict[str, str], count: int,
                 full_text: bool) -> None:
        """Wrap an opened, checked collection (use :meth:`open`)."""
        self.client, self.location, self.count, self.full_text = client, location, count, full_text
        self.properties = properties
        self.manifest = {
            "encoder": {"id": properties[_P + "encoder"], "dimension": int(properties[_P + "dimension"])},
            "chunking": {"chunk_size": int(properties[_P + "chunk_size"]), "overlap": int(properties[_P + "overlap"])},
            "created": properties.get(_P + "created"),
        }
        self.analyzer = _analyzer(properties.get(_P + "analyzer"), location.label)

    def __len__(self) -> int:
        return self.count

    def __enter__(self) -> MilvusIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.client.close()

    @property
    def encoder_id(self) -> str:
        return str(self.manifest["encoder"]["id"])

    # ----------------------------------------------------------------- opening
    @classmethod
    def open(cls, location: MilvusLocation, *, encoder: EncoderLike | None = None, client: Any = None) -> MilvusIndex:
        """Connect to ``location`` and check its collection.

        Raises:
            MissingExtraError: pymilvus or milvus-lite is not installed.
            CollectionError: unreachable, no such collection, not written by meteora-edge, a
                newer format, a schema that is not ours, or built by another encoder.
        """
        if client is None and location.lite and not os.path.lexists(location.uri):
            # connecting would create an empty database folder: a command that only reads creates nothing
            raise CollectionError(f"the Milvus Lite database {location.uri} does not exist; build one with "
                                  f"'meteora-edge index build --backend milvus --uri {location.uri} …'")
        client = client or connect(location)
        try:
            _restore_switch(client, location)
            index = cls._checked(client, location)
            if encoder is not None:
                index.check_encoder(encoder)
        except BaseException:
            client.close()
            raise
        return index

    @classmethod
    def _checked(cls, client: Any, location: MilvusLocation) -> MilvusIndex:
        name, where = location.collection, location.label
        if not _call(location, "has_collection", client.has_collection, name):
            raise CollectionError(f"no collection {name!r} at {location.uri}; build one with 'meteora-edge index build "
                                  f"--backend milvus --uri {location.uri} --collection {name} …'")
        description = _call(location, "describe_collection", client.describe_collection, name)
        properties = {str(k): str(v) for k, v in (description.get("properties") or {}).items()}
        if properties.get(_P + "format") != MILVUS_FORMAT:
            raise CollectionError(f"collection {where} was not written by meteora-edge (no {_P}format property); "
                                  "build it with 'meteora-edge index build --backend milvus'")
        version = properties.get(_P + "format_version", "")
        if not version.isdigit() or int(version) > MILVUS_FORMAT_VERSION:
            raise CollectionError(f"collection {where} has format version {version!r}; this meteora-edge reads up to "
                                  f"{MILVUS_FORMAT_VERSION}")
        fields = {f["name"]: f for f in description.get("fields", [])}
        missing = [n for n in ("id", "vector", "text", *_RECORD_FIELDS) if n not in fields]
        dimension = (fields.get("vector") or {}).get("params", {}).get("dim")
        keys = ("encoder", "dimension", "chunk_size", "overlap")
        if missing or any(not properties.get(_P + k) for k in keys) or str(dimension) != properties.get(_P + "dimension"):
            raise CollectionError(f"collection {where} does not have meteora-edge's schema ({missing or 'dimension'}); "
                                  "rebuild it")
        full_text = any(str(getattr(f.get("type"), "name", f.get("type"))).upper() == "BM25"
                        and list(f.get("output_field_names") or []) == ["sparse"]
                        for f in description.get("functions", []))
        state = _call(location, "get_load_state", client.get_load_state, name).get("state")
        if getattr(state, "name", str(state)) != "Loaded":  # never reload: a cluster may hold it with N replicas
            _call(location, "load_collection", client.load_collection, name)
        rows = _call(location, "count", client.query, name, filter="", output_fields=["count(*)"])
        return cls(client, location, properties, int(rows[0]["count(*)"]), full_text)

    def check_encoder(self, encoder: EncoderLike) -> None:
        """Raises CollectionError when ``encoder`` is not the one that built the collection."""
        given = encoder_id(encoder)
        if given != self.encoder_id:
            raise CollectionError(f"collection {self.location.label} was built with encoder {self.encoder_id!r}, not "
                                  f"{given!r}; use the same --bundle or rebuild the index")

    # ----------------------------------------------------------------- writing
    @classmethod
    def build(
        cls,
        location: MilvusLocation,
        documents: Sequence[SourceDocument],
        encoder: EncoderLike,
        *,
        chunk_size: int = 256,
        overlap: int | None = None,
        batch_size: int = 64,
        overwrite: bool = False,
        progress: Progress | None = None,
    ) -> MilvusIndex:
        """Chunk, embed and write ``documents`` into the collection at ``location``.

        Returns:
            The new index, opened.

        Raises:
            InputError: no text, a chunk over 65 535 bytes, bad metadata, or the collection
                exists and ``overwrite`` is not given.
            CollectionError: Milvus refused a step (then the old collection, if any, is unchanged).
            MissingExtraError: pymilvus or milvus-lite is not installed.
        """
        texts, lines = chunk_records(documents, 0, chunk_size, overlap)
        if not lines:
            raise InputError("the documents hold no text to index")
        client = connect(location)
        try:
            name = location.collection
            _clean_leftovers(client, location)
            if _call(location, "has_collection", client.has_collection, name) and not overwrite:
                raise InputError(f"collection {location.label} already exists; use 'index add' to append or "
                                 "--overwrite to rebuild")
            vectors = embed_batches(encoder, texts, batch_size, progress)
            rows = _rows(lines, vectors)
            properties = {
                _P + "format": MILVUS_FORMAT, _P + "format_version": str(MILVUS_FORMAT_VERSION),
                _P + "encoder": encoder_id(encoder), _P + "dimension": str(vectors.shape[1]),
                _P + "chunk_size": str(chunk_size), _P + "overlap": str(chunk_size // 10 if overlap is None else overlap),
                _P + "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                _P + "analyzer": ENGLISH.name,
            }
            temporary = f"{name}{_BUILDING}{secrets.token_hex(4)}"
            schema, indexes = _schema(client, int(vectors.shape[1]))
            _call(location, "create_collection (Milvus 2.5+ is needed for full-text search)", client.create_collection,
                  temporary, schema=schema, index_params=indexes, properties=properties)
            try:
                _insert(client, location, temporary, rows)
            except BaseException:
                _drop_quietly(client, temporary)
                raise
            _switch(client, location, temporary)
            return cls.open(location, encoder=encoder, client=client)
        except BaseException:
            client.close()
            raise

    def add(
        self,
        documents: Sequence[SourceDocument],
        encoder: EncoderLike,
        *,
        batch_size: int = 64,
        progress: Progress | None = None,
        allow_duplicates: bool = False,
    ) -> int:
        """Append documents (chunked like the rest, numbered after them); return the chunks added.

        Documents the collection already holds (every chunk's sha256 is stored) are left out
        unless ``allow_duplicates``. ``len(self)`` grows by the count returned.

        Raises:
            InputError: bad text or metadata.
            CollectionError: another encoder built the collection, or Milvus refused the insert
                (what this call inserted is deleted again).
        """
        self.check_encoder(encoder)
        self._undo_killed_writes()
        if not allow_duplicates:
            documents = unseen_documents(self, documents)
        chunking = self.manifest["chunking"]
        texts, lines = chunk_records(documents, self.count, chunking["chunk_size"], chunking["overlap"])
        if not lines:
            return 0
        rows = _rows(lines, embed_batches(encoder, texts, batch_size, progress))
        name = self.location.collection
        _call(self.location, "alter_collection_properties", self.client.alter_collection_properties, name,
              properties={_PENDING: str(self.count)})
        try:
            _insert(self.client, self.location, name, rows)
        except BaseException:
            try:
                self.client.delete(self.location.collection, filter=f"id >= {self.count}")
            except Exception:  # noqa: BLE001 - best effort while the insert error propagates
                pass
            raise
        _call(self.location, "drop_collection_properties", self.client.drop_collection_properties, name,
              property_keys=[_PENDING])
        self.count += len(rows)
        return len(rows)

    def _undo_killed_writes(self) -> None:
        """Drop killed builds' temporary collections and delete the rows of an add that never finished."""
        _clean_leftovers(self.client, self.location)
        name = self.location.collection
        description = _call(self.location, "describe_collection", self.client.describe_collection, name)
        pending = str((description.get("properties") or {}).get(_PENDING, ""))
        if not pending:
            return
        if not pending.isdigit():
            raise CollectionError(f"collection {self.location.label} has {_PENDING} {pending!r}, not a chunk id; "
                                  "rebuild it")
        _call(self.location, "delete", self.client.delete, name, filter=f"id >= {int(pending)}")
        _call(self.location, "flush", self.client.flush, name)
        _call(self.location, "drop_collection_properties", self.client.drop_collection_properties, name,
              property_keys=[_PENDING])
        rows = _call(self.location, "count", self.client.query, name, filter="", output_fields=["count(*)"])
        logger.warning("collection %s: deleted %d chunk(s) of an add that did not finish", self.location.label,
                       self.count - int(rows[0]["count(*)"]))
        self.count = int(rows[0]["count(*)"])

    # ----------------------------------------------------------------- reading
    def _fetch(self, ids: Sequence[int], fields: list[str]) -> dict[int, dict[str, Any]]:
        found: dict[int, dict[str, Any]] = {}
        wanted = [int(i) for i in ids]
        for lo in range(0, len(wanted), _FETCH_BATCH):
            part = wanted[lo : lo + _FETCH_BATCH]
            rows = _call(self.location, "query", self.client.query, self.location.collection,
                         filter=_id_filter(part), output_fields=fields, limit=len(part))
            found.update({int(row["id"]): row for row in rows})
        absent = [i for i in wanted if i not in found]
        if absent:
            raise InputError(f"chunk id {absent[0]} is not in collection {self.location.label} (0..{self.count - 1})")
        return found

    def records(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        """The stored chunk records for ``ids`` (the same keys a local index stores)."""
        rows = self._fetch(ids, list(_RECORD_FIELDS))
        return [{"id": int(i), **{k: rows[int(i)].get(k) for k in _RECORD_FIELDS}} for i in ids]

    def vectors_for(self, ids: Sequence[int]) -> np.ndarray:
        """The chunks' vectors (float32, L2-normalised), fetched from Milvus."""
        if len(ids) == 0:
            return np.zeros((0, self.manifest["encoder"]["dimension"]), dtype=np.float32)
        rows = self._fetch(ids, ["vector"])
        return normalize_rows(np.asarray([rows[int(i)]["vector"] for i in ids], dtype=np.float32)).astype(np.float32)

    def search(self, query_vector: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Cosine kNN in Milvus: the ``k`` (at most 16 384) nearest chunk ids and their cosines, best first."""
        q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.manifest["encoder"]["dimension"]:
            raise InputError(f"query vector has dimension {q.shape[0]}, "
                             f"the index {self.manifest['encoder']['dimension']}")
        if k <= 0 or self.count == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        hits = _call(self.location, "search", self.client.search, self.location.collection, data=[q.tolist()],
                     anns_field="vector", limit=min(k, self.count, _TOP_K), search_params={"metric_type": "COSINE"})[0]
        return _ranked([(int(h["id"]), float(h["distance"])) for h in hits], np.float32)

    def _full_text(self, text: str, limit: int, id_filter: str = "") -> list[tuple[int, float]]:
        if not self.full_text:
            raise CollectionError(f"collection {self.location.label} has no BM25 function (full-text search needs "
                                  "Milvus 2.5 or later and a collection built by it); use --scoring dense --n-min 0")
        if not _WORD.search(text) or limit <= 0:
            return []
        hits = _call(self.location, "full-text search", self.client.search, self.location.collection, data=[text],
                     anns_field="sparse", limit=limit, filter=id_filter, search_params={"metric_type": "BM25"})[0]
        # Milvus reports BM25 as a score; Milvus Lite 3.2 as its negative (a distance): the magnitude is the score
        return [(int(h["id"]), abs(float(h["distance"]))) for h in hits if float(h["distance"]) != 0.0]

    def bm25_search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Milvus's full-text (BM25) search over the collection: the ``k`` best ids with a positive score."""
        return _ranked(self._full_text(query, min(k, _TOP_K)), np.float64)

    def lexical_scores(self, text: str, ids: Sequence[int]) -> np.ndarray:
        """Milvus's BM25 score of ``text`` for each of ``ids`` (0 where no term matches)."""
        scores = np.zeros(len(ids), dtype=np.float64)
        if len(ids) == 0:
            return scores
        unique = sorted({int(i) for i in ids})
        found: dict[int, float] = {}
        for lo in range(0, len(unique), _TOP_K):
            part = unique[lo : lo + _TOP_K]
            found.update(self._full_text(text, len(part), _id_filter(part)))
        for position, chunk_id in enumerate(ids):
            scores[position] = found.get(int(chunk_id), 0.0)
        return scores

    def info(self) -> dict[str, Any]:
        """A summary: backend, location, counts, encoder, chunking and what Milvus indexes."""
        files, documents = source_counts(self)
        return {
            "backend": "milvus",
            "uri": self.location.uri,
            "collection": self.location.collection,
            "chunks": self.count,
            "sources": files,
            "documents": documents,
            "encoder": self.manifest["encoder"],
            "chunking": self.manifest["chunking"],
            "created": self.manifest["created"],
            "format_version": int(self.properties[_P + "format_version"]),
            "analyzer": self.analyzer.record(),
            "full_text_search": self.full_text,
        }


def _analyzer(name: str | None, where: str) -> Analyzer:
    """The analyser a collection's property names (none: a collection built before they were recorded)."""
    if name is None:
        return LEGACY_ANALYZER
    if name != ENGLISH.name:
        raise CollectionError(f"collection {where} was built with the lexical analyser {name[:60]!r}, which this "
                              f"version of meteora-edge does not know (it knows {', '.join(ANALYZERS)}); "
                              "upgrade meteora-edge or rebuild it")
    return ENGLISH


def _ranked(hits: list[tuple[int, float]], dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """Hits best first, ties by the lower id (as the local index orders them)."""
    hits = sorted(hits, key=lambda h: (-h[1], h[0]))
    return np.asarray([h[0] for h in hits], dtype=np.int64), np.asarray([h[1] for h in hits], dtype=dtype)


def _switch(client: Any, location: MilvusLocation, temporary: str) -> None:
    """Put the complete ``temporary`` collection in place of ``location``'s, keeping the old one until it is."""
    name = location.collection
    aside = None
    if _call(location, "has_collection", client.has_collection, name):
        aside = f"{name}{_REPLACED}{secrets.token_hex(4)}"
        try:
            _call(location, "rename_collection", client.rename_collection, name, aside)
        except BaseException:
            _drop_quietly(client, temporary)
            raise
    try:
        _call(location, "rename_collection", client.rename_collection, temporary, name)
    except BaseException:
        if aside is not None:
            try:
                client.rename_collection(aside, name)
            except Exception:  # noqa: BLE001 - the next command renames it back (see _restore_switch)
                pass
        _drop_quietly(client, temporary)
        raise
    if aside is not None:
        _drop_quietly(client, aside)


def _restore_switch(client: Any, location: MilvusLocation) -> None:
    """A switch a kill interrupted left ``NAME`` missing and the old collection aside: rename it back."""
    name = location.collection
    names = _call(location, "list_collections", client.list_collections)
    aside = sorted(n for n in names if n.startswith(name + _REPLACED))
    if aside and name not in names:
        _call(location, "rename_collection", client.rename_collection, aside[-1], name)
        logger.warning("collection %s: a rebuild was interrupted; the previous collection is back", location.label)


def _clean_leftovers(client: Any, location: MilvusLocation) -> None:
    """Before a write: restore an interrupted switch, then drop what killed builds and switches left."""
    _restore_switch(client, location)
    prefixes = (location.collection + _BUILDING, location.collection + _REPLACED)
    for leftover in _call(location, "list_collections", client.list_collections):
        if leftover.startswith(prefixes):
            _call(location, "drop_collection", client.drop_collection, leftover)
            logger.info("collection %s: dropped %s, left by a build that did not finish", location.label, leftover)


def _drop_quietly(client: Any, name: str) -> None:
    """Drop a half-built collection; a failure here must not hide the error that got us here."""
    try:
        if client.has_collection(name):
            client.drop_collection(name)
    except Exception:  # noqa: BLE001 - best effort while another exception propagates
        pass
