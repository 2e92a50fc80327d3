"""Credentials from the environment or a private file: refused when others may read the file, never in
any output (reprs, errors, logs, the trade records of a live run)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from neuronet.errors import NeuronetError
from neuronet.live import credentials
from neuronet.live.credentials import Credentials, CredentialsError

PASSWORD = "pa55-w0rd-Zq9"
LOGIN = 5012345
SERVER = "Simulated-Demo"
ENV = {"NEURONET_MT5_LOGIN": str(LOGIN), "NEURONET_MT5_PASSWORD": PASSWORD, "NEURONET_MT5_SERVER": SERVER}
posix_only = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")


def write(tmp_path: Path, text: str | bytes, mode: int = 0o600) -> Path:
    path = tmp_path / "mt5.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    path.chmod(mode)
    return path


GOOD = f'login = {LOGIN}\npassword = "{PASSWORD}"\nserver = "{SERVER}"\n'


def test_from_the_environment():
    creds = credentials.load(env=ENV)
    assert creds == Credentials(LOGIN, PASSWORD, SERVER)
    assert creds.initialize_kwargs() == {"login": LOGIN, "password": PASSWORD, "server": SERVER}
    assert credentials.load(env={}) is None  # the terminal is used as it is logged in


def test_some_variables_without_the_others_are_refused():
    with pytest.raises(CredentialsError, match="NEURONET_MT5_SERVER not"):
        credentials.load(env={k: v for k, v in ENV.items() if k != "NEURONET_MT5_SERVER"})
    with pytest.raises(CredentialsError, match="account number"):
        credentials.load(env={**ENV, "NEURONET_MT5_LOGIN": "five"})


@posix_only
@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_from_a_private_file(tmp_path, mode):
    other = ENV | {"NEURONET_MT5_LOGIN": "1"}  # a file given wins over the environment
    assert credentials.load(write(tmp_path, GOOD, mode), env=other) == Credentials(LOGIN, PASSWORD, SERVER)


@posix_only
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_file_others_may_read_is_refused(tmp_path, mode):
    path = write(tmp_path, GOOD, mode)
    with pytest.raises(CredentialsError, match=f"mode {mode:04o}.*chmod 600") as err:
        credentials.from_file(path)
    assert PASSWORD not in str(err.value)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (f'login = {LOGIN}\npassword = "{PASSWORD}\n', "not valid TOML"),
        (f'login = {LOGIN}\nserver = "{SERVER}"\n', "password must be"),
        (f'login = "{PASSWORD}"\npassword = "x"\nserver = "s"\n', "account number"),
        (GOOD + f'token = "{PASSWORD}"\n', "unknown keys"),
        (b'login = 1\npassword = "\xff\xfe"\n', "not valid TOML"),
    ],
    ids=["unterminated", "missing", "login-not-a-number", "extra-key", "not-utf8"],
)
def test_bad_files_are_refused_without_quoting_them(tmp_path, text, words):
    path = write(tmp_path, text)
    with pytest.raises(CredentialsError, match=words) as err:
        credentials.from_file(path)
    assert PASSWORD not in str(err.value) and isinstance(err.value, NeuronetError)


def test_missing_file_and_directory_are_refused(tmp_path):
    with pytest.raises(CredentialsError, match="does not exist"):
        credentials.from_file(tmp_path / "nope.toml")
    with pytest.raises(CredentialsError, match="not a regular file"):
        credentials.from_file(tmp_path)


def test_reprs_hide_every_value():
    creds = Credentials(LOGIN, PASSWORD, SERVER)
    for text in (repr(creds), str(creds), f"{creds}", repr([creds])):
        assert PASSWORD not in text and str(LOGIN) not in text and SERVER not in text


def test_a_live_session_never_writes_the_credentials(monkeypatch, tmp_path, caplog):
    """Log in to the simulated terminal (in-process, the Windows path) with the credentials, trade,
    refuse and fail: neither the records nor the log output holds any of the three values."""
    from datafeeds.terminal import TerminalSource
    from neuronet.live.limits import Limits
    from neuronet.live.terminal_trade import TerminalTrade

    sim_dir = Path(__file__).resolve().parents[1] / "mt5sim"
    monkeypatch.syspath_prepend(str(sim_dir))
    for name in [m for m in sys.modules if m.startswith("MetaTrader5")]:
        monkeypatch.delitem(sys.modules, name)
    import MetaTrader5

    MetaTrader5.SIM.reset()
    creds = credentials.load(write(tmp_path, GOOD)) if os.name == "posix" else credentials.load(env=ENV)
    records: list[dict] = []
    try:
        with caplog.at_level(logging.DEBUG):
            source = TerminalSource(**creds.initialize_kwargs(), backoff=0.01)
            limits = Limits(max_lots=1, max_positions=1, max_daily_loss=10, symbols=("EURUSD",))
            trade = TerminalTrade(
                source, "EURUSD", magic=1, limits=limits, record=records.append, lost_reply_wait=0.0
            )
            MetaTrader5.SIM.book.configure(lost_replies=(0,))
            trade.order(+1, 0.1, None, None, 1, "x")
            trade.order(+1, 0.1, None, None, 1, "refused: max positions")
            trade.order(+1, 0.1, 9.9, None, 1, "refused: stops")
            trade.close(None, None)
            source.close()
    finally:
        MetaTrader5.SIM.reset()
        for name in [m for m in sys.modules if m.startswith("MetaTrader5")]:
            del sys.modules[name]
    output = repr(records) + caplog.text + repr(source.__dict__.get("_link"))
    assert len(records) >= 6 and "refused" in output
    for secret in (PASSWORD, str(LOGIN), SERVER):
        assert secret not in output
