"""Who an HTTP request comes from: the `Owner` whose REPLs serve it.

The identity is what a client cannot choose freely:

- with API keys (`trl-verigate lean-server --api-keys FILE`, FILE a JSON object mapping each key to an owner name,
  e.g. `{"3f9c...": "team-a", "77ab...": "team-b"}`), the owner its `Authorization: Bearer <key>` maps to (the
  header kimina-lean-server's clients and `LeanClient(api_key=...)` send); a request without a known key is
  refused with 401;
- without keys, the client's address: a client cannot pick it without owning the host. Not one owner per
  connection: kimina's SDK and httpx open and pool connections as they please, so a client would get a fresh owner
  (and a fresh REPL quota) for each connection, which is exactly the eviction attack, and would lose its warm REPLs
  between requests. Behind a reverse proxy every client has the proxy's address: configure keys there.

`X-Verigate-Caller` (a `LeanClient` sends its own id) is only a label: it gives its sender REPLs of their own
within the identity's, never REPLs taken from another identity (`prover_pool.owner`).
"""

from __future__ import annotations

import json
from pathlib import Path

from fastapi import Request

from trl_verigate.lean_server.service.wire import CALLER_HEADER
from trl_verigate.prover_pool.owner import Owner

MAX_LABEL_CHARS = 128
EXAMPLE = '{"<key>": "<owner>", ...}'


def load_api_keys(path: str | Path) -> dict[str, str]:
    """The key -> owner mapping in the JSON file at `path`; ValueError in one line naming the problem."""
    try:
        mapping = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"--api-keys: cannot read {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"--api-keys: {path} is not JSON ({error.msg}); write an object {EXAMPLE}") from None
    if not isinstance(mapping, dict) or not mapping:
        raise ValueError(f"--api-keys: {path} must hold a non-empty JSON object {EXAMPLE}")
    for key, owner in mapping.items():
        if not key.strip() or not isinstance(owner, str) or not owner.strip():
            raise ValueError(f"--api-keys: {path}: every key and owner must be a non-empty string, got {key!r}")
    return mapping


def bearer_key(raw: Request) -> str | None:
    scheme, _, key = raw.headers.get("authorization", "").partition(" ")
    return key.strip() if scheme.lower() == "bearer" and key.strip() else None


def owner_of(raw: Request, api_keys: dict[str, str] | None) -> Owner | None:
    """The owner of a request; None when keys are configured and it brings none of them."""
    label = raw.headers.get(CALLER_HEADER, "")[:MAX_LABEL_CHARS]
    if api_keys:
        owner = api_keys.get(bearer_key(raw) or "")
        return None if owner is None else Owner("key:" + owner, label)
    return Owner("host:" + (raw.client.host if raw.client is not None else "unknown"), label)
