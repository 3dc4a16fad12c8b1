"""An OAuth-protected MCP server over streamable HTTP, written with the SDK's own server auth
(dynamic client registration, authorization code + PKCE, refresh), for the login tests.

    python oauth_server.py PORT [--expires S] [--fault bad-metadata|hang-token]
                                [--client ID --redirect URI [--no-registration]]

The authorization endpoint approves at once (it redirects straight back to the client's
``redirect_uri`` with a code): the "user" is the test's stand-in browser. Access tokens
live ``--expires`` seconds. ``--fault bad-metadata`` serves metadata documents that do not
validate (and no endpoints at the conventional fallback paths); ``--fault hang-token``
makes the token endpoint never answer. ``--client`` registers a client beforehand (public,
or with ``--secret`` confidential), allowed to come back to ``--redirect`` only; with
``--no-registration`` it is the only client (dynamic registration is off). Every token and
refresh the server issues is appended to ``$OAUTH_SERVER_LOG`` (one word a line) when set,
so a test can see a refresh happen.
"""

from __future__ import annotations

import argparse
import os
import secrets
import time
from typing import Any

import anyio
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl


def _note(word: str) -> None:
    path = os.environ.get("OAUTH_SERVER_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(word + "\n")


class AutoApprove:
    """An in-memory authorization server that says yes to everyone."""

    def __init__(self, expires: int) -> None:
        self.expires = expires
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.access: dict[str, AccessToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        _note("register")

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or ["mcp"],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        _note("token")
        return self._issue(client, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        _note("refresh")
        return self._issue(client, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: Any) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(
        self, client: OAuthClientInformationFull, scopes: list[str], resource: str | None
    ) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        client_id = client.client_id or ""
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + self.expires,
            resource=resource,
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=self.expires,
            refresh_token=refresh,
            scope=" ".join(scopes),
        )


def build(
    port: int,
    expires: int,
    *,
    client: str | None = None,
    redirect: str | None = None,
    secret: str | None = None,
    registration: bool = True,
) -> MCPServer:
    base = f"http://127.0.0.1:{port}"
    provider = AutoApprove(expires)
    if client is not None:
        provider.clients[client] = OAuthClientInformationFull(
            client_id=client,
            redirect_uris=[AnyUrl(redirect or "")],
            scope="mcp",
            client_secret=secret,
            token_endpoint_auth_method="client_secret_post" if secret else "none",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        )
    server = MCPServer(
        "guarded",
        instructions="Guarded notes. Ask before deleting.",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            validate_token_resource=False,
            client_registration_options=ClientRegistrationOptions(
                enabled=registration, valid_scopes=["mcp"], default_scopes=["mcp"]
            ),
            required_scopes=["mcp"],
        ),
    )

    @server.tool()
    def whoami() -> str:
        """Say who is calling."""
        return "an authorized caller"

    return server


async def _answer(send: Any, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--expires", type=int, default=3600)
    parser.add_argument("--fault", choices=["bad-metadata", "hang-token"])
    parser.add_argument("--client")
    parser.add_argument("--redirect")
    parser.add_argument("--secret")
    parser.add_argument("--no-registration", action="store_true")
    opts = parser.parse_args()

    import uvicorn

    server = build(
        opts.port,
        opts.expires,
        client=opts.client,
        redirect=opts.redirect,
        secret=opts.secret,
        registration=not opts.no_registration,
    )
    app: Any = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    inner = app

    async def faulty(scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if opts.fault == "bad-metadata" and path.startswith("/.well-known/"):
            await _answer(send, 200, b'{"resource": 42, "authorization_servers": "nowhere"}')
            return
        if opts.fault == "bad-metadata" and path in ("/register", "/authorize", "/token"):
            await _answer(send, 404, b'{"error": "not here"}')  # only the metadata says where
            return
        if opts.fault == "hang-token" and path == "/token":
            await anyio.sleep_forever()
        await inner(scope, receive, send)

    uvicorn.run(
        faulty, host="127.0.0.1", port=opts.port, log_level="warning", timeout_graceful_shutdown=1
    )


if __name__ == "__main__":
    main()
