"""OAuth 2.1 for remote MCP servers: the SDK's ``OAuthClientProvider`` (discovery, dynamic
client registration, PKCE, refresh) with caliban's token store, login flow and bounds.

- :class:`TokenStore` keeps one server's tokens and client registration in
  ``<state dir>/mcp-auth/<server>-<hash of its URL>.json``, readable by the user only (0600 in
  a 0700 directory), never in the project or a config file.
- :func:`session_auth` is what a session's HTTP connection authenticates with: stored tokens
  are sent and refreshed (a little before they expire), but a server that wants a login fails
  at once with ``needs login: run `caliban mcp login NAME```: a session never opens a browser.
- :func:`login` (``caliban mcp login NAME``) runs the whole flow: it prints the authorization
  URL and opens the browser (``BROWSER`` is honoured), and takes the code on a one-shot
  listener on 127.0.0.1 that checks ``state``. Every request to the authorization server is
  bounded in time, and so is the wait for the browser.

The MCP SDK is imported inside the functions here, never at import time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import html
import json
import os
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from caliban.config import paths
from caliban.mcp.config import ServerConfig
from caliban.mcp.connection import describe_error
from caliban.util.fsutil import atomic_write_bytes

if TYPE_CHECKING:
    import httpx2
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken

__all__ = [
    "AUTH_REQUEST_TIMEOUT",
    "LOGIN_TIMEOUT",
    "LoginFailed",
    "TokenStore",
    "login",
    "needs_login",
    "session_auth",
    "uses_oauth",
]

AUTH_REQUEST_TIMEOUT = 30.0
"""Seconds one request to an authorization server (metadata, registration, token) may take."""
LOGIN_TIMEOUT = 300.0
"""Seconds ``caliban mcp login`` waits for the browser to come back."""
REFRESH_MARGIN = 60.0
"""Refresh this long before a token expires (a tenth of its lifetime when that is shorter)."""
_CALLBACK_PATH = "/callback"
_MAX_REQUEST_LINE = 8192


class LoginFailed(Exception):
    """A login or an authenticated connection ended; the message says why and what to do."""


def needs_login(name: str) -> str:
    """The one line a session says about a server that wants a login."""
    return f"needs login: run `caliban mcp login {name}`"


def uses_oauth(config: ServerConfig) -> bool:
    """Whether caliban authenticates to this server with OAuth: any HTTP or SSE server that
    does not send its own ``Authorization`` header."""
    return config.transport != "stdio" and not any(
        key.lower() == "authorization" for key in config.headers
    )


# ---------------------------------------------------------------------------- token store


def auth_dir() -> Path:
    return paths.mcp_tokens_dir()


class TokenStore:
    """One server's OAuth tokens and client registration, in a file only the user can read.

    Implements the SDK's ``TokenStorage`` protocol. Keyed by the server's name and URL, so a
    server pointed at another URL logs in again. A file that cannot be read is treated as
    empty (the next login rewrites it).
    """

    def __init__(self, config: ServerConfig) -> None:
        url = config.url or ""
        digest = hashlib.sha256(url.encode()).hexdigest()[:12]
        self.path = auth_dir() / f"{config.name}-{digest}.json"
        self.url = url
        self.client_id = config.oauth_client_id
        """A client registered beforehand (``oauth.client_id``): it is the registration."""

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(directory, 0o700)
        # Created 0600 first: the atomic write keeps an existing file's mode.
        os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        os.chmod(self.path, 0o600)
        atomic_write_bytes(self.path, json.dumps({**data, "url": self.url}, indent=2).encode())

    async def get_tokens(self) -> OAuthToken | None:
        from mcp.shared.auth import OAuthToken
        from pydantic import ValidationError

        raw = self._read().get("tokens")
        try:
            return None if raw is None else OAuthToken.model_validate(raw)
        except ValidationError:
            return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        data = self._read()
        data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        if tokens.expires_in is not None:
            margin = min(REFRESH_MARGIN, tokens.expires_in / 10)
            data["refresh_at"] = time.time() + tokens.expires_in - margin
        else:
            data.pop("refresh_at", None)
        self._write(data)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull
        from pydantic import ValidationError

        if self.client_id is not None:
            # No issuer bound: the SDK uses it as is and never registers.
            secret = self.client_secret()
            return OAuthClientInformationFull(
                client_id=self.client_id,
                client_secret=secret,
                token_endpoint_auth_method="client_secret_post" if secret else "none",
                redirect_uris=None,
            )
        raw = self._read().get("client")
        try:
            return None if raw is None else OAuthClientInformationFull.model_validate(raw)
        except ValidationError:
            return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        data = self._read()
        data["client"] = client_info.model_dump(mode="json", exclude_none=True)
        self._write(data)

    def client_secret(self) -> str | None:
        """The secret of the configured client (``caliban mcp add --client-secret``)."""
        secret = self._read().get("client_secret")
        return secret if isinstance(secret, str) and secret else None

    def set_client_secret(self, secret: str) -> None:
        data = self._read()
        data["client_secret"] = secret
        self._write(data)

    def refresh_at(self) -> float | None:
        """When the stored access token is due for a refresh (None: no expiry known)."""
        value = self._read().get("refresh_at")
        return float(value) if isinstance(value, int | float) else None

    def callback_port(self) -> int:
        """The port of the stored registration's redirect URI on 127.0.0.1 (a new login
        listens there, so the registration stays valid), else 0."""
        client = self._read().get("client")
        uris = client.get("redirect_uris") if isinstance(client, dict) else None
        if uris and isinstance(uris[0], str):
            parts = urlsplit(uris[0])
            if parts.hostname == "127.0.0.1" and parts.port is not None:
                return parts.port
        return 0

    def has_tokens(self) -> bool:
        return "tokens" in self._read()

    def forget_tokens(self) -> None:
        """Drop the tokens, keep the client registration (a new login reuses it)."""
        data = self._read()
        if data.pop("tokens", None) is not None:
            data.pop("refresh_at", None)
            self._write(data)

    def forget_client(self) -> None:
        data = self._read()
        if data.pop("client", None) is not None:
            self._write(data)

    def remove(self) -> bool:
        """Forget the tokens and the registration (logout), keeping only a configured
        client's secret; False when there was nothing to forget."""
        if (secret := self.client_secret()) is not None:
            data = self._read()
            self._write({"client_secret": secret})
            return bool(data.keys() - {"client_secret", "url"})
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True


# ---------------------------------------------------------------------------- the httpx auth


def _client_metadata(redirect_uri: str) -> Any:
    from mcp.shared.auth import OAuthClientMetadata
    from pydantic import AnyUrl

    return OAuthClientMetadata(
        client_name="caliban",
        redirect_uris=[AnyUrl(redirect_uri)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )


@dataclass(frozen=True, kw_only=True)
class _Interactive:
    redirect_uri: str
    redirect: Callable[[str], Any]
    callback: Callable[[], Any]


def _bounded_auth(
    config: ServerConfig,
    store: TokenStore,
    *,
    on_failure: Callable[[str], None],
    interactive: _Interactive | None,
    request_timeout: float,
    on_login_required: Callable[[str], None] | None = None,
) -> httpx2.Auth:
    """The SDK's provider, wrapped: its own requests bounded by ``request_timeout`` and
    marked for the transport (:mod:`caliban.mcp.http`), its failures told to
    ``on_failure`` (the SDK's transports only log an exception raised here), and, unless
    ``interactive``, a 401 answered by ``needs login`` instead of a browser."""
    import httpx2
    from mcp.client.auth import OAuthClientProvider

    redirect_uri = interactive.redirect_uri if interactive else "http://127.0.0.1/callback"
    provider = OAuthClientProvider(
        server_url=config.url or "",
        client_metadata=_client_metadata(redirect_uri),
        storage=store,
        redirect_handler=interactive.redirect if interactive else None,
        callback_handler=interactive.callback if interactive else None,
    )
    timeout = httpx2.Timeout(request_timeout).as_dict()
    malformed: list[str] = []

    def failed(text: str) -> str:
        if not malformed:
            return text
        return f"OAuth failed: {malformed[0]}; without it: {text.removeprefix('OAuth failed: ')}"

    class Bounded(httpx2.Auth):
        async def async_auth_flow(
            self, request: httpx2.Request
        ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
            due = store.refresh_at()
            context = provider.context
            if due is not None and (context.token_expiry_time or due + 1) > due:
                context.token_expiry_time = due  # refresh early, and after a restart too
            flow = provider.async_auth_flow(request)
            try:
                outgoing = await flow.__anext__()
                while True:
                    if outgoing is not request:
                        outgoing.extensions = {
                            **outgoing.extensions,
                            "timeout": timeout,
                            "caliban_auth": True,
                        }
                    response = yield outgoing
                    if outgoing is request and interactive is None and response.status_code == 401:
                        (on_login_required or on_failure)(needs_login(config.name))
                        raise LoginFailed(needs_login(config.name))
                    if outgoing is not request and (problem := await _malformed(response)):
                        malformed.append(problem)
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            except LoginFailed:
                raise
            except Exception as exc:
                on_failure(failed(describe_auth_error(exc)))
                raise
            finally:
                await flow.aclose()

    return Bounded()


def session_auth(
    config: ServerConfig,
    *,
    on_failure: Callable[[str], None],
    on_login_required: Callable[[str], None],
    request_timeout: float = AUTH_REQUEST_TIMEOUT,
) -> httpx2.Auth:
    """The auth of a session's connection to ``config``: stored tokens, refreshed when due;
    a server that wants a (new) login is told to ``on_login_required`` (with the line to
    show), any other OAuth failure to ``on_failure``."""
    return _bounded_auth(
        config,
        TokenStore(config),
        on_failure=on_failure,
        interactive=None,
        request_timeout=request_timeout,
        on_login_required=on_login_required,
    )


_METADATA = {
    "oauth-protected-resource": "ProtectedResourceMetadata",
    "oauth-authorization-server": "OAuthMetadata",
    "openid-configuration": "OAuthMetadata",
}


async def _malformed(response: httpx2.Response) -> str | None:
    """What is wrong with a metadata document the server sent (the SDK skips one that does
    not validate and tries the conventional paths, so a failure later is explained by it)."""
    import mcp.shared.auth
    from pydantic import ValidationError

    path = response.request.url.path
    kind = next((model for key, model in _METADATA.items() if f"/.well-known/{key}" in path), None)
    if kind is None or response.status_code != 200:
        return None
    try:
        getattr(mcp.shared.auth, kind).model_validate_json(await response.aread())
    except ValidationError as exc:
        where = str(response.request.url.copy_with(query=None))
        return f"the OAuth metadata at {where} is malformed ({_first_error(exc)})"
    return None


def _first_error(exc: Any) -> str:
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(part) for part in first.get("loc", ())) or "document"
    return f"{where}: {first.get('msg', exc)}"


def describe_auth_error(exc: BaseException) -> str:
    """One line for an OAuth failure."""
    from pydantic import ValidationError

    if isinstance(exc, LoginFailed):
        return str(exc)
    if isinstance(exc, ValidationError):
        problem = _first_error(exc)
        return f"OAuth failed: an answer of the authorization server is malformed ({problem})"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"OAuth failed: {text}"


# ---------------------------------------------------------------------------- login


class _Callback:
    """A one-shot HTTP listener on 127.0.0.1 for the authorization server's redirect."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._server: asyncio.Server | None = None
        self._state: str | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None
        self.port = 0

    async def start(self, port: int, *, fixed: bool = False) -> None:
        """Listen on ``port`` (0: any); another one when it is taken, unless ``fixed``."""
        self._result = asyncio.get_running_loop().create_future()
        try:
            self._server = await asyncio.start_server(
                self._serve, "127.0.0.1", port, limit=_MAX_REQUEST_LINE
            )
        except OSError as exc:
            if fixed:
                raise LoginFailed(
                    f"cannot listen for the login's callback on 127.0.0.1:{port} "
                    f"(oauth.callback_port): {exc.strerror or exc}"
                ) from None
            if port == 0:
                raise
            self._server = await asyncio.start_server(
                self._serve, "127.0.0.1", 0, limit=_MAX_REQUEST_LINE
            )
        self.port = self._server.sockets[0].getsockname()[1]

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{_CALLBACK_PATH}"

    def expect(self, authorization_url: str) -> None:
        states = parse_qs(urlsplit(authorization_url).query).get("state") or [""]
        self._state = states[0]

    async def result(self) -> AuthorizationCodeResult:
        assert self._result is not None
        return await self._result

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                line = await asyncio.wait_for(reader.readline(), 10)
            except (TimeoutError, ValueError, ConnectionError):
                return
            status, page = self._answer(line.decode("latin-1"))
            body = f"<!doctype html><title>caliban</title><p>{html.escape(page)}</p>".encode()
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.drain(), 5)
        finally:
            writer.close()

    def _answer(self, request_line: str) -> tuple[str, str]:
        from mcp.shared.auth import AuthorizationCodeResult

        parts = request_line.split()
        target = urlsplit(parts[1]) if len(parts) >= 2 and parts[0] == "GET" else None
        if target is None or target.path != _CALLBACK_PATH:
            return "404 Not Found", "Not found."
        result = self._result
        if result is None or result.done():
            return "409 Conflict", "This login has already ended; you can close this tab."
        query = {key: values[0] for key, values in parse_qs(target.query).items()}
        login_again = f"run `caliban mcp login {self._name}` again"
        if query.get("state") != self._state or not self._state:
            result.set_exception(
                LoginFailed(
                    "the browser came back with a `state` that does not belong to this login "
                    f"(an old tab, or a page that is not the authorization server); {login_again}"
                )
            )
            return "400 Bad Request", "This page does not belong to the login caliban started."
        if "error" in query:
            detail = query.get("error_description") or query["error"]
            result.set_exception(
                LoginFailed(f"the authorization server refused: {detail[:300]}; {login_again}")
            )
            return "400 Bad Request", f"Login failed: {detail[:300]}"
        if not query.get("code"):
            result.set_exception(
                LoginFailed(f"the browser came back without a code; {login_again}")
            )
            return "400 Bad Request", "Login failed: no authorization code."
        result.set_result(
            AuthorizationCodeResult(code=query["code"], state=query["state"], iss=query.get("iss"))
        )
        return "200 OK", "caliban is logged in. You can close this tab."


async def login(
    config: ServerConfig,
    *,
    open_url: Callable[[str], None],
    say: Callable[[str], None],
    timeout: float = LOGIN_TIMEOUT,  # noqa: ASYNC109 - the browser's whole round trip
    request_timeout: float = AUTH_REQUEST_TIMEOUT,
) -> int:
    """Log in to ``config``'s server: returns how many tools it lists with the new token.

    ``open_url`` hands the authorization URL to a browser (it must not block); ``say``
    prints a line for the user. Raises :class:`LoginFailed` with a message for the user.
    """
    import anyio
    from mcp import Client

    from caliban.mcp.http import http_transport, sse_transport

    store = TokenStore(config)
    callback = _Callback(config.name)
    fixed = config.oauth_callback_port
    await callback.start(fixed or store.callback_port(), fixed=fixed is not None)
    if store.callback_port() != callback.port:
        store.forget_client()  # registered for another redirect URI
    store.forget_tokens()
    failure: list[str] = []

    async def redirect(url: str) -> None:
        if urlsplit(url).scheme not in ("http", "https"):
            raise LoginFailed(f"the server's authorization URL is not a web address: {url[:200]}")
        callback.expect(url)
        say(f"Opening your browser to log in to {config.name!r}. If it does not open, visit:")
        say(f"  {url}")
        open_url(url)

    async def code() -> AuthorizationCodeResult:
        try:
            return await asyncio.wait_for(callback.result(), timeout)
        except TimeoutError:
            raise LoginFailed(
                f"no answer from the browser within {timeout:g}s; "
                f"run `caliban mcp login {config.name}` again"
            ) from None

    def fail(text: str) -> None:
        failure.append(text)
        scope.cancel()

    auth = _bounded_auth(
        config,
        store,
        on_failure=fail,
        interactive=_Interactive(
            redirect_uri=callback.redirect_uri, redirect=redirect, callback=code
        ),
        request_timeout=request_timeout,
    )
    transport = http_transport if config.transport == "http" else sse_transport
    tools = 0
    try:
        with anyio.CancelScope() as scope:
            scope.deadline = anyio.current_time() + timeout + 4 * request_timeout
            streams = transport(config, max_message=64 * 2**20, on_violation=fail, auth=auth)
            async with Client(streams, cache=None) as client:
                tools = len((await client.list_tools()).tools)
        if failure:
            raise LoginFailed(failure[0])
        if scope.cancelled_caught:
            raise LoginFailed(f"the login did not finish within {timeout:g}s")
    except LoginFailed:
        raise
    except Exception as exc:
        raise LoginFailed(failure[0] if failure else describe_error(exc, config)) from None
    finally:
        await callback.close()
    if not store.has_tokens():
        raise LoginFailed(f"{config.name!r} did not ask for a login (it answers without one)")
    return tools


def logout(config: ServerConfig) -> bool:
    """Forget the server's tokens and registration; False when there were none."""
    return TokenStore(config).remove()
