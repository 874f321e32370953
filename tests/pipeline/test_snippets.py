"""The sentence a result list shows for a passage: the one that matches the query, not the first words."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main
from meteora_edge.models.analyzer import UNICODE_WORDS
from meteora_edge.pipeline.snippets import snippet

CLAUSE = ("5. Late Payment. Overdue amounts bear interest at one percent per month until paid in full. "
          "6. Termination for Convenience. Either party may terminate this Agreement on ninety days' prior written "
          "notice to the other party. 7. Termination for Cause. Either party may terminate")


def test_the_sentence_holding_the_query_terms_is_shown_not_the_first_words():
    shown = snippet(CLAUSE, "How much notice is needed to end the agreement?", width=200)
    assert shown.startswith("… Either party may terminate this Agreement on ninety days' prior written notice")
    assert "Overdue" not in shown


def test_a_term_that_fewer_sentences_hold_weighs_more():
    text = "The agreement is signed. The agreement renews. Payment ends the agreement early."
    assert snippet(text, "agreement ends", width=200) == "… Payment ends the agreement early."


@pytest.mark.parametrize("width", [10, 25, 40])
def test_the_snippet_fits_its_width_and_marks_what_is_left_out(width):
    shown = snippet(CLAUSE, "ninety days notice", width=width)
    assert len(shown) <= width and shown.startswith("…") and shown.endswith("…")


def test_without_a_matching_term_the_first_words_are_shown_and_the_analyser_is_used():
    assert snippet("Fees are due monthly. Deposits are returned.", "zebra", width=13) == "Fees are due…"
    assert snippet("Fees are due monthly. Deposits are returned.", "deposits", width=100) == "… Deposits are returned."
    # the unicode-words analyser does not stem: "deposit" does not match "Deposits"
    assert snippet("Fees are due monthly. Deposits are returned.", "deposit", width=100,
                   analyzer=UNICODE_WORDS).startswith("Fees")


def test_table_and_text_output_show_the_matching_sentence(tmp_path):
    chunks = tmp_path / "chunks.json"
    chunks.write_text(json.dumps([CLAUSE]))
    args = ["select", "--chunks", str(chunks), "-q", "How much notice ends the agreement?", "--verification", "none"]
    table = CliRunner().invoke(main, [*args, "--format", "table"])
    assert table.exit_code == 0, table.output
    row = next(line for line in table.output.splitlines() if line.startswith("  1 "))
    assert "… Either party may terminate this Agreement" in row and "Late Payment" not in row
    text = CliRunner().invoke(main, [*args, "--format", "text"])
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert lines[1].startswith("match: … Either party may terminate this Agreement") and lines[2] == CLAUSE
