"""Milvus: commands that only read never create a database, and server URIs take a user and a
database while the secret stays in the environment (never in a message)."""

import os

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main
from meteora_edge.errors import CollectionError, InputError
from meteora_edge.index.milvus_location import connect, milvus_location, parse_milvus_url

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")


def _run(*args, cwd):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, list(args))
    finally:
        os.chdir(old)


@pytest.mark.parametrize("args", [
    ["index", "info", "milvus://./nope.db"],
    ["index", "search", "milvus://./nope.db", "-q", "notice"],
    ["select", "--index", "milvus://./nope.db", "-q", "notice"],
    ["index", "add", "milvus://./nope.db", "NOTE"],
])
def test_read_only_commands_on_a_missing_lite_database_create_nothing(tmp_path, args):
    (tmp_path / "note.md").write_text("Either party may terminate on fourteen days notice.")
    before = sorted(os.listdir(tmp_path))
    result = _run(*[str(tmp_path / "note.md") if a == "NOTE" else a for a in args], cwd=tmp_path)
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        "Error: the Milvus Lite database ./nope.db does not exist; build one with "
        "'meteora-edge index build --backend milvus --uri ./nope.db …'")
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize("command", ["sync", "remove"])
def test_sync_and_remove_on_a_missing_lite_database_create_nothing(tmp_path, command):
    result = _run("index", command, "milvus://./x.db", str(tmp_path / "note.md"), cwd=tmp_path)
    assert result.exit_code == 1 and result.output.strip().splitlines()[-1].startswith(
        "Error: the Milvus Lite database ./x.db does not exist; build one with")
    assert os.listdir(tmp_path) == []


def test_compact_refuses_a_milvus_url_in_one_line(tmp_path):
    result = _run("index", "compact", "milvus://./x.db", cwd=tmp_path)
    assert result.exit_code == 1 and result.output.strip().splitlines() == [
        "Error: index compact works on a local index folder; Milvus compacts a collection's segments itself"]
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("url, uri, collection, db, user, label", [
    ("milvus://h:19530", "http://h:19530", "meteora_edge", "", "", "milvus://h:19530?collection=meteora_edge"),
    ("milvus://reader@h:19530/notes?collection=faq", "http://h:19530", "faq", "notes", "reader",
     "milvus://reader@h:19530/notes?collection=faq"),
    ("milvus+https://h:443/prod", "https://h:443", "meteora_edge", "prod", "", "milvus+https://h:443/prod?collection=meteora_edge"),
])
def test_server_urls_take_a_database_and_a_user(url, uri, collection, db, user, label):
    location = parse_milvus_url(url)
    assert (location.uri, location.collection, location.db_name, location.user) == (uri, collection, db, user)
    assert location.label == label
    assert milvus_location(f"{uri.split('://')[0]}://{user + '@' if user else ''}h:{uri.rsplit(':', 1)[1]}/{db}",
                           collection).db_name == db


def test_a_password_in_the_uri_is_refused_without_echoing_it():
    with pytest.raises(InputError) as info:
        parse_milvus_url("milvus://bob:s3cret-pw@h:19530/notes")
    assert "s3cret-pw" not in str(info.value) and "METEORA_EDGE_MILVUS_PASSWORD" in str(info.value)


def test_the_secret_from_the_environment_never_reaches_the_message(monkeypatch):
    monkeypatch.setenv("METEORA_EDGE_MILVUS_TOKEN", "tok-very-secret")
    monkeypatch.setenv("METEORA_EDGE_MILVUS_PASSWORD", "pw-very-secret")
    with pytest.raises(CollectionError) as info:
        connect(parse_milvus_url("milvus://bob@127.0.0.1:1/notes"), timeout=1)
    assert "very-secret" not in str(info.value) and str(info.value).startswith("cannot connect to Milvus at")
