"""Finding and fetching Chinook: a real HTTP server on 127.0.0.1 serves a good and a damaged copy."""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from nl2sql_assets.datasources.chinook import (
    CHINOOK_SHA256,
    ChinookError,
    ChinookNotFound,
    cached_path,
    default_cache_dir,
    resolve_chinook,
    sha256_file,
)


class _Handler(http.server.SimpleHTTPRequestHandler):
    disable_nagle_algorithm = True  # without it every keep-alive request stalls ~40 ms
    requests: list[str]

    def do_GET(self) -> None:
        self.requests.append(self.path)
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


class Server:
    def __init__(self, folder: Path) -> None:
        self.requests: list[str] = []
        handler = type("Handler", (_Handler,), {"requests": self.requests})
        self.httpd = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(handler, directory=str(folder))
        )
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, chinook_path: Path) -> Path:
    folder = tmp_path_factory.mktemp("served")
    shutil.copyfile(chinook_path, folder / "chinook.sqlite")
    data = bytearray((folder / "chinook.sqlite").read_bytes())
    data[5000] ^= 0x01  # one byte changed
    (folder / "corrupt.sqlite").write_bytes(bytes(data))
    return folder


@pytest.fixture(scope="module")
def running_server(files: Path) -> Iterator[Server]:
    srv = Server(files)
    yield srv
    srv.stop()


@pytest.fixture
def server(running_server: Server) -> Server:
    running_server.requests.clear()  # each test counts its own requests
    return running_server


def test_download_into_an_empty_cache_then_reuse_it(server: Server, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    got = resolve_chinook(cache_dir=cache, url=server.url("chinook.sqlite"), environ={})
    assert got == cached_path(cache)
    assert got.name == f"chinook-{CHINOOK_SHA256[:8]}.sqlite"
    assert sha256_file(got) == CHINOOK_SHA256
    assert server.requests == ["/chinook.sqlite"]
    assert sorted(p.name for p in cache.iterdir()) == [got.name]  # no temp file left over

    again = resolve_chinook(cache_dir=cache, url=server.url("chinook.sqlite"), environ={})
    assert again == got
    assert len(server.requests) == 1  # the cache answered, no HTTP


def test_a_download_with_the_wrong_hash_is_refused_and_not_kept(
    files: Path, server: Server, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    url = server.url("corrupt.sqlite")
    with pytest.raises(ChinookError) as err:
        resolve_chinook(cache_dir=cache, url=url, environ={})
    message = str(err.value)
    assert url in message and CHINOOK_SHA256 in message
    assert sha256_file(files / "corrupt.sqlite") in message
    assert list(cache.iterdir()) == []


def test_a_failed_download_leaves_nothing(server: Server, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    url = server.url("missing.sqlite")
    with pytest.raises(ChinookNotFound, match=r"none is cached.*could not be downloaded.*missing\.sqlite.*HTTP 404"):
        resolve_chinook(cache_dir=cache, url=url, environ={})
    assert list(cache.iterdir()) == []


def test_an_explicit_file_with_the_wrong_hash_is_refused(files: Path, server: Server, tmp_path: Path) -> None:
    bad = files / "corrupt.sqlite"
    with pytest.raises(ChinookError) as err:
        resolve_chinook(bad, cache_dir=tmp_path, url=server.url("chinook.sqlite"), environ={})
    message = str(err.value)
    assert str(bad) in message and CHINOOK_SHA256 in message and sha256_file(bad) in message
    assert server.requests == []  # an explicit file is never replaced by a download


def test_explicit_path_wins_over_the_environment(files: Path, tmp_path: Path) -> None:
    good = files / "chinook.sqlite"
    environ = {"NL2SQL_CHINOOK": str(files / "corrupt.sqlite")}
    assert resolve_chinook(good, cache_dir=tmp_path, environ=environ) == good


def test_the_environment_variable_is_used(files: Path, server: Server, tmp_path: Path) -> None:
    good = files / "chinook.sqlite"
    got = resolve_chinook(
        cache_dir=tmp_path, url=server.url("chinook.sqlite"), environ={"NL2SQL_CHINOOK": str(good)}
    )
    assert got == good
    assert server.requests == []
    with pytest.raises(ChinookError, match="NL2SQL_CHINOOK"):
        resolve_chinook(cache_dir=tmp_path, environ={"NL2SQL_CHINOOK": str(files / "corrupt.sqlite")})
    with pytest.raises(ChinookError, match="not found"):
        resolve_chinook(cache_dir=tmp_path, environ={"NL2SQL_CHINOOK": str(tmp_path / "gone.sqlite")})


def test_a_corrupted_cached_file_is_refused_with_advice(files: Path, server: Server, tmp_path: Path) -> None:
    cached = cached_path(tmp_path)
    shutil.copyfile(files / "corrupt.sqlite", cached)
    with pytest.raises(ChinookError, match=r"(?s)cached Chinook.*Delete it"):
        resolve_chinook(cache_dir=tmp_path, url=server.url("chinook.sqlite"), environ={})
    assert server.requests == []


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"NL2SQL_CACHE_DIR": "/x/cache", "XDG_CACHE_HOME": "/y"}, "/x/cache"),
        ({"XDG_CACHE_HOME": "/y"}, "/y/nl2sql-assets"),
        ({}, str(Path.home() / ".cache" / "nl2sql-assets")),
    ],
)
def test_the_cache_folder(environ: dict[str, str], expected: str) -> None:
    assert default_cache_dir(environ) == Path(expected)


def test_the_cache_folder_comes_from_the_environment(files: Path, server: Server, tmp_path: Path) -> None:
    environ = {"NL2SQL_CACHE_DIR": str(tmp_path / "from-env")}
    got = resolve_chinook(url=server.url("chinook.sqlite"), environ=environ)
    assert got == cached_path(tmp_path / "from-env")
    assert got.is_file()
