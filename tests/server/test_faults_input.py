"""Hostile REST input: every bad body gets a 400 with a sentence, and the server keeps answering.

Each case here returned a 500, or was accepted, before the fix (issue 16).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from eugo_jupyter.server.limits import MAX_BODY_BYTES
from tests.fixtures.jupyter import error_of


async def _still_answers(jp_fetch: Any) -> None:
    assert (await jp_fetch("eugo", "clusters")).code == 200


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("[" * 100_000, "bytes; at most"),  # the body: refused before parsing
        ("[" * 20_000 + "]" * 20_000, "nested deeper than 16 levels"),
        ('{"a": ' * 5_000 + "1" + "}" * 5_000, "nested deeper"),
        (" " * (MAX_BODY_BYTES + 1), f"at most {MAX_BODY_BYTES:,} are accepted"),
        (b"\xff\xfe{}", "not UTF-8"),
        ("NaN-", "not JSON"),
    ],
    ids=["100k-deep", "deep-list", "deep-object", "too-large", "not-utf8", "garbage"],
)
async def test_hostile_bodies_are_400_and_the_server_keeps_answering(
    jp_fetch: Any, body: str | bytes, says: str
) -> None:
    code, message = await error_of(jp_fetch, "eugo", "clusters", method="POST", body=body)
    assert code == 400
    assert says in message
    await _still_answers(jp_fetch)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"kind": "local", "name": "abc\n"}, "name='abc\\n' is not allowed"),
        ({"kind": "connect", "address": "10.0.0.5:6379\n", "name": "x\n"}, "not allowed"),
        ({"kind": "local", "head": {"memory": 1e30}}, "is not a size a node can have"),
        ({"kind": "local", "head": {"memory": "900TB"}}, "is not a size a node can have"),
        ({"kind": "local", "head": {"object_store_memory": 1}}, "Ray needs at least 78643200"),
        (
            {"kind": "local", "workers": [{"object_store_memory": 10**30}]},
            "workers[0].object_store_memory",
        ),
        ({"kind": "connect", "address": "127.0.0.1:1", "dashboard": "file:///etc"}, "dashboard="),
    ],
)
async def test_values_no_node_can_have_are_400(jp_fetch: Any, body: object, says: str) -> None:
    code, message = await error_of(
        jp_fetch, "eugo", "clusters", method="POST", body=json.dumps(body)
    )
    assert code == 400
    assert says in message


async def test_unknown_id_under_the_dashboard_proxy_is_a_json_404(jp_fetch: Any) -> None:
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch("eugo", "clusters", "c-00000000", "dashboard", "api", "x")
    response = info.value.response
    assert info.value.code == 404 and response is not None
    assert response.headers.get("Content-Type", "").startswith("application/json")
    assert "No cluster with id 'c-00000000'" in json.loads(response.body)["message"]


@pytest.fixture
def not_ray() -> Iterator[int]:
    """A TCP server that accepts connections and answers every request with junk (not Ray)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


@pytest.mark.parametrize(
    ("scheme", "says"),
    [
        ("ray://", "not as a Ray client server"),
        # A GCS address: named within seconds (Ray's own client retries for about 40 s).
        ("", "not as a Ray cluster's GCS (no answer to a GCS request within 5 s). Give the head"),
    ],
)
async def test_an_address_that_answers_but_not_as_ray_is_400(
    jp_fetch: Any, not_ray: int, scheme: str, says: str
) -> None:
    body = {"kind": "connect", "address": f"{scheme}127.0.0.1:{not_ray}"}
    code, message = await error_of(
        jp_fetch, "eugo", "clusters", method="POST", body=json.dumps(body)
    )
    assert code == 400
    assert says in message
    assert json.loads((await jp_fetch("eugo", "clusters")).body) == []  # nothing was added
