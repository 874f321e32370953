"""Inputs of the server and adapter tests, in the tiny tokenizer's vocabulary."""

# sentences in the tiny tokenizer's vocabulary, so the tiny encoder tells them apart
DOCUMENTS = {
    "terms.md": "Either party may terminate the agreement after ninety days written notice. The agreement ends "
                "after the notice days. Fees are due monthly.",
    "supply.md": "The supplier shall deliver goods. The supplier shall deliver the goods after written notice. "
                 "Data are due monthly.",
    "fees.txt": "Fees are due monthly after the agreement. Fees are due after written notice. Either party may "
                "deliver data.",
}
CHUNKS = [
    {"text": "Either party may terminate the agreement.", "source": "terms.md", "metadata": {"section": 1}},
    {"text": "Fees are due monthly.", "source": "terms.md", "metadata": {"section": 2}},
    {"text": "The supplier shall deliver goods.", "source": "supply.md", "metadata": {"section": 1}},
    {"text": "The agreement ends after ninety days written notice.", "source": "terms.md", "metadata": {"section": 3}},
    {"text": "Data are due after the notice days.", "source": "supply.md", "metadata": {"section": 2}},
]
