import pytest
from hypothesis import given
from hypothesis import strategies as st

from meteora_edge import Chunk, ConfigError, InputError, chunk_text, chunk_texts, find_spanning_chunks


def test_windows_overlap_and_keep_offsets():
    text = "  one two\tthree\nfour five six seven  "
    chunks = chunk_text(text, chunk_size=3, overlap=1)
    assert [c.text for c in chunks] == ["one two\tthree", "three\nfour five", "five six seven"]
    assert [c.index for c in chunks] == [0, 1, 2]
    for c in chunks:
        assert text[c.start_pos : c.end_pos] == c.text


def test_default_overlap_is_a_tenth():
    words = " ".join(f"w{i}" for i in range(50))
    chunks = chunk_text(words, chunk_size=20)
    assert [c.text.split()[0] for c in chunks] == ["w0", "w18", "w36"]


@pytest.mark.parametrize("size, overlap", [(0, None), (5, 5), (5, -1), (3.5, None), (5, 7)])
def test_bad_sizes(size, overlap):
    with pytest.raises(ConfigError):
        chunk_text("a b c", size, overlap)


@pytest.mark.parametrize("bad", ["", "   \n", None])
def test_empty_or_non_text(bad):
    with pytest.raises(InputError):
        chunk_text(bad)  # type: ignore[arg-type]


@given(text=st.text(min_size=1).filter(lambda t: t.split()), size=st.integers(1, 8), overlap=st.integers(0, 7))
def test_chunks_cover_every_word_in_order(text, size, overlap):
    overlap = min(overlap, size - 1)
    chunks = chunk_text(text, size, overlap)
    for c in chunks:
        assert text[c.start_pos : c.end_pos] == c.text
        assert len(c.text.split()) <= size
    words = text.split()
    step = size - overlap
    rebuilt = [w for c in chunks[:-1] for w in c.text.split()[:step]] + chunks[-1].text.split()
    assert rebuilt == words


# -- streaming: blocks of any size give the chunks of the whole text ----------------------------

@given(text=st.text(alphabet="abé漢 \n\t", max_size=80),
       cuts=st.lists(st.integers(0, 80), max_size=6), size=st.integers(1, 6), overlap=st.integers(0, 5))
def test_iter_chunks_over_blocks_equals_chunk_text(text, cuts, size, overlap):
    from meteora_edge import iter_chunks

    overlap = min(overlap, size - 1)
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    blocks = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    if not text.split():
        with pytest.raises(InputError):
            list(iter_chunks(blocks, size, overlap))
        return
    assert [c.to_dict() for c in iter_chunks(blocks, size, overlap)] == [c.to_dict() for c in chunk_text(text, size, overlap)]


def test_a_word_longer_than_many_blocks_stays_one_word(tmp_path):
    from meteora_edge import iter_chunks
    from meteora_edge.fileio import iter_text_blocks

    path = tmp_path / "long.txt"
    path.write_text("start " + "é" * 3_000_000 + " end")  # 6 MB of UTF-8, split mid-character by 1 MiB reads
    chunks = list(iter_chunks(iter_text_blocks(path), chunk_size=2, overlap=0))
    assert [(len(c.text), c.start_pos, c.end_pos) for c in chunks] == [(3_000_006, 0, 3_000_006), (3, 3_000_007, 3_000_010)]
    assert chunks[0].text.startswith("start éé")


def test_the_config_is_checked_before_any_block_is_read():
    from meteora_edge import iter_chunks

    def blocks():
        raise AssertionError("read too early")
        yield ""

    with pytest.raises(ConfigError):
        next(iter_chunks(blocks(), 0))
# -- METEORA's helpers: several documents at once, and span lookup ----------------------------


def test_chunk_texts_numbers_across_documents_and_keeps_local_offsets():
    docs = ["one two three four five", {"text": "six seven", "metadata": {"title": "B"}}, "   "]
    chunks = chunk_texts(docs, chunk_size=2, overlap=0)
    assert [c.index for c in chunks] == [0, 1, 2, 3]
    assert [c.metadata["document_index"] for c in chunks] == [0, 0, 0, 1]
    assert [c.metadata["local_chunk_index"] for c in chunks] == [0, 1, 2, 0]
    assert chunks[3].metadata["title"] == "B" and chunks[3].start_pos == 0
    assert docs[0][chunks[1].start_pos:chunks[1].end_pos] == chunks[1].text == "three four"
    with pytest.raises(InputError, match="no words"):
        chunk_texts(["", "  "])


def test_find_spanning_chunks_maps_a_character_span_to_chunk_ids():
    text = "alpha beta gamma delta epsilon"
    chunks = chunk_text(text, chunk_size=2, overlap=1)  # [alpha beta] [beta gamma] [gamma delta] [delta epsilon]
    start = text.index("gamma")
    assert find_spanning_chunks(start, start + len("gamma"), chunks) == [1, 2]
    assert find_spanning_chunks(0, len(text), chunks) == [0, 1, 2, 3]
    assert find_spanning_chunks(start, start, chunks) == [1, 2]  # a position
    assert find_spanning_chunks(len("alpha "), len("alpha "), chunks) == [0, 1]
    end_of_first = chunks[0].end_pos
    assert 0 not in find_spanning_chunks(end_of_first, end_of_first + 1, chunks)  # touching is not overlapping
    as_dicts = [{"id": f"c{i}", "start": c.start_pos, "end": c.end_pos} for i, c in enumerate(chunks)]
    assert find_spanning_chunks(start, start + 5, as_dicts) == ["c1", "c2"]
    assert find_spanning_chunks(0, 3, [Chunk("x", 7, 0, 0), {"text": "no offsets"}]) == []
    with pytest.raises(InputError, match="after span_end"):
        find_spanning_chunks(5, 2, chunks)
    with pytest.raises(InputError, match="span_start"):
        find_spanning_chunks(-1, 2, chunks)
    with pytest.raises(InputError, match="Chunk objects"):
        find_spanning_chunks(0, 2, ["a string"])
