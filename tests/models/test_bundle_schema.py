"""Bundle manifests edited by hand (hashes recomputed) are refused by the strict schema, in one line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("onnxruntime")

from cli_checks import one_line_error  # noqa: E402
from tiny_onnx import make_bundle  # noqa: E402

from meteora_edge.cli.main import main  # noqa: E402
from meteora_edge.errors import BundleError  # noqa: E402
from meteora_edge.models.bundle import MANIFEST_NAME, Bundle  # noqa: E402

Edit = Callable[[dict], None]


def _encoder(m: dict) -> dict:
    return m["components"]["encoder"]


def _set(path: tuple[str, ...], value: object) -> Edit:
    def edit(manifest: dict) -> None:
        target = manifest
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


def _drop(path: tuple[str, ...]) -> Edit:
    def edit(manifest: dict) -> None:
        target = manifest
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return edit


ENC = ("components", "encoder")
CASES: list[tuple[str, Edit, str]] = [
    ("settings-a-string", _set((*ENC, "settings"), "mean"), "settings must be an object"),
    ("files-a-list", _set((*ENC, "files"), ["encoder/model.onnx"]), "is malformed"),
    ("component-a-string", _set(ENC, "encoder"), "is malformed"),
    ("no-tokenizer", _drop((*ENC, "files", "tokenizer")), "lists no tokenizer file"),
    ("no-model", lambda m: [_encoder(m)["files"].pop(r) for r in ("fp32", "int8")], "lists no model file"),
    ("unknown-role", lambda m: _encoder(m)["files"].update(extra=_encoder(m)["files"]["fp32"]), "unknown file role 'extra'"),
    ("unknown-kind", _set((*ENC, "kind"), "reranker"), "unknown kind 'reranker'"),
    ("unknown-setting", _set((*ENC, "settings", "batch"), 64), "unknown setting 'batch'"),
    ("unknown-top-key", _set(("extra",), 1), "unknown key 'extra'"),
    ("unknown-component-key", _set((*ENC, "weights"), {}), "unknown key 'weights'"),
    ("normalize-a-string", _set((*ENC, "settings", "normalize"), "no"), "normalize must be true or false"),
    ("max-length-huge", _set((*ENC, "settings", "max_length"), 10**9), "max_length must be"),
    ("dimension-negative", _set((*ENC, "settings", "dimension"), -4), "dimension must be"),
    ("size-negative", _set((*ENC, "files", "fp32", "size"), -1), "invalid size -1"),
    ("size-a-bool", _set((*ENC, "files", "fp32", "size"), True), "invalid size True"),
    ("sha256-not-hex", _set((*ENC, "files", "fp32", "sha256"), "z" * 64), "invalid sha256"),
    ("file-extra-key", _set((*ENC, "files", "fp32", "mode"), "rw"), "lacks path/sha256/size"),
    ("path-absolute", _set((*ENC, "files", "fp32", "path"), "/etc/passwd"), "points outside the bundle"),
    ("report-a-list", _set((*ENC, "report"), [1]), "report must be an object"),
    ("licence-a-number", _set((*ENC, "licence"), 2), "licence must be a string"),
    ("version-a-bool", _set(("format_version",), True), "invalid format_version"),
    ("bad-name", lambda m: m["components"].update({"Enc oder": m["components"].pop("encoder")}), "name 'Enc oder' is invalid"),
    ("llm-context-a-string", lambda m: m["components"].update(
        llm={"kind": "llm", "files": {"model": _encoder(m)["files"]["fp32"]}, "settings": {"context_size": "4096"}}),
     "llm setting context_size must be a positive integer"),
]


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return make_bundle(tmp_path / "bundle")


@pytest.mark.parametrize(("edit", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_an_edited_manifest_is_refused_on_load_and_by_every_command(bundle, edit, message):
    manifest = json.loads((bundle / MANIFEST_NAME).read_text())
    edit(manifest)
    (bundle / MANIFEST_NAME).write_text(json.dumps(manifest))  # every file still matches its hash
    with pytest.raises(BundleError, match=message):
        Bundle.load(bundle)
    for args in (["models", "verify", str(bundle)], ["models", "info", str(bundle)], ["doctor", "--bundle", str(bundle)]):
        result = CliRunner().invoke(main, args)
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert result.exit_code == 1 and "Traceback" not in result.output
        if args[0] == "models":
            one_line_error(result, message.split("'")[0])
        else:
            assert "BROKEN" in result.output


def test_a_manifest_that_is_a_directory_is_one_line(tmp_path):
    (tmp_path / MANIFEST_NAME).mkdir()
    one_line_error(CliRunner().invoke(main, ["models", "info", str(tmp_path)]), "is a directory")


def test_a_file_entry_pointing_at_a_directory_is_one_line(bundle):
    manifest = json.loads((bundle / MANIFEST_NAME).read_text())
    manifest["components"]["encoder"]["files"]["fp32"].update(path="encoder", size=(bundle / "encoder").stat().st_size)
    (bundle / MANIFEST_NAME).write_text(json.dumps(manifest))
    one_line_error(CliRunner().invoke(main, ["models", "verify", str(bundle)]), "is not a regular file")


def test_the_exported_bundles_pass_the_schema(bundle):
    assert Bundle.load(bundle).verify()["encoder"] == {"fp32": "ok", "int8": "ok", "tokenizer": "ok"}
