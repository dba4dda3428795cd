"""TLS and basic auth from a web configuration file, as Prometheus exporters read it.

The file format is the exporter-toolkit's (``--web.config.file`` of node_exporter and every
other official exporter), so an existing file and its bcrypt password hashes carry over::

    tls_server_config:
      cert_file: server.crt          # relative paths are relative to this file
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert
      client_ca_file: ca.crt
      min_version: TLS12
    http_server_config:
      headers: {Strict-Transport-Security: max-age=31536000}
    basic_auth_users:
      prometheus: $2y$10$...          # bcrypt, e.g. htpasswd -nBC 10 "" | tr -d ':\\n'

Unknown keys are an error (as in exporter-toolkit), and so are the options Python's TLS
cannot honour (client certificates requested but not verified, cipher suite lists): a
silently weaker setup than the file asks for is worse than refusing to start.
"""

from __future__ import annotations

import functools
import hashlib
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml


class WebConfigError(ValueError):
    """The web configuration file is unreadable or asks for something we cannot do."""


CLIENT_AUTH = MappingProxyType({
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
})
_UNSUPPORTED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert")
TLS_VERSIONS = MappingProxyType({
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
})
_TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version",
             "max_version"}
_TLS_UNSUPPORTED = frozenset({"cert", "key", "client_ca", "cipher_suites", "curve_preferences",
                              "prefer_server_cipher_suites", "client_allowed_sans"})
_HTTP_KEYS = {"headers", "http2"}
_TOP_KEYS = {"tls_server_config", "http_server_config", "basic_auth_users"}


@dataclass(frozen=True)
class TlsServerConfig:
    cert_file: Path
    key_file: Path
    client_auth: ssl.VerifyMode = ssl.CERT_NONE
    client_ca_file: Path | None = None
    min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2
    max_version: ssl.TLSVersion | None = None

    def context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = self.min_version
        if self.max_version is not None:
            context.maximum_version = self.max_version
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
            if self.client_ca_file is not None:
                context.load_verify_locations(cafile=self.client_ca_file)
        except (OSError, ssl.SSLError) as error:
            raise WebConfigError(f"tls_server_config: cannot load certificates: {error}") \
                from error
        context.verify_mode = self.client_auth
        return context


@dataclass(frozen=True)
class WebConfig:
    tls: TlsServerConfig | None = None
    users: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WebConfigError(f"{where}: expected a mapping")
    return value


def _check_keys(section: dict[str, Any], known: set[str], where: str,
                unsupported: frozenset[str] = frozenset()) -> None:
    for key in section:
        if key in unsupported:
            raise WebConfigError(f"{where}.{key}: not supported by this agent")
        if key not in known:
            raise WebConfigError(f"{where}.{key}: unknown key (known: {', '.join(sorted(known))})")


def _tls(raw: dict[str, Any], base: Path) -> TlsServerConfig | None:
    _check_keys(raw, _TLS_KEYS, "tls_server_config", _TLS_UNSUPPORTED)
    if not raw.get("cert_file") and not raw.get("key_file"):
        return None  # an empty section means plain HTTP, as in exporter-toolkit
    if not raw.get("cert_file") or not raw.get("key_file"):
        raise WebConfigError("tls_server_config: cert_file and key_file go together")
    auth_name = raw.get("client_auth_type") or "NoClientCert"
    if auth_name in _UNSUPPORTED_CLIENT_AUTH:
        raise WebConfigError(
            f"tls_server_config.client_auth_type: {auth_name} (a client certificate that is "
            "not verified) is not supported; use VerifyClientCertIfGiven or "
            "RequireAndVerifyClientCert")
    if auth_name not in CLIENT_AUTH:
        raise WebConfigError(f"tls_server_config.client_auth_type: unknown {auth_name!r} "
                             f"(known: {', '.join(CLIENT_AUTH)})")
    ca = raw.get("client_ca_file")
    if CLIENT_AUTH[auth_name] is not ssl.CERT_NONE and not ca:
        raise WebConfigError(f"tls_server_config: client_auth_type {auth_name} needs "
                             "client_ca_file")

    def version(key: str) -> ssl.TLSVersion | None:
        name = raw.get(key)
        if name is None:
            return None
        if name not in TLS_VERSIONS:
            raise WebConfigError(f"tls_server_config.{key}: unknown {name!r} "
                                 f"(known: {', '.join(TLS_VERSIONS)})")
        return TLS_VERSIONS[name]

    return TlsServerConfig(
        cert_file=base / str(raw["cert_file"]),
        key_file=base / str(raw["key_file"]),
        client_auth=CLIENT_AUTH[auth_name],
        client_ca_file=base / str(ca) if ca else None,
        min_version=version("min_version") or ssl.TLSVersion.TLSv1_2,
        max_version=version("max_version"),
    )


def parse_web_config(text: str, base: Path, origin: str = "web config") -> WebConfig:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise WebConfigError(f"{origin}: not valid YAML: {error}") from error
    top = _mapping(data, origin)
    _check_keys(top, _TOP_KEYS, origin)
    tls = _tls(_mapping(top.get("tls_server_config"), "tls_server_config"), base)
    if tls is not None:
        tls.context()  # fail now, at start-up, not at the first scrape
    http = _mapping(top.get("http_server_config"), "http_server_config")
    _check_keys(http, _HTTP_KEYS, "http_server_config")
    headers = _headers(_mapping(http.get("headers"), "http_server_config.headers"))
    users = _mapping(top.get("basic_auth_users"), "basic_auth_users")
    for user, hashed in users.items():
        if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
            raise WebConfigError(f"basic_auth_users.{user}: expected a bcrypt hash ($2y$...)")
    if users:
        try:
            import bcrypt  # noqa: F401
        except ImportError as error:
            raise WebConfigError("basic_auth_users needs the bcrypt package") from error
    return WebConfig(
        tls=tls,
        users=MappingProxyType({str(k): str(v) for k, v in users.items()}),
        headers=MappingProxyType(headers),
    )


_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _headers(raw: dict[str, Any]) -> dict[str, str]:
    """Header fields every response carries, checked now: one that cannot be written (a
    character outside ISO-8859-1, a line break) would otherwise fail every answer."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in raw.items():
        name, value = str(raw_name), str(raw_value)
        if not name or not set(name) <= _TOKEN:
            raise WebConfigError(f"http_server_config.headers: {name!r} is not a header name")
        if not all(ch == "\t" or " " <= ch <= "~" or "\xa0" <= ch <= "\xff" for ch in value):
            raise WebConfigError(f"http_server_config.headers.{name}: the value must be "
                                 f"printable ISO-8859-1 text on one line, got {value!r}")
        headers[name] = value
    return headers


def load_web_config(path: Path) -> WebConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise WebConfigError(f"cannot read web config {path}: {error.strerror}") from error
    return parse_web_config(text, path.parent, str(path))


@functools.cache
def _dummy_hash() -> bytes:
    """A hash checked for unknown users, so response time does not tell which names exist."""
    import bcrypt

    return bcrypt.hashpw(b"no user has this password", bcrypt.gensalt(10))


class BasicAuth:
    """Checks ``Authorization: Basic`` against bcrypt hashes, remembering recent successes.

    bcrypt costs tens of milliseconds by design; a scraper sends the same credentials every
    few seconds, so a success is cached (keyed by a SHA-256 of user, password and hash, never
    the password itself), as exporter-toolkit does.
    """

    MAX_CACHED = 256

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._ok: set[bytes] = set()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self._users)

    def _key(self, user: str, password: str) -> tuple[str | None, bytes]:
        hashed = self._users.get(user)
        return hashed, hashlib.sha256(
            f"{user}\0{password}\0{hashed}".encode("utf-8", "surrogatepass")).digest()

    def known(self, user: str, password: str) -> bool:
        """Verified before (no bcrypt): cheap enough for the server's loop thread."""
        hashed, key = self._key(user, password)
        with self._lock:
            return hashed is not None and key in self._ok

    def check(self, user: str, password: str) -> bool:
        import bcrypt

        hashed, key = self._key(user, password)
        with self._lock:
            if hashed is not None and key in self._ok:
                return True
        target = hashed.encode() if hashed is not None else _dummy_hash()
        try:
            ok = bcrypt.checkpw(password.encode("utf-8", "surrogatepass"), target)
        except ValueError:
            ok = False
        ok = ok and hashed is not None
        if ok:
            with self._lock:
                if len(self._ok) >= self.MAX_CACHED:
                    self._ok.clear()
                self._ok.add(key)
        return ok
