"""An MCP server written with the official SDK, for the tests and bench/bench_mcp.py.

    python tests/mcp_server.py            # stdio
    python tests/mcp_server.py http PORT  # streamable HTTP on 127.0.0.1:PORT/mcp
    python tests/mcp_server.py http PORT json  # the same, answering in JSON, not SSE
    python tests/mcp_server.py http PORT echo  # a careless server: it echoes what it got
    python tests/mcp_server.py modern          # stdio, refusing the initialize handshake
    python tests/mcp_server.py http PORT modern  # HTTP, refusing it (HTTP 400)

Its tools cover progress (``steps``, ``hang``), server requests in both revisions
(``ask`` elicits, ``sample`` samples, ``rootlist`` lists roots: as requests mid-call
under the initialize handshake, as ``input_required`` results under 2026-07-28), a
resource link (``link``) and a changing tool list (``grow``); it has text, image and
binary resources and a prompt (``review``).

In ``echo`` mode the tools ``reject``, ``rpc_error`` and ``headers`` answer with the
request's headers and URL echoed: in a 403 body, in a JSON-RPC error's message and in
a tool result, as a server that repeats what it was sent would.

(``MCPServer`` is what mcp 1.x called ``FastMCP``.)
"""

from __future__ import annotations

import io
import os
import sys
import time
from typing import Annotated, Any

import anyio
import orjson
from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, Image, MCPServer, Resolve
from mcp.server.mcpserver.prompts.base import AssistantMessage, Message, UserMessage
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Sample
from mcp_types import (
    CreateMessageResult,
    ListRootsResult,
    ResourceLink,
    SamplingMessage,
    TextContent,
)
from PIL import Image as PILImage
from pydantic import BaseModel, Field

app = MCPServer("navi-test", log_level="ERROR")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@app.tool()
def square(width: int = 8) -> Image:
    """A red square PNG of the given width."""
    buf = io.BytesIO()
    PILImage.new("RGB", (width, width), (255, 0, 0)).save(buf, format="PNG")
    return Image(data=buf.getvalue(), format="png")


@app.tool()
def stats(values: list[float]) -> dict[str, Any]:
    """Count and sum of values (a structured result)."""
    return {"count": len(values), "total": sum(values)}


@app.tool()
def fail(reason: str) -> str:
    """Raise an error with the reason."""
    raise ValueError(reason)


@app.tool()
def crash() -> str:
    """End the server process mid-call."""
    sys.stderr.write("crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@app.tool()
def nap(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return f"slept {seconds}"


@app.tool()
def env(name: str) -> str:
    """The value of an environment variable, or "(unset)"."""
    return os.environ.get(name, "(unset)")


@app.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@app.tool()
async def steps(count: int, ctx: Context) -> str:
    """Report progress ``count`` times, 0.3 s apart, then answer."""
    for i in range(count):
        await ctx.report_progress(i + 1, count, f"step {i + 1}")
        await anyio.sleep(0.3)
    return f"{count} steps"


@app.tool()
async def hang(ctx: Context, mark: str = "") -> str:
    """Report progress once, then never answer; once cancelled, write "cancelled"
    to the file ``mark`` (when given)."""
    await ctx.report_progress(0, None, "started")
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        if mark:  # whole or not at all: the test may read it at any moment
            with open(mark + ".part", "w") as f:
                f.write("cancelled")
            os.replace(mark + ".part", mark)
        raise
    return "never"


class Colour(BaseModel):
    colour: str


def _ask_colour() -> Elicit[Colour]:
    return Elicit("Which colour?", Colour)


def _sample() -> Sample:
    text = TextContent(type="text", text="Name a fruit.")
    return Sample([SamplingMessage(role="user", content=text)], max_tokens=40)


def _roots() -> ListRoots:
    return ListRoots()


@app.tool()
async def ask(
    answer: Annotated[ElicitationResult[Colour], Resolve(_ask_colour)],
) -> str:
    """Ask the user for a colour (elicitation)."""
    if answer.action == "accept":
        return f"colour: {answer.data.colour}"
    return f"no colour ({answer.action})"


@app.tool()
async def sample(reply: Annotated[CreateMessageResult, Resolve(_sample)]) -> str:
    """Ask the client's model to name a fruit (sampling)."""
    text = getattr(reply.content, "text", "")
    return f"the model said: {text}"


@app.tool()
async def rootlist(reply: Annotated[ListRootsResult, Resolve(_roots)]) -> str:
    """The client's roots."""
    return " ".join(str(r.uri) for r in reply.roots)


@app.tool()
def link() -> list[Any]:
    """A resource link to the notes (read by the client)."""
    return [ResourceLink(type="resource_link", uri="notes://today", name="today")]


@app.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named ``extra`` (the server says its tools changed)."""
    if "extra" not in [t.name for t in await app.list_tools()]:
        app.add_tool(lambda: "extra!", name="extra", description="added later")
        await ctx.session.send_tool_list_changed()
    return "grown"


@app.tool()
def region(
    name: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
) -> str:
    """Echo a region named in an ``x-mcp-header`` argument (mirrored as a header)."""
    return f"region {name}"


@app.resource("notes://today", mime_type="text/plain")
def notes() -> str:
    """Today's notes."""
    return "buy milk"


@app.resource("image://square", mime_type="image/png")
def square_png() -> bytes:
    """A red PNG."""
    buf = io.BytesIO()
    PILImage.new("RGB", (4, 4), (255, 0, 0)).save(buf, format="PNG")
    return buf.getvalue()


@app.resource("data://blob", mime_type="application/octet-stream")
def blob() -> bytes:
    """Ten bytes of binary."""
    return bytes(range(10))


@app.prompt()
def review(code: str) -> list[Message]:
    """Ask for a review of ``code``."""
    return [
        UserMessage(f"Review this: {code}"),
        AssistantMessage("Looking at it."),
    ]


ECHOED = ("reject", "rpc_error", "headers")


def echoing(inner: Any) -> Any:
    """An ASGI app that answers the ``ECHOED`` tools' calls itself, echoing the
    request's headers and URL; every other request goes to ``inner``."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await inner(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            request = orjson.loads(body)
            name = (
                request["params"]["name"] if request["method"] == "tools/call" else ""
            )
        except (orjson.JSONDecodeError, KeyError, TypeError):
            name = ""
        if name not in ECHOED:
            replayed = False

            async def again() -> dict[str, Any]:
                nonlocal replayed
                if replayed:
                    message: dict[str, Any] = await receive()
                    return message
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}

            await inner(scope, again, send)
            return
        echo = " ".join(f"{k.decode()}: {v.decode()}" for k, v in scope["headers"])
        echo += f" url: {scope['path']}?{scope['query_string'].decode()}"
        if name == "reject":
            status, kind, out = 403, b"text/plain", f"denied; you sent {echo}".encode()
        else:
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
            if name == "rpc_error":
                answer["error"] = {"code": -32000, "message": f"refused: {echo}"}
            else:
                text = {"type": "text", "text": f"you sent {echo}"}
                answer["result"] = {"content": [text], "structuredContent": None}
            status, kind, out = 200, b"application/json", orjson.dumps(answer)
        head = [(b"content-type", kind), (b"content-length", str(len(out)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": out})

    return asgi


def serve_echoing(port: int) -> None:
    import uvicorn

    for name in ECHOED:
        app.add_tool(lambda: "not reached", name=name, description=f"echoes ({name})")
    inner = app.streamable_http_app(host="127.0.0.1")
    uvicorn.run(echoing(inner), host="127.0.0.1", port=port, log_level="error")


#: the answer of a server that knows only the 2026-07-28 revision to ``initialize``
NO_HANDSHAKE = {
    "code": -32022,
    "message": "this server speaks only protocol 2026-07-28 (no initialize)",
    "data": {"supported": ["2026-07-28"], "requested": "2025-11-25"},
}


def modern_only(inner: Any) -> Any:
    """An ASGI app that refuses the initialize handshake (HTTP 400) and passes every
    other request to ``inner``: a server of the 2026-07-28 revision alone."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await inner(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            request = {}
        if isinstance(request, dict) and request.get("method") == "initialize":
            out = orjson.dumps(
                {"jsonrpc": "2.0", "id": request.get("id"), "error": NO_HANDSHAKE}
            )
            head = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 400, "headers": head})
            await send({"type": "http.response.body", "body": out})
            return
        replayed = False

        async def again() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                message: dict[str, Any] = await receive()
                return message
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await inner(scope, again, send)

    return asgi


def modern_only_stdio() -> None:
    """This server over stdio in a child process, with ``initialize`` refused here."""
    import subprocess
    import threading

    child = subprocess.Popen(
        [sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdin is not None and child.stdout is not None
    lock = threading.Lock()

    def write(out: Any, line: bytes) -> None:
        with lock:
            out.write(line)
            out.flush()

    def down() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            write(sys.stdout.buffer, line)

    threading.Thread(target=down, daemon=True).start()
    for line in sys.stdin.buffer:
        try:
            request = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(request, dict) and request.get("method") == "initialize":
            answer = {"jsonrpc": "2.0", "id": request.get("id"), "error": NO_HANDSHAKE}
            write(sys.stdout.buffer, orjson.dumps(answer) + b"\n")
        else:
            child.stdin.write(line)
            child.stdin.flush()
    child.stdin.close()
    child.wait()


if __name__ == "__main__":
    if sys.argv[1:2] == ["modern"]:
        modern_only_stdio()
        sys.exit()
    if sys.argv[1:2] == ["http"]:
        if sys.argv[3:4] == ["echo"]:
            serve_echoing(int(sys.argv[2]))
            sys.exit()
        if sys.argv[3:4] == ["modern"]:
            import uvicorn

            inner = app.streamable_http_app(host="127.0.0.1")
            uvicorn.run(
                modern_only(inner),
                host="127.0.0.1",
                port=int(sys.argv[2]),
                log_level="error",
            )
            sys.exit()
        json_response = sys.argv[3:4] == ["json"]
        app.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            json_response=json_response,
        )
    else:
        app.run()
