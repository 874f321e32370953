"""open_index: the name a user gives (a folder or a milvus:// URL) opens that index, checked
against the encoder given — another encoder's index is refused, for either backend."""

import pytest

from meteora_edge import HashingEncoder
from meteora_edge.errors import CollectionError, LocalIndexError
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.corpus_index import CorpusIndex, open_index
from meteora_edge.index.local_index import LocalIndex

ENC = HashingEncoder()
OTHER = HashingEncoder(n_features=128)
DOCS = [
    SourceDocument("a", "Either party may terminate the agreement on ninety days notice.", {}),
    SourceDocument("b", "Fees are payable monthly within thirty days of the invoice.", {}),
]


@pytest.fixture
def folder(tmp_path):
    LocalIndex.build(tmp_path / "ix", DOCS, ENC, chunk_size=5, overlap=0)
    return str(tmp_path / "ix")


def test_a_folder_opens_the_local_index_there(folder):
    index = open_index(folder, encoder=ENC)
    assert isinstance(index, LocalIndex) and isinstance(index, CorpusIndex)
    assert index.encoder_id == "hashing:384" and index.records([0])[0]["source"] == "a"
    assert len(open_index(folder)) == len(index)  # no encoder: nothing to check it against


def test_a_folder_built_by_another_encoder_is_refused(folder):
    with pytest.raises(LocalIndexError) as info:
        open_index(folder, encoder=OTHER)
    assert str(info.value) == (f"index {folder} was built with encoder 'hashing:384', not 'hashing:128'; "
                               "use the same --bundle or rebuild the index")


@pytest.fixture(scope="module")
def milvus_db(tmp_path_factory):
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from meteora_edge.index.milvus_index import MilvusIndex
    from meteora_edge.index.milvus_location import milvus_location

    db = tmp_path_factory.mktemp("milvus") / "notes.db"
    MilvusIndex.build(milvus_location(str(db)), DOCS, ENC, chunk_size=5, overlap=0).close()
    return db


def test_a_milvus_url_opens_that_collection(milvus_db):
    from meteora_edge.index.milvus_index import MilvusIndex

    index = open_index(f"milvus://{milvus_db}?collection=notes", encoder=ENC)
    try:
        assert isinstance(index, MilvusIndex) and isinstance(index, CorpusIndex)
        assert index.location.uri == str(milvus_db) and index.location.collection == "notes"
        assert index.encoder_id == "hashing:384" and index.records([0])[0]["source"] == "a"
    finally:
        index.close()


def test_a_milvus_collection_built_by_another_encoder_is_refused(milvus_db):
    with pytest.raises(CollectionError, match="built with encoder 'hashing:384', not 'hashing:128'"):
        open_index(f"milvus://{milvus_db}", encoder=OTHER)
