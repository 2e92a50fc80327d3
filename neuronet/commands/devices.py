"""``neuronet devices``: list OpenCL platforms and devices, and say which one neuronet uses and why."""

from __future__ import annotations

from typing import Annotated

import typer

from neuronet.commands import values
from opencl.device import ENV_DEVICE, choose_device, list_devices, probe


def devices(
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            help=f"Preview a choice: 'gpu', 'cpu', 'P:D' (platform:device) or part of a name; overrides "
            f"{ENV_DEVICE} as --backend opencl:<device> does in run, backtest and forecast.",
            parser=values.text,
        ),
    ] = None,
) -> None:
    """List OpenCL platforms and devices, and say which one neuronet uses."""
    if device is not None:  # a --device that matches nothing is the whole answer, before the listing
        choose_device(device)
    infos = list_devices()
    platform = None
    for d in infos:
        if d.platform_version != platform:
            platform = d.platform_version
            typer.echo(f"platform {d.index.split(':')[0]}: {d.platform} ({d.platform_version})")
        problem = probe(d)
        status = "" if problem is None else f"  [unusable: {problem}]"
        typer.echo(
            f"  {d.index:>5}  {d.kind:<4} {d.name}{status}\n"
            f"         compute units {d.compute_units} | memory {d.global_mem_bytes / 2**30:.1f} GiB | "
            f"local memory {d.local_mem_bytes // 1024} KiB | max work-group {d.max_work_group_size} | "
            f"fp64 {'yes' if d.fp64 else 'no'} | driver {d.driver_version}"
        )
    choice = choose_device(device)
    typer.echo(f"neuronet uses {choice.info.index} {choice.info.name} ({choice.reason})")
