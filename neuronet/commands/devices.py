"""``neuronet devices``: the OpenCL platforms and devices, each device's self-check, the one neuronet uses
and why, and the NumPy backend's BLAS threads."""

from __future__ import annotations

from typing import Annotated

import typer

from neuronet.commands import values
from nn.threads import describe_blas
from opencl.choice import ENV_DEVICE, choose_device
from opencl.device import list_devices
from opencl.selfcheck import Verdict, verdict
from opencl.vendors import load_problem, register


def _verdict_line(v: Verdict) -> str:
    when = f"checked {v.checked}" + (", cached" if v.cached else "")
    if v.usable:
        return f"self-check passed: {v.seconds * 1e3:.2f} ms per timed step ({when})"
    return f"self-check FAILED: {v.problem} ({when})"


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
    recheck: Annotated[
        bool,
        typer.Option("--recheck", help="Run every device's self-check again, not the kept ones.", metavar=""),
    ] = False,
) -> None:
    """List OpenCL platforms and devices, and say which one neuronet uses and why."""
    if device is not None:  # a --device that matches nothing is the whole answer, before the listing
        choose_device(device)
    typer.echo(f"NumPy backend: {describe_blas()}")
    registration = register()
    for runtime in registration.runtimes:
        typer.echo(f"registered from pip: {runtime}; vendors folder {registration.folder}")
    for problem in (*registration.problems, load_problem(registration)):
        if problem:
            typer.echo(f"not usable: {problem}")
    infos = list_devices()
    platform = None
    for d in infos:
        if d.index.split(":")[0] != platform:  # two platforms of one driver have the same name and version
            platform = d.index.split(":")[0]
            typer.echo(f"platform {platform}: {d.platform} ({d.platform_version})")
        typer.echo(
            f"  {d.index:>5}  {d.kind:<4} {d.name}\n"
            f"         compute units {d.compute_units} | memory {d.global_mem_bytes / 2**30:.1f} GiB | "
            f"local memory {d.local_mem_bytes // 1024} KiB | max work-group {d.max_work_group_size} | "
            f"fp64 {'yes' if d.fp64 else 'no'} | driver {d.driver_version}\n"
            f"         {_verdict_line(verdict(d, fresh=recheck))}"
        )
    choice = choose_device(device)
    for r in choice.rejected:
        typer.echo(f"passed over {r.info.index} {r.info.name}: {r.reason}")
    typer.echo(f"neuronet uses {choice.info.index} {choice.info.name} ({choice.reason})")
