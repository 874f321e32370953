"""Rationales written by rule: names, parts of a question, the second hop, and ECSE with them."""

import pytest

from meteora_edge import HashingEncoder, MeteoraSelector
from meteora_edge.selection.auto_rationales import (
    compared_names,
    content_words,
    find_names,
    is_comparison,
    question_rationales,
    plan_second_hop,
    second_hop_rationale,
)


@pytest.mark.parametrize("text, split, names", [
    ("Were Scott Derrickson and Ed Wood of the same nationality?", True, ["Scott Derrickson", "Ed Wood"]),
    ("The woman who portrayed Corliss Archer in the film Kiss and Tell", False, ["Corliss Archer", "Kiss and Tell"]),
    ('The director of the romantic comedy "Big Stone Gap" is based where?', False, ["Big Stone Gap"]),
    ("Roger O. Egeberg was Assistant Secretary for Health", False, ["Roger O. Egeberg", "Assistant Secretary for Health"]),
    ("Which writer was from England, Henry Roth or Robert Erskine Childers?", True,
     ["England", "Henry Roth", "Robert Erskine Childers"]),
    ("Where was the Bank of England founded?", False, ["Bank of England"]),
    ("Какой город больше, Москва или Санкт-Петербург?", True, ["Какой", "Москва", "Санкт-Петербург"]),
    ("東京と大阪のどちらが大きいですか", False, []),
    ("what is the capital of france", False, []),
])
def test_find_names(text, split, names):
    assert find_names(text, split_and_or=split) == names


@pytest.mark.parametrize("text, names", [
    ("Laurel and Hardy", ["Laurel and Hardy"]),                     # and/or join a name by default
    ("the \u201ckiss me kate\u201d musical", ["kiss me kate"]),     # curly quotes
    ('He said "it" twice', []),                                    # a quoted function word is no name
    ("Were Al, Bo and Cy there?", ["Al", "Bo and Cy"]),           # a comma ends a run after a short word
    ("Wm. Shakespeare wrote it", ["Wm. Shakespeare"]),             # a two-letter initial
    ("Ask Bob. Alice knows.", ["Ask Bob", "Alice"]),                # a three-letter word ends its sentence
    ("(Ed Wood) directed it", ["Ed Wood"]),                         # punctuation before the first word
    ("He used Windows 7 at home", ["Windows 7"]),                   # a one-digit number after a name
])
def test_find_names_edges(text, names):
    assert find_names(text) == names


def test_content_words_drop_function_words_and_names():
    assert content_words("Who is older, Annie Morton or Terry Richardson?", ["Annie Morton", "Terry Richardson"]) == ["older"]


@pytest.mark.parametrize("question, comparison", [
    ("Who is older, Annie Morton or Terry Richardson?", True),
    ("Are Local H and For Against both from the United States?", True),
    ("What government position was held by the woman who portrayed Corliss Archer?", False),
    ("Which is larger?", False),  # a comparison word but nothing named to compare
    # names and an "or", but the names are not joined: one statement, not a comparison
    ("Buyer Corp shall not tell Seller Ltd whether the deal was signed or negotiated.", False),
    ("Is Lake Baikal deeper than Lake Tanganyika?", True),
])
def test_is_comparison(question, comparison):
    assert is_comparison(question) is comparison


@pytest.mark.parametrize("question, names", [
    ("Which band, Pavement or Hum, is from Illinois?", ["Pavement", "Hum"]),
    ("Are both Elm Park and Oak Hill Station located in Ohio?", ["Elm Park", "Oak Hill Station"]),
    ("Are Local H and For Against both from the United States?", ["Local H", "Against"]),  # "For" left the run
    ("Who is older, Ann Lee, Bo Diaz or Cy Young?", ["Ann Lee", "Bo Diaz", "Cy Young"]),
    ("Buyer Corp shall not tell Seller Ltd whether the deal was signed or negotiated.", []),
    ("Which dog descends from Gordon and Irish Setters: the Manchester Terrier or the Scotch Collie?",
     ["Gordon", "Irish Setters"]),  # two joined groups: the first of the largest
])
def test_compared_names_are_the_names_joined_by_and_or_or_a_comma(question, names):
    assert compared_names(question) == names


def test_a_name_outside_the_comparison_joins_every_part():
    rationales, kind = question_rationales("Are both Elm Park and Oak Hill Station located in Ohio?")
    assert kind == "comparison"
    assert [r.text for r in rationales] == ["Elm Park located Ohio", "Oak Hill Station located Ohio"]


def test_a_comparison_becomes_one_rationale_per_name():
    rationales, kind = question_rationales("Who is older, Annie Morton or Terry Richardson?")
    assert kind == "comparison"
    assert [r.text for r in rationales] == ["Annie Morton older", "Terry Richardson older"]
    assert [r.index for r in rationales] == [1, 2] and {r.label for r in rationales} == {"part"}


def test_any_other_question_is_its_own_first_rationale():
    rationales, kind = question_rationales("  What  type of forum did a former Soviet statesman initiate? ")
    assert kind == "question"
    assert [(r.text, r.index, r.label) for r in rationales] == [
        ("What type of forum did a former Soviet statesman initiate?", 1, "question")]


def test_each_compared_name_takes_every_content_word_of_the_question():
    rationales, _ = question_rationales("Which band formed earlier, Local H or Slowdive?")
    assert [r.text for r in rationales] == ["Local H band formed earlier", "Slowdive band formed earlier"]


def test_second_hop_takes_new_names_that_other_candidates_mention():
    question = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    first = "Kiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer."
    others = ["Shirley Temple was named Chief of Protocol.", "Shirley Temple Black was an actress.", "A film about Ohio."]
    rationale, bridges = second_hop_rationale(question, first, others, index=2)
    assert bridges == ["Shirley Temple"]  # "American" recurs nowhere else; the question's names are not new
    assert rationale.index == 2 and rationale.label == "second hop"
    assert rationale.text.startswith("Shirley Temple ") and "government position" in rationale.text


def test_second_hop_keeps_the_two_names_other_candidates_mention_most():
    first = "Ann Lee met Bo Chan, then Cy Dee, in Oslo."
    others = ["Cy Dee sang.", "Cy Dee and Bo Chan danced.", "Cy Dee, Bo Chan and Ann Lee ate.", "Oslo is cold.",
              "Rain fell.", "Trains ran late.", "Shops closed.", "Night came."]
    _, bridges = second_hop_rationale("Where did they meet?", first, others, index=2)
    assert bridges == ["Cy Dee", "Bo Chan"]  # 3 and 2 mentions; Ann Lee and Oslo have 1
    _, one = second_hop_rationale("Where did they meet?", first, others, index=2, max_names=1)
    assert one == ["Cy Dee"]


def test_second_hop_skips_names_that_contain_or_are_part_of_the_question_s_names():
    question = "Which post did Shirley Temple hold?"
    first = "Shirley Temple Black served as ambassador to Ghana."
    others = ["Shirley Temple Black was an actress.", "Ghana is in West Africa."]
    assert second_hop_rationale(question, first, others, index=2)[1] == ["Ghana"]


def test_no_second_hop_without_a_recurring_new_name():
    assert second_hop_rationale("Who built it?", "It was built by Gustave Eiffel.", ["Paris is big."], index=2) is None


BRIDGE_CHUNKS = [
    "Kiss and Tell is a 1945 comedy film starring Shirley Temple as Corliss Archer.",
    "Shirley Temple later served as Chief of Protocol, a government position.",
    "Corliss Archer is a fictional teenage girl from radio.",
    "A mayor is elected every four years.",
    "Shirley Temple was born in Santa Monica.",
]


def test_select_auto_reaches_the_second_hop_in_another_chunk():
    question = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    selector = MeteoraSelector(HashingEncoder(), expansion_window=0, scoring="hybrid")
    result = selector.select_auto(BRIDGE_CHUNKS, question)
    strategy = result.to_dict()["details"]["rationale_strategy"]
    assert strategy["kind"] == "question" and strategy["first_hop"] == 0
    assert strategy["bridges"] == ["Shirley Temple"]
    second = [m for m in result.rationale_matches if m["rationale_index"] == 2][0]
    assert second["chunk_index"] != 0  # the second hop never pairs with its own first-hop chunk
    assert {0, 1} <= set(result.selected_indices)
    assert 3 not in result.selected_indices


def test_select_auto_on_a_comparison_pairs_each_name():
    chunks = ["Annie Morton (born 1970) is a model.", "Terry Richardson (born 1965) is a photographer.",
              "Morton Salt is a company.", "Richardson, Texas is a city."]
    result = MeteoraSelector(HashingEncoder(), expansion_window=0, scoring="hybrid").select_auto(
        chunks, "Who is older, Annie Morton or Terry Richardson?")
    assert result.to_dict()["details"]["rationale_strategy"]["kind"] == "comparison"
    assert result.pairing_indices == [0, 1]


def test_select_auto_refuses_an_empty_query():
    from meteora_edge import InputError

    with pytest.raises(InputError, match="non-empty"):
        MeteoraSelector(HashingEncoder(), scoring="hybrid").select_auto(BRIDGE_CHUNKS, "   ")


# -- a second hop only through a real bridge name, every word once, and the reason said -----------------

CONTRACT = [
    "Either party may terminate this Agreement on ninety days written notice to the other party.",
    "Notices under this Agreement are given in writing to the addresses above.",
    "Upon termination of this Agreement all fees owed become payable.",
]


def test_a_defined_term_the_question_asks_about_is_no_bridge_and_no_hop_is_written():
    """The demo's question once got "Agreement agreement terminated happens" as its second hop."""
    hop = plan_second_hop("What happens when the agreement is terminated?", CONTRACT[0], CONTRACT[1:], index=2)
    assert hop.rationale is None and hop.bridges == []
    assert hop.considered == {"Agreement": "a word of the question"}
    assert hop.reason == "no second hop: no name of the best chunk is a bridge (Agreement: a word of the question)"


def test_a_word_capitalised_only_at_a_sentence_start_is_no_name():
    first = "Fees are due monthly. Late Fees accrue interest."
    others = ["Fees are listed in the schedule.", "Notices go to the buyer."]
    assert plan_second_hop("When is payment due?", first, others, index=2).considered["Fees"] == (
        "bridge (1 other candidates)")  # "Late Fees" capitalises it mid-sentence: a defined term
    hop = plan_second_hop("When is payment due?", "Fees are due monthly.", others, index=2)
    assert hop.rationale is None and hop.considered == {"Fees": "capitalised only at a sentence start"}


@pytest.mark.parametrize(("question", "first", "others", "expected"), [
    ("Where was the Temple singer born?", "The singer Shirley Temple Temple sang.",
     ["Shirley Temple Temple was born in Santa Monica."], None),  # "Temple" is a word of the question
    ("Which post did the star of the film hold?", "The film starred Shirley Temple as Corliss Archer.",
     ["Shirley Temple served as Chief of Protocol.", "Corliss Archer is fictional; Shirley Temple acted."],
     "Shirley Temple Corliss Archer post star film hold"),
    ("Which post did the star of the star film hold?", "The film starred Ann Lee, then Ann Chan.",
     ["Ann Lee served.", "Ann Chan served."], "Ann Lee Chan post star film hold"),
])
def test_the_second_hop_writes_every_word_once(question, first, others, expected):
    hop = plan_second_hop(question, first, others, index=2)
    text = None if hop.rationale is None else hop.rationale.text
    assert text == expected
    if text is not None:
        words = [w.lower() for w in text.split()]
        assert len(words) == len(set(words))


def test_a_name_most_other_candidates_share_is_the_collections_subject_not_a_bridge():
    """In one contract every clause names the Receiving Party: it leads to no passage in particular."""
    question = "May confidential information be shared with employees?"
    first = "The Receiving Party may share it with its Representatives."
    clauses = [f"The Receiving Party shall observe clause {n}." for n in range(5)] + ["Representatives are bound too."]
    hop = plan_second_hop(question, first, clauses, index=2)
    assert hop.considered["Receiving Party"] == (
        "in most other candidates (5 of 6): what they all share, not a bridge")
    assert hop.bridges == ["Representatives"]
    # in half of them or fewer it is still a bridge; with three others the rule does not apply
    assert "Receiving Party" in plan_second_hop(question, first, clauses[2:] + ["Fees.", "Term."], index=2).bridges
    assert "Receiving Party" in plan_second_hop(question, first, clauses[:3], index=2).bridges


def test_common_words_capitalised_as_a_term_are_no_bridge_but_a_name_and_an_acronym_are():
    """A contract's *Recipient* is written "recipient" elsewhere: a defined term, not a link to a passage."""
    question = "May the information be kept after the deal ends?"
    first = "The Recipient shall return all Evaluation Material; Acme Holdings keeps a copy, as NDA says."
    others = ["Any recipient of the evaluation material keeps it secret.", "The Recipient is bound.",
              "Acme Holdings may ask for it back.", "Evaluation Material means any data.", "The NDA is signed.",
              "Filed as nda-final.txt."]
    hop = plan_second_hop(question, first, others, index=2)
    lower = "written in lower case too: common words capitalised as a term, not a name"
    assert hop.considered["Recipient"] == lower
    assert hop.considered["Evaluation Material"] == lower
    # Acme Holdings is never in lower case; an acronym stays a name though "nda-final" is
    assert hop.bridges == ["NDA", "Acme Holdings"]
    # one word of the term never written in lower case keeps it a name
    hop = plan_second_hop(question, first, ["Any recipient of the material keeps it secret.", *others[1:]], index=2)
    assert hop.considered["Recipient"] == lower and hop.considered["Evaluation Material"] != lower
    # with only terms in the best chunk no hop is written, and the reason names each
    hop = plan_second_hop(question, "The Recipient returns it.", others, index=2)
    assert hop.rationale is None and hop.reason == f"no second hop: no name of the best chunk is a bridge (Recipient: {lower})"
