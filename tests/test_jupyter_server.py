"""The chapters run on a Jupyter Server as they do on Binder.

A real Jupyter Server (with Jupytext, as binder/ sets it up) is started on localhost from this
environment. Its contents API must hand out every chapter's .md as a notebook with the chapter's cells,
and chapter 1, executed cell by cell through a kernel of that server (REST to start the kernel, the
kernel's websocket channel to run code), must print what its golden notebook recorded, including the
chapter's headline figure.
"""

import asyncio
import datetime
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import jupytext
import nbformat
import pytest
import requests
from tornado.websocket import websocket_connect

from tools import built_site

CHAPTER = "chapters/01_next_token_prediction"
HEADLINE = "average loss: 1.31 nats"  # the source page's average loss of the example sentence


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port, token = free_port(), uuid.uuid4().hex
    home = tmp_path_factory.mktemp("jupyter")
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter_server",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={built_site.ROOT}",
            "--allow-root",
        ],  # CI runs as root
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(home / "server.log", "w"),
    )
    base, headers = f"http://127.0.0.1:{port}", {"Authorization": f"token {token}"}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{base}/api/status", headers=headers, timeout=2).ok:
                    break
            except requests.ConnectionError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (home / "server.log").read_text()[-3000:]
            time.sleep(0.3)
        yield base, token, headers
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_jupytext_is_the_servers_contents_manager(server):
    base, _, headers = server
    info = requests.get(
        f"{base}/api/contents/{CHAPTER}.md", params={"type": "notebook", "content": 0}, headers=headers, timeout=30
    )
    assert info.ok, info.text
    assert info.json()["type"] == "notebook"


@pytest.mark.parametrize("page_name", built_site.chapter_pages())
def test_chapter_opens_as_a_notebook(server, page_name):
    base, _, headers = server
    reply = requests.get(
        f"{base}/api/contents/{page_name}.md", params={"type": "notebook", "content": 1}, headers=headers, timeout=60
    )
    assert reply.ok, f"{page_name}: {reply.status_code} {reply.text[:300]}"
    model = reply.json()
    assert model["type"] == "notebook" and model["format"] == "json"
    served = nbformat.from_dict(model["content"])
    local = jupytext.read(built_site.source_of(page_name))
    assert [c.source for c in served.cells if c.cell_type == "code"] == [
        c.source for c in local.cells if c.cell_type == "code"
    ], f"{page_name}: the served cells differ"
    assert served.metadata["kernelspec"]["name"] == "python3"


def message(session, code):
    return {
        "header": {
            "msg_id": uuid.uuid4().hex,
            "msg_type": "execute_request",
            "username": "test",
            "session": session,
            "version": "5.3",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        },
        "parent_header": {},
        "metadata": {},
        "buffers": [],
        "channel": "shell",
        "content": {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
    }


async def run_cells(ws_url, cells, timeout=300):
    """Execute each code cell over the kernel's websocket; return (printed text, error) per cell."""
    ws = await websocket_connect(ws_url)
    session, results = uuid.uuid4().hex, []
    try:
        for source in cells:
            request = message(session, source)
            msg_id = request["header"]["msg_id"]
            await ws.write_message(json.dumps(request))
            text, error, replied, idle = [], None, False, False
            while not (replied and idle):
                raw = await asyncio.wait_for(ws.read_message(), timeout)
                assert raw is not None, "the kernel's websocket closed"
                msg = json.loads(raw)
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind = msg["header"]["msg_type"]
                if kind == "stream":
                    text.append(msg["content"]["text"])
                elif kind == "execute_result":
                    text.append(msg["content"]["data"].get("text/plain", "") + "\n")
                elif kind == "error":
                    error = f"{msg['content']['ename']}: {msg['content']['evalue']}"
                elif kind == "execute_reply":
                    replied = True
                elif kind == "status" and msg["content"]["execution_state"] == "idle":
                    idle = True
            results.append(("".join(text), error))
    finally:
        ws.close()
    return results


def test_chapter_1_runs_through_a_kernel_of_the_server(server):
    base, token, headers = server
    kernel = requests.post(
        f"{base}/api/kernels", json={"name": "python3", "path": "chapters"}, headers=headers, timeout=60
    )
    assert kernel.ok, kernel.text
    kernel_id = kernel.json()["id"]
    try:
        notebook = requests.get(
            f"{base}/api/contents/{CHAPTER}.md", params={"type": "notebook"}, headers=headers, timeout=60
        ).json()["content"]
        cells = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        ws_url = f"ws://127.0.0.1:{base.rsplit(':', 1)[1]}/api/kernels/{kernel_id}/channels?token={token}"
        sources = ["".join(c["source"]) for c in cells]
        # a thread of its own: the browser tests' Playwright keeps an event loop running in this one
        with ThreadPoolExecutor(1) as pool:
            results = pool.submit(lambda: asyncio.run(run_cells(ws_url, sources))).result()
    finally:
        requests.delete(f"{base}/api/kernels/{kernel_id}", headers=headers, timeout=30)

    golden = [
        c
        for c in nbformat.read(
            built_site.ROOT / "tests" / "golden" / f"{CHAPTER.split('/')[1]}.ipynb", as_version=4
        ).cells
        if c.cell_type == "code"
    ]
    assert len(golden) == len(results)
    for number, (cell, (printed, error)) in enumerate(zip(golden, results), start=1):
        tags = cell.metadata.get("tags", [])
        assert error is None or "raises-exception" in tags, f"cell {number} failed on the server: {error}"
        if "nbval-ignore-output" in tags:
            continue
        expected = "".join(o.text for o in cell.outputs if o.output_type == "stream")
        assert printed.startswith(expected), f"cell {number} printed\n{printed}\nthe golden has\n{expected}"
    assert HEADLINE in "".join(printed for printed, _ in results)
