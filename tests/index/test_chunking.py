import pytest
from hypothesis import given
from hypothesis import strategies as st

from meteora_edge import ConfigError, InputError, chunk_text


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
