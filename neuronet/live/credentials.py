"""The trade account's login, password and server, from the environment or a private file.

    NEURONET_MT5_LOGIN=5012345 NEURONET_MT5_PASSWORD=... NEURONET_MT5_SERVER=Broker-Demo neuronet live ...

or a TOML file readable by its owner only (``chmod 600``)::

    login = 5012345
    password = "..."
    server = "Broker-Demo"

A file that group or others may read is refused: a password there is a password on every account of the
machine. The values never appear in a repr, a message, a log line or a journal: ``Credentials`` shows
``<hidden>`` for each, and error messages name the variable or the file, never a value. Without any of
them the terminal is used as it is logged in (``load`` returns None).
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from neuronet.errors import NeuronetError

ENV_LOGIN, ENV_PASSWORD, ENV_SERVER = "NEURONET_MT5_LOGIN", "NEURONET_MT5_PASSWORD", "NEURONET_MT5_SERVER"


class CredentialsError(NeuronetError, PermissionError):
    """Credentials that cannot be used: incomplete, malformed, or in a file others may read."""


@dataclass(frozen=True)
class Credentials:
    """A trade account's login; every field is left out of repr and str."""

    login: int = field(repr=False)
    password: str = field(repr=False)
    server: str = field(repr=False)

    def __repr__(self) -> str:
        return "Credentials(login=<hidden>, password=<hidden>, server=<hidden>)"

    __str__ = __repr__

    def initialize_kwargs(self) -> dict:
        """The keywords of the terminal's ``initialize()`` and ``login()``."""
        return {"login": self.login, "password": self.password, "server": self.server}


def _build(login: object, password: object, server: object, where: str) -> Credentials:
    if isinstance(login, bool) or not isinstance(login, (int, str)) or not str(login).strip().isdigit():
        raise CredentialsError(f"{where}: the login must be the account number (digits only)")
    if not isinstance(password, str) or not password:
        raise CredentialsError(f"{where}: the password must be a non-empty string")
    if not isinstance(server, str) or not server.strip():
        raise CredentialsError(f"{where}: the server must be the trade server's name, e.g. Broker-Demo")
    return Credentials(int(str(login).strip()), password, server.strip())


def from_env(env: Mapping[str, str] | None = None) -> Credentials | None:
    """The three ``NEURONET_MT5_*`` variables; None when none is set, an error when only some are."""
    env = os.environ if env is None else env
    names = (ENV_LOGIN, ENV_PASSWORD, ENV_SERVER)
    given = [n for n in names if env.get(n)]
    if not given:
        return None
    missing = [n for n in names if n not in given]
    if missing:
        raise CredentialsError(f"{', '.join(given)} set but {', '.join(missing)} not: set all three or none")
    return _build(env[ENV_LOGIN], env[ENV_PASSWORD], env[ENV_SERVER], "the NEURONET_MT5_* variables")


def from_file(path: str | os.PathLike) -> Credentials:
    """A TOML file with ``login``, ``password`` and ``server``, private to its owner (mode 0600 or 0400)."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise CredentialsError(f"credentials file {path} does not exist") from None
    except OSError as exc:
        raise CredentialsError(f"credentials file {path} cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise CredentialsError(f"credentials file {path} is not a regular file")
    if os.name == "posix":
        if info.st_mode & 0o077:
            raise CredentialsError(
                f"credentials file {path} has mode {stat.S_IMODE(info.st_mode):04o}: group and others must "
                f"not read it; run chmod 600 {path}"
            )
        if info.st_uid != os.getuid():
            raise CredentialsError(f"credentials file {path} belongs to another user; it must be yours")
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        # The decoder's message names a line and column, never the text there.
        where = str(exc).split("(", 1)[-1].rstrip(")") if "(" in str(exc) else "not UTF-8 text"
        raise CredentialsError(f"credentials file {path} is not valid TOML ({where})") from None
    extra = sorted(set(doc) - {"login", "password", "server"})
    if extra:
        raise CredentialsError(f"credentials file {path}: unknown keys {extra} (login, password, server)")
    return _build(doc.get("login"), doc.get("password"), doc.get("server"), f"credentials file {path}")


def load(path: str | os.PathLike | None = None, env: Mapping[str, str] | None = None) -> Credentials | None:
    """The file when one is given, else the environment, else None (use the terminal as logged in)."""
    return from_file(path) if path is not None else from_env(env)
