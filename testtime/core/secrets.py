"""Secret values never reach a record or a screen. Error texts and completions from model backends are
scrubbed of every configured key (the `--api-key-env` variable's value and every `*_API_KEY`, `*_TOKEN`,
`*_SECRET` variable in the environment), of masked echoes of one (APIs answer "Incorrect API key provided:
sk-ab***yz"), and of the values of Authorization / api-key headers, before the rollout engine records or
returns them. A server URL that carries a credential (`https://user:KEY@host`, `?api_key=KEY`) is recorded
with the credential redacted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "[redacted]"
_HEADER = re.compile(
    r"(?i)\b(authorization|proxy-authorization|x-api-key|api-key|api_key)(\"?\s*[:=]\s*\"?)(bearer\s+)?([^\s,;'\"}]+)"
)
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}")
_SECRET_NAME = re.compile(r"(API_KEY|_TOKEN|SECRET)", re.IGNORECASE)
MIN_SECRET = 8  # shorter values ("1", "true") are not keys, and scrubbing them would mangle every message
MIN_ECHO = 6  # a shown prefix or suffix this long identifies a key


def environment_secrets(extra_names: Iterable[str | None] = ()) -> list[str]:
    """The values of the named variables and of every variable whose name marks it as a credential."""
    names = {n for n in extra_names if n} | {k for k in os.environ if _SECRET_NAME.search(k)}
    return [v for n in names if len(v := os.environ.get(n, "")) >= MIN_SECRET]


def scrub(text: str, secrets: Iterable[str]) -> str:
    for secret in sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
        head, tail = re.escape(secret[:MIN_ECHO]), re.escape(secret[-MIN_ECHO:])
        # A masked echo keeps the key's first or last characters around stars or dots: the whole token goes.
        text = re.sub(rf"\S*{head}\S*|\S*{tail}\b", REDACTED, text)
    text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _BEARER.sub(f"Bearer {REDACTED}", text)


_CREDENTIAL_PARAM = re.compile(r"(?i)(key|token|secret|password|auth|sig)")


def redact_url(url: str) -> str:
    """A URL fit to record: a password in its authority and the values of credential-like query parameters
    become `[redacted]`; anything else is kept as it is."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        name = user.split(":", 1)[0]
        netloc = f"{name}:{REDACTED}@{host}" if ":" in user else f"{REDACTED}@{host}"
    query = urlencode(
        [
            (k, REDACTED if _CREDENTIAL_PARAM.search(k) else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ],
        safe="[]",
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_secrets(urls: Iterable[str]) -> list[str]:
    """The credentials written into server URLs, so they are scrubbed wherever else they appear."""
    found = []
    for url in urls:
        try:
            parts = urlsplit(url)
        except ValueError:
            continue
        if parts.password:
            found.append(parts.password)
        elif "@" in parts.netloc:
            found.append(parts.netloc.rpartition("@")[0])
        found += [v for k, v in parse_qsl(parts.query) if _CREDENTIAL_PARAM.search(k)]
    return [s for s in found if len(s) >= MIN_SECRET]
