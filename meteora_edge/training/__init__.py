"""DPO training data for the rationale generator (the training itself lives in ``export``).

``dpo_derive`` labels candidate rationale sets from HotpotQA-format data by the evidence
ECSE selects with them; ``dpo_data`` turns labelled records into preference pairs in the
generator's own prompt; ``dpo_files`` reads and writes the split files atomically.
Training comes after ``evaluation`` and reads the questions with its loader and scores a
selection with its metric, so a preferred rationale set is one the evaluation also rates higher.
"""
