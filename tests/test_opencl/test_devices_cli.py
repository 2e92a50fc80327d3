"""``neuronet devices``: lists every device and names the one neuronet uses, and why."""

from __future__ import annotations

import pytest

from neuronet.cli import main
from opencl import list_devices
from opencl.choice import ENV_DEVICE

from .conftest import USABLE


def test_lists_devices_and_default_choice(capsys, monkeypatch):
    monkeypatch.delenv(ENV_DEVICE, raising=False)
    main(["devices"])
    out = capsys.readouterr().out
    for d in list_devices():
        assert d.index in out and d.name in out
    assert "fp64" in out and "compute units" in out and "driver" in out
    assert "neuronet uses" in out.splitlines()[-1] and "default" in out.splitlines()[-1]


def test_device_option_previews_a_choice(capsys, monkeypatch):
    monkeypatch.setenv(ENV_DEVICE, USABLE[0].index)
    target = USABLE[-1]
    main(["devices", "--device", target.index])
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(f"neuronet uses {target.index} {target.name}") and "argument" in last


def test_environment_variable_is_reported(capsys, monkeypatch):
    monkeypatch.setenv(ENV_DEVICE, USABLE[0].index)
    main(["devices"])
    last = capsys.readouterr().out.splitlines()[-1]
    assert f"{ENV_DEVICE}={USABLE[0].index}" in last


def test_unknown_device_is_one_line_error(capsys, monkeypatch):
    monkeypatch.delenv(ENV_DEVICE, raising=False)
    with pytest.raises(SystemExit) as exc:
        main(["devices", "--device", "no-such-device-anywhere"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-device-anywhere" in err[0] and "available" in err[0]


def test_backend_opencl_with_a_device_is_accepted_and_a_wrong_device_named(monkeypatch):
    """``--backend opencl:<device>`` is checked against the devices there: a present one is accepted (it
    was refused whatever the device, with an import error), an absent one is refused naming it."""
    import nn
    from opencl.errors import DeviceChoiceError

    monkeypatch.delenv(ENV_DEVICE, raising=False)
    target = USABLE[0]
    assert nn.check_backend_name(f"opencl:{target.index}", device=True) == f"opencl:{target.index}"
    with pytest.raises(DeviceChoiceError, match="nosuch"):
        nn.check_backend_name("opencl:nosuch", device=True)
