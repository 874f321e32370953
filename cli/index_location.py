"""Opening the index a command names: a local index folder or a ``milvus://`` URL."""

from __future__ import annotations

import logging

from meteora_edge.errors import CollectionError, LocalIndexError
from meteora_edge.index.corpus_index import CorpusIndex
from meteora_edge.index.corpus_index import open_index as open_corpus_index
from meteora_edge.index.bundle_record import remembered_bundle
from meteora_edge.index.milvus_location import is_milvus_url
from meteora_edge.models.encoders import EncoderLike, encoder_id

INDEX_HELP = ("Index to retrieve from: a local index folder, or a Milvus collection as milvus://PATH.db (Milvus Lite), "
              "milvus://HOST:PORT or milvus+https://HOST:PORT, with an optional ?collection=NAME.")


def quiet_milvus_logs() -> None:
    """pymilvus logs each failed call with a traceback on its own stderr handler, and Milvus Lite
    its start-up failures: keep them off stderr (errors reach the user as one line) unless --verbose."""
    if logging.getLogger().isEnabledFor(logging.INFO) and logging.getLogger().handlers:
        return
    for name in ("pymilvus", "milvus_lite"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def open_index(spec: str, *, encoder: EncoderLike | None = None) -> CorpusIndex:
    """The library's :func:`~meteora_edge.index.corpus_index.open_index`, with pymilvus kept quiet."""
    if is_milvus_url(spec):
        quiet_milvus_logs()
    return open_corpus_index(spec, encoder=encoder)


def index_bundle(index: CorpusIndex, bundle: str | None, name: str) -> str | None:
    """The bundle to run over ``index``: ``--bundle`` when given, else the one the index recorded (checked).

    Raises:
        LocalIndexError: the recorded bundle is gone or changed.
    """
    if bundle is not None:
        return bundle
    manifest = getattr(index, "manifest", None)
    return remembered_bundle(manifest, name) if isinstance(manifest, dict) else None


def check_encoder(index: CorpusIndex, encoder: EncoderLike, name: str) -> None:
    """Refuse an encoder other than the one that built ``index`` (named ``name`` in the message).

    Raises:
        LocalIndexError (a folder) / CollectionError (a Milvus collection): another encoder.
    """
    given = encoder_id(encoder)
    if given != index.encoder_id:
        error = CollectionError if is_milvus_url(name) else LocalIndexError
        raise error(f"index {name} was built with encoder {index.encoder_id!r}, not {given!r}; "
                    "use the same --bundle or rebuild the index")
