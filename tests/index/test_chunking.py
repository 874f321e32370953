import pytest
from hypothesis import given
from hypothesis import strategies as st

from meteora_edge import Chunk, ConfigError, InputError, chunk_text, chunk_texts, find_spanning_chunks
from meteora_edge.index.chunking import iter_chunks, sentence_spans


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


@pytest.mark.parametrize(("size", "overlap", "message"), [
    (True, None, "chunk_size must be an integer >= 1, got True"),
    (2.0, None, "chunk_size must be an integer >= 1, got 2.0"),
    (0, None, "chunk_size must be an integer >= 1, got 0"),
    (5, 1.0, "overlap must be an integer with 0 <= overlap < chunk_size (5), got 1.0"),
    (5, False, "overlap must be an integer with 0 <= overlap < chunk_size (5), got False"),
    (5, 5, "overlap must be an integer with 0 <= overlap < chunk_size (5), got 5"),
])
def test_bad_sizes_say_what_is_wrong(size, overlap, message):
    with pytest.raises(ConfigError) as info:
        chunk_text("a b c", size, overlap)
    assert str(info.value) == message


@pytest.mark.parametrize("bad", ["", "   \n", None])
def test_empty_or_non_text(bad):
    with pytest.raises(InputError):
        chunk_text(bad)  # type: ignore[arg-type]


def test_a_text_without_words_says_so():
    with pytest.raises(InputError) as info:
        chunk_text(" \t\n ")
    assert str(info.value) == "text holds no words; nothing to chunk"


def test_iter_chunks_defaults_to_256_words():
    from meteora_edge.index.chunking import iter_chunks

    assert [len(c.text.split()) for c in iter_chunks([" ".join(["w"] * 300)])] == [256, 69]


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


# -- edges: blocks, defaults, documents and spans ---------------------------------------------------

def test_words_that_end_at_a_block_boundary_and_empty_blocks_are_read_through():
    from meteora_edge.index.chunking import iter_chunks

    blocks = ["one two", "", " thr", "ee", "", " four", " five"]  # "one two three four five"
    chunks = list(iter_chunks(blocks, chunk_size=2, overlap=0))
    assert [(c.text, c.start_pos, c.end_pos) for c in chunks] == [
        ("one two", 0, 7), ("three four", 8, 18), ("five", 19, 23)]
    with pytest.raises(InputError) as info:
        list(iter_chunks(["one", 2], chunk_size=2))
    assert str(info.value) == "text must be a string, got int"


def test_the_defaults_are_256_words_and_a_tenth_of_overlap_with_metadata_copied():
    text = " ".join(f"w{i}" for i in range(300))
    chunks = chunk_text(text, metadata={"source": "a.txt"})
    assert [len(c.text.split()) for c in chunks] == [256, 69]  # the second starts 25 words back
    assert chunks[1].text.split()[0] == "w231"
    assert all(c.metadata == {"source": "a.txt"} for c in chunks)
    assert chunks[0].metadata is not chunks[1].metadata
    with pytest.raises(InputError) as info:
        chunk_text(b"bytes")  # type: ignore[arg-type]
    assert str(info.value) == "text must be a string, got bytes"
    numbered = chunk_texts([text])
    assert [len(c.text.split()) for c in numbered] == [256, 69]


class Doc:
    def __init__(self, text, metadata=None):
        self.text = text
        self.metadata = metadata


def test_chunk_texts_skips_wordless_documents_and_copies_each_document_s_metadata():
    docs = [" \n ", Doc("a b c", {"title": "T"}), {"text": "d e", "metadata": {"lang": "en"}}, Doc("f", "not a mapping")]
    chunks = chunk_texts(docs, chunk_size=2, overlap=1)
    assert [(c.index, c.text, c.metadata) for c in chunks] == [
        (0, "a b", {"title": "T", "document_index": 1, "local_chunk_index": 0}),
        (1, "b c", {"title": "T", "document_index": 1, "local_chunk_index": 1}),
        (2, "d e", {"lang": "en", "document_index": 2, "local_chunk_index": 0}),
        (3, "f", {"document_index": 3, "local_chunk_index": 0}),
    ]
    with pytest.raises(InputError) as info:
        chunk_texts(["a", {"body": "x"}])
    assert str(info.value).startswith("document at position 1 is a mapping without a text")
    with pytest.raises(InputError) as info:
        chunk_texts([" ", "\t"])
    assert str(info.value) == "the documents hold no words; nothing to chunk"


@pytest.mark.parametrize(("span", "chunks", "found"), [
    ((0, 5), [{"start_pos": 0, "end_pos": 5, "index": 7}, {"start_pos": 5, "end_pos": 9, "index": 8}], [7]),
    ((5, 5), [{"start": 0, "end": 5, "id": "a"}, {"start": 5, "end": 9, "id": "b"}], ["b"]),   # an empty span
    ((2, 6), [{"start": 0, "end": 5}, {"start": 4, "end": 9}], [0, 1]),                       # no index: positions
    ((2, 6), [{"start": 0, "end": None}, {"start_pos": 4, "end_pos": 9, "index": 3}], [3]),   # no offsets: ignored
    ((2, 6), [{"start": "0", "end": 5}, {"start_pos": 4, "end_pos": 9, "index": 3}], [3]),
])
def test_find_spanning_chunks_edges(span, chunks, found):
    assert find_spanning_chunks(*span, chunks) == found


@pytest.mark.parametrize(("args", "message"), [
    ((-1, 3), "span_start must be an integer >= 0, got -1"),
    ((0, 2.5), "span_end must be an integer >= 0, got 2.5"),
    ((True, 3), "span_start must be an integer >= 0, got True"),
    ((4, 3), "span_start (4) is after span_end (3)"),
])
def test_find_spanning_chunks_refuses_bad_spans(args, message):
    with pytest.raises(InputError) as info:
        find_spanning_chunks(*args, [])
    assert str(info.value) == message


def test_find_spanning_chunks_refuses_chunks_without_offsets_of_any_kind():
    with pytest.raises(InputError) as info:
        find_spanning_chunks(0, 1, ["plain text"])
    assert str(info.value) == "chunks must be Chunk objects or mappings with start_pos/end_pos, got str"


# -- boundaries="text": chunks end where the text does ------------------------------------------------

CLAUSES = ("# Agreement\n\n1. Term. The agreement runs two years.\n\n2. Fees. Fees are due monthly. "
           "Late fees bear interest.\n\n3. Termination. Either party may terminate on ninety days notice.\n\n"
           "4. Notices. Notices are written.\n")


def test_text_boundaries_keep_each_clause_whole_and_keep_offsets():
    chunks = chunk_text(CLAUSES, chunk_size=14, boundaries="text")
    assert [c.text.split(".")[0] for c in chunks] == ["# Agreement\n\n1", "2", "3", "4"]
    for c in chunks:
        assert CLAUSES[c.start_pos:c.end_pos] == c.text and len(c.text.split()) <= 14
    # the fixed windows cut the termination clause in two
    assert not any("Either party may terminate on ninety days notice" in c.text
                   for c in chunk_text(CLAUSES, chunk_size=14, boundaries="words"))
    assert any("3. Termination. Either party may terminate on ninety days notice." == c.text for c in chunks)


def test_text_boundaries_fall_back_to_sentences_then_to_words_with_overlap():
    text = "Alpha beta gamma. Delta epsilon zeta eta. Then " + " ".join(f"w{i}" for i in range(12))
    chunks = chunk_text(text, chunk_size=6, overlap=2, boundaries="text")
    assert chunks[0].text == "Alpha beta gamma." and chunks[1].text == "Delta epsilon zeta eta."
    words = [c.text.split() for c in chunks[2:]]  # one sentence longer than the window: word windows that overlap
    assert all(len(w) <= 6 for w in words) and all(a[-2:] == b[:2] for a, b in zip(words, words[1:]))
    assert words[0][0] == "Then" and words[-1][-1] == "w11"


@pytest.mark.parametrize("cuts", [[], [5, 40], [1, 2, 3, 60, 61], list(range(1, len(CLAUSES), 7))])
def test_text_boundaries_stream_over_blocks_like_one_string(cuts):
    blocks = [CLAUSES[a:b] for a, b in zip([0, *cuts], [*cuts, len(CLAUSES)])]
    streamed = [(c.text, c.start_pos, c.end_pos) for c in iter_chunks(blocks, 9, 2, boundaries="text")]
    assert streamed == [(c.text, c.start_pos, c.end_pos) for c in chunk_text(CLAUSES, 9, 2, boundaries="text")]


def test_sentence_spans_split_at_sentences_paragraphs_and_items():
    text = "Ltd. (the Provider) signs. It pays.\n- first item\n- second item\n\nNew paragraph"
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "Ltd. (the Provider) signs.", "It pays.", "- first item", "- second item", "New paragraph"]


def test_unknown_boundaries_are_refused():
    with pytest.raises(ConfigError, match="boundaries must be one of text, words, got 'lines'"):
        chunk_text("a b c", boundaries="lines")


def test_an_index_without_a_boundaries_record_keeps_cutting_fixed_windows():
    from meteora_edge.index.chunking import stored_boundaries

    assert stored_boundaries({"chunk_size": 4, "overlap": 1}) == "words"  # written before the record had the key
    assert stored_boundaries({"chunk_size": 4, "overlap": 1, "boundaries": "text"}) == "text"
