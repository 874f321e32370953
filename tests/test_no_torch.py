"""The runtime must never pull in the heavy export-side libraries."""

import subprocess
import sys

HEAVY = ("torch", "transformers", "optimum", "sentence_transformers")


def test_import_and_select_leave_torch_out_of_sys_modules():
    code = (
        "import sys\n"
        "import meteora_edge\n"
        "from meteora_edge import HashingEncoder, MeteoraReranker, MeteoraSelector\n"
        "MeteoraSelector(HashingEncoder()).select(['a b', 'c d'], ['a'])\n"
        "MeteoraReranker(HashingEncoder()).filter('a', ['a b', 'c d'])\n"
        f"bad = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
