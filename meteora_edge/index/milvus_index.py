"""A Milvus collection as a corpus index (extra ``[milvus]``): Milvus Lite in a folder, or a server.

One row per chunk::

    id        INT64 primary key     the chunk id, 0..n-1 (as in a local index)
    vector    FLOAT_VECTOR(dim)     L2-normalised embedding; AUTOINDEX, metric COSINE
    text      VARCHAR (analysed)    the chunk's text (at most 65 535 bytes)
    sparse    SPARSE_FLOAT_VECTOR   written by Milvus's BM25 function from ``text``;
                                    SPARSE_INVERTED_INDEX, metric BM25 (k1 1.5, b 0.75)
    learned_sparse                  only with ``lexical_scorer="sparse"``: SPARSE_FLOAT_VECTOR, the
                                    chunk's vector from the bundle's sparse model (SPLADE);
                                    SPARSE_INVERTED_INDEX, metric IP (see :mod:`.milvus_sparse`)
    sha256, source, file            VARCHAR: the text's hash, the document id, the file
    position, start, end            INT64: place in the document, character offsets
    metadata                        JSON: the document's metadata
    source_key, source_size,        the source file's absolute path, size, modification time and
    source_mtime_ns, source_sha256  content hash (format 2; see :mod:`meteora_edge.index.milvus_sources`)

The collection's properties say who wrote it: ``meteora_edge.format``
(``meteora-edge-milvus``), ``meteora_edge.format_version``, ``meteora_edge.encoder`` and
``meteora_edge.dimension``, ``meteora_edge.chunk_size``/``overlap``, ``meteora_edge.created``,
``meteora_edge.analyzer``, ``meteora_edge.next_id`` (the id the next chunk gets; deleted ids
are never used again) and, built with the sparse scorer, ``meteora_edge.lexical`` (the sparse
model's identity: queries are then scored by it, the lexical half through Milvus's sparse search). Opening refuses a collection without them (the analyser and the next id
may be absent: an older collection), of a newer format, or built by another encoder. A
collection of format 1 (no source fields) opens and reads as before; its first write copies it
into format 2 with the sources unknown (the next ``sync`` reads each file once more) and switches
the copy in as a rebuild does.

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
:meth:`MilvusIndex.add`, :meth:`MilvusIndex.sync` and :meth:`MilvusIndex.remove` work by source
file, as a local index does (:mod:`meteora_edge.index.milvus_updates`): they insert the new rows first and delete the rows they replace
after, journaled in the property ``meteora_edge.pending_add``. A write killed while inserting is
rolled back by the next write (re-running it adds each document once), one killed while deleting
is rolled forward; either way the collection ends in the old or the new state. Milvus has no
snapshots: a reader in the moment between the insert and the delete may see a changed file's
old and new chunks. There is no writer lock: run one writer per collection at a time (a write
removes another writer's temporary collection).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from typing import Any


from ..errors import CollectionError, InputError
from ..models.analyzer import ANALYZERS, ENGLISH, LEGACY_ANALYZER, Analyzer
from ..models.encoders import EncoderLike, encoder_id
from ..models.sparse_index import sparse_encoder_of
from .bundle_record import bundle_record
from .chunk_records import Progress, chunk_documents, embed_batches
from .chunking import DEFAULT_BOUNDARIES, check_chunking, stored_boundaries
from .content_hashes import unseen_documents
from .corpus import FileChoice, SourceDocument
from .milvus_collection import (BUILDING, PREFIX, RECORD_FIELDS, call, chunk_rows, clean_leftovers, collection_schema,
                                drop_quietly, insert_rows, restore_switch, switch_in)
from .milvus_location import MilvusLocation, connect
from .milvus_reads import FETCH_BATCH, MilvusReads
from .milvus_sparse import FIELD as SPARSE_FIELD, encode_rows, lexical_property, recorded_model, sparse_model
from .milvus_sources import SOURCE_FIELDS, TABLE_FIELDS, document_columns, per_chunk, read_table
from .milvus_updates import FORMAT_VERSION, NEXT_ID, apply_plan, prepare_write, rows_by_hash
from .sources import SourceEntry, one_file_per_source
from .updates import addition, plan_add, plan_remove, plan_sync

__all__ = ["MilvusIndex", "MILVUS_FORMAT", "MILVUS_FORMAT_VERSION"]

MILVUS_FORMAT = "meteora-edge-milvus"
MILVUS_FORMAT_VERSION = FORMAT_VERSION
_P = PREFIX
_BUNDLE = _P + "bundle"

logger = logging.getLogger(__name__)

class MilvusIndex(MilvusReads):
    """A corpus index stored in a Milvus collection. Use :meth:`build`, :meth:`open` and :meth:`add`.

    Implements :class:`~meteora_edge.index.corpus_index.CorpusIndex`, so
    ``EvidencePipeline(config, encoder=enc, index=MilvusIndex.open(location, encoder=enc))``
    runs the whole pipeline over it. Close it (or use ``with``) to drop the connection.
    """

    def __init__(self, client: Any, location: MilvusLocation, properties: dict[str, str], count: int,
                 full_text: bool, tracks_sources: bool = True, sparse_model_id: str | None = None) -> None:
        """Wrap an opened, checked collection (use :meth:`open`)."""
        self.client, self.location, self.count, self.full_text = client, location, count, full_text
        #: the identity of the sparse model whose vectors the ``learned_sparse`` field holds (None: BM25 alone)
        self.sparse_model_id = sparse_model_id
        #: "sparse" when the collection holds learned-sparse vectors (queries are then scored by them), else "bm25"
        self.lexical_scorer = "bm25" if sparse_model_id is None else "sparse"
        #: the sparse model that encodes queries: the one the encoder given to :meth:`open` carries
        self.sparse_encoder: Any = None
        #: whether the rows carry their source (format 2); a format-1 collection is migrated by its next write
        self.tracks_sources = tracks_sources
        #: the id the next chunk gets: ids of deleted chunks are never used again
        self.next_id = int(properties.get(NEXT_ID, count))
        #: what the last :meth:`add`, :meth:`sync` or :meth:`remove` through this object wrote
        self.added_chunks = self.added_documents = self.removed_chunks = self.left_out_documents = 0
        self._sources: dict[str, SourceEntry] | None = None
        self.properties = properties
        self.manifest = {
            "encoder": {"id": properties[_P + "encoder"], "dimension": int(properties[_P + "dimension"]),
                        **_bundle_entry(properties.get(_BUNDLE))},
            "chunking": {"chunk_size": int(properties[_P + "chunk_size"]), "overlap": int(properties[_P + "overlap"]),
                         "boundaries": stored_boundaries({"boundaries": properties.get(_P + "boundaries")})},
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
            restore_switch(client, location)
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
        if not call(location, "has_collection", client.has_collection, name):
            raise CollectionError(f"no collection {name!r} at {location.uri}; build one with 'meteora-edge index build "
                                  f"--backend milvus --uri {location.uri} --collection {name} …'")
        description = call(location, "describe_collection", client.describe_collection, name)
        properties = {str(k): str(v) for k, v in (description.get("properties") or {}).items()}
        if properties.get(_P + "format") != MILVUS_FORMAT:
            raise CollectionError(f"collection {where} was not written by meteora-edge (no {_P}format property); "
                                  "build it with 'meteora-edge index build --backend milvus'")
        version = properties.get(_P + "format_version", "")
        if not version.isdigit() or int(version) > MILVUS_FORMAT_VERSION:
            raise CollectionError(f"collection {where} has format version {version!r}; this meteora-edge reads up to "
                                  f"{MILVUS_FORMAT_VERSION}")
        fields = {f["name"]: f for f in description.get("fields", [])}
        missing = [n for n in ("id", "vector", "text", *RECORD_FIELDS) if n not in fields]
        dimension = (fields.get("vector") or {}).get("params", {}).get("dim")
        keys = ("encoder", "dimension", "chunk_size", "overlap")
        if missing or any(not properties.get(_P + k) for k in keys) or str(dimension) != properties.get(_P + "dimension"):
            raise CollectionError(f"collection {where} does not have meteora-edge's schema ({missing or 'dimension'}); "
                                  "rebuild it")
        full_text = any(str(getattr(f.get("type"), "name", f.get("type"))).upper() == "BM25"
                        and list(f.get("output_field_names") or []) == ["sparse"]
                        for f in description.get("functions", []))
        state = call(location, "get_load_state", client.get_load_state, name).get("state")
        if getattr(state, "name", str(state)) != "Loaded":  # never reload: a cluster may hold it with N replicas
            call(location, "load_collection", client.load_collection, name)
        rows = call(location, "count", client.query, name, filter="", output_fields=["count(*)"])
        return cls(client, location, properties, int(rows[0]["count(*)"]), full_text,
                   tracks_sources=all(name in fields for name in SOURCE_FIELDS),
                   sparse_model_id=recorded_model(properties, list(fields), where))

    def check_encoder(self, encoder: EncoderLike) -> None:
        """Raises CollectionError when ``encoder`` is not the one that built the collection, or carries
        another sparse model than the one whose vectors it holds (then queries use the one it carries)."""
        given = encoder_id(encoder)
        if given != self.encoder_id:
            raise CollectionError(f"collection {self.location.label} was built with encoder {self.encoder_id!r}, not "
                                  f"{given!r}; use the same --bundle or rebuild the index")
        model = sparse_encoder_of(encoder)
        if self.sparse_model_id is not None and model is not None:
            self.check_sparse_model(model)
            self.sparse_encoder = model

    def check_sparse_model(self, model: Any) -> None:
        """Raises CollectionError when ``model`` is not the sparse model whose vectors the collection holds."""
        if getattr(model, "identity", None) != self.sparse_model_id:
            raise CollectionError(f"collection {self.location.label} holds the vectors of the sparse model "
                                  f"{self.sparse_model_id!r}, not {getattr(model, 'identity', None)!r}; use the same "
                                  "--bundle or rebuild the index")

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
        boundaries: str = DEFAULT_BOUNDARIES,
        batch_size: int = 64,
        overwrite: bool = False,
        progress: Progress | None = None,
        bundle: str | os.PathLike[str] | None = None,
        lexical_scorer: str = "bm25",
    ) -> MilvusIndex:
        """Chunk, embed and write ``documents`` into the collection at ``location``.

        With ``lexical_scorer="sparse"`` every chunk is also encoded by the learned sparse model
        ``encoder`` carries (a bundle with a ``sparse_encoder``) into the ``learned_sparse`` field
        (see :mod:`~meteora_edge.index.milvus_sparse`), and queries over the collection are then
        scored by it.

        Every row records its source (file path, size, modification time, content hash), so
        :meth:`sync`, :meth:`remove` and :meth:`add` can later replace or delete a file's chunks.
        With ``bundle`` (the folder ``encoder`` came from) its path and manifest hash are recorded
        in the property ``meteora_edge.bundle``, so later commands use it again, as for a local index.

        Returns:
            The new index, opened.

        Raises:
            InputError: no text, a chunk over 65 535 bytes, bad metadata, or the collection
                exists and ``overwrite`` is not given.
            CollectionError: Milvus refused a step (then the old collection, if any, is unchanged).
            ConfigError: ``lexical_scorer`` is not bm25 or sparse, or sparse without a sparse model.
            MissingExtraError: pymilvus or milvus-lite is not installed.
        """
        check_chunking(chunk_size, overlap, boundaries)
        model = sparse_model(lexical_scorer, encoder)
        documents = one_file_per_source(documents)
        texts, lines, counts = chunk_documents(documents, 0, chunk_size, overlap, boundaries)
        if not lines:
            raise InputError("the documents hold no text to index")
        columns = document_columns(documents)
        record = bundle_record(bundle)
        client = connect(location)
        try:
            name = location.collection
            clean_leftovers(client, location)
            if call(location, "has_collection", client.has_collection, name) and not overwrite:
                raise InputError(f"collection {location.label} already exists; use 'index add' to append or "
                                 "--overwrite to rebuild")
            vectors = embed_batches(encoder, texts, batch_size, progress)
            rows = chunk_rows(lines, vectors, per_chunk(columns, counts))
            if model is not None:
                for row, learned in zip(rows, encode_rows(model, texts, batch_size)):
                    row[SPARSE_FIELD] = learned
            properties = {
                _P + "format": MILVUS_FORMAT, _P + "format_version": str(MILVUS_FORMAT_VERSION),
                _P + "encoder": encoder_id(encoder), _P + "dimension": str(vectors.shape[1]),
                _P + "chunk_size": str(chunk_size), _P + "overlap": str(chunk_size // 10 if overlap is None else overlap),
                _P + "boundaries": boundaries,
                _P + "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                _P + "analyzer": ENGLISH.name, NEXT_ID: str(len(rows)),
                **({_BUNDLE: json.dumps(record)} if record else {}), **lexical_property(model),
            }
            temporary = f"{name}{BUILDING}{secrets.token_hex(4)}"
            schema, indexes = collection_schema(client, int(vectors.shape[1]), learned_sparse=model is not None)
            call(location, "create_collection (Milvus 2.5+ is needed for full-text search)", client.create_collection,
                 temporary, schema=schema, index_params=indexes, properties=properties)
            try:
                insert_rows(client, location, temporary, rows)
            except BaseException:
                drop_quietly(client, temporary)
                raise
            switch_in(client, location, temporary)
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
        """Add documents by source, as a local index does; return the chunks added.

        A source (file) the collection holds unchanged is left out; a changed one **replaces** its
        old chunks; a new one is added less the documents whose every chunk the collection already
        holds (by the chunks' sha256). With ``allow_duplicates`` every document is appended. New
        chunks are numbered after every id used so far. Afterwards ``added_chunks``,
        ``added_documents``, ``removed_chunks`` and ``left_out_documents`` say what the call wrote.

        Raises:
            InputError: bad text or metadata.
            CollectionError: another encoder built the collection, or Milvus refused a step (the
                next write then rolls the collection back to before this call, or forward past it).
        """
        self.check_encoder(encoder)
        prepare_write(self)
        plan = plan_add(self, documents, allow_duplicates=allow_duplicates)
        if not allow_duplicates:  # a new source's documents whose every chunk is stored already are left out
            fresh = [d for item in plan.add if item.key not in self.sources for d in item.documents]
            unseen = {id(d) for d in unseen_documents(self, fresh)} if fresh else set()
            kept = []
            for item in plan.add:
                docs = [d for d in item.documents if item.key in self.sources or id(d) in unseen]
                plan.left_out += len(item.documents) - len(docs)
                if docs:
                    kept.append(addition(item.key, docs, (item.size, item.mtime_ns)))
            plan.add = kept
        apply_plan(self, plan, encoder, batch_size=batch_size, progress=progress)
        return self.added_chunks

    def sync(
        self,
        paths: Sequence[str | os.PathLike[str]],
        encoder: EncoderLike,
        *,
        batch_size: int = 64,
        progress: Progress | None = None,
        strict: bool = False,
        follow_links: bool = False,
        on_skip: Any = None,
        choice: FileChoice | None = None,
        checksum: bool = False,
    ) -> MilvusIndex:
        """Make the collection follow the files and folders in ``paths``; return it, updated.

        As :meth:`LocalIndex.sync <meteora_edge.index.local_index.LocalIndex.sync>`: new files are
        added, changed ones replaced, and the sources under ``paths`` whose file is gone removed; a
        file whose size and time match is not read (unless ``checksum``); a renamed or copied file re-uses the stored
        vectors of the same chunks. ``added_chunks`` and ``removed_chunks`` say what changed.

        Raises:
            InputError: a named path is missing, a file cannot be read with ``strict``, or the sync
                would leave no chunk.
            CollectionError: another encoder built the collection, or Milvus refused a step.
        """
        self.check_encoder(encoder)
        prepare_write(self)
        plan = plan_sync(self.sources, paths, strict=strict, follow_links=follow_links, on_skip=on_skip,
                         choice=choice, checksum=checksum)
        return apply_plan(self, plan, encoder, batch_size=batch_size, progress=progress)

    def remove(self, sources: Sequence[str]) -> MilvusIndex:
        """Delete every chunk of the named sources (a path, the label the records carry, or a folder).

        Raises:
            InputError: a name that matches no source (nothing is deleted), or deleting every chunk.
            CollectionError: Milvus refused a step.
        """
        where = f"collection {self.location.label}"
        self.refresh()  # the rows as they are now (another writer may have changed them)
        plan_remove(self.sources, sources, where)  # a name that matches nothing is refused before any write
        prepare_write(self)
        return apply_plan(self, plan_remove(self.sources, sources, where), None, batch_size=64, progress=None)

    @property
    def sources(self) -> dict[str, SourceEntry]:
        """The source table, read from the rows (see :func:`~meteora_edge.index.milvus_sources.read_table`)."""
        if self._sources is None:
            fields = TABLE_FIELDS if self.tracks_sources else [f for f in TABLE_FIELDS if f not in SOURCE_FIELDS]
            rows = list(self.each_record(fields))
            bare = [int(row["id"]) for row in rows if not row.get("file")]  # named by document id or metadata
            if bare:
                extra = self.fetch_rows(bare, ["source", "metadata"])
                rows = [row if row.get("file") else {**row, **extra[int(row["id"])]} for row in rows]
            self._sources = read_table(rows)
        return self._sources

    def refresh(self) -> None:
        """Count the rows again and forget the source table read so far (writes call it before planning and after)."""
        rows = call(self.location, "count", self.client.query, self.location.collection, filter="",
                    output_fields=["count(*)"])
        self.count, self._sources = int(rows[0]["count(*)"]), None

    def stored_hashes(self, wanted: set[str]) -> set[str]:
        """The chunk-text hashes in ``wanted`` that some stored chunk has (looked up by Milvus, not by a scan)."""
        return set(rows_by_hash(self, sorted(wanted), ["sha256"]))

    def each_record(self, fields: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
        """Every row (``id`` and ``fields``, by default the chunk record's), read by windows of ids below
        :attr:`next_id` (a window holds at most that many rows, within Milvus's query limit)."""
        wanted = ["id", *[f for f in (fields if fields is not None else RECORD_FIELDS) if f != "id"]]
        for lo in range(0, self.next_id, FETCH_BATCH):
            yield from call(self.location, "query", self.client.query, self.location.collection,
                             filter=f"id >= {lo} and id < {lo + FETCH_BATCH}", output_fields=wanted,
                             limit=FETCH_BATCH)


def _bundle_entry(value: str | None) -> dict[str, Any]:
    """``{"bundle": record}`` from the property a build with a bundle wrote (nothing without one or when unreadable:
    then commands need --bundle, as before bundles were recorded)."""
    try:
        record = json.loads(value) if value else None
    except ValueError:
        return {}
    ok = isinstance(record, dict) and all(isinstance(record.get(k), str) for k in ("path", "manifest_sha256"))
    return {"bundle": record} if ok else {}


def _analyzer(name: str | None, where: str) -> Analyzer:
    """The analyser a collection's property names (none: a collection built before they were recorded)."""
    if name is None:
        return LEGACY_ANALYZER
    if name != ENGLISH.name:
        raise CollectionError(f"collection {where} was built with the lexical analyser {name[:60]!r}, which this "
                              f"version of meteora-edge does not know (it knows {', '.join(ANALYZERS)}); "
                              "upgrade meteora-edge or rebuild it")
    return ENGLISH

