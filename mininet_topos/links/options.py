"""The link options every command that brings up a network takes, in Mininet's units:

    --rate MBIT --global-rate MBIT --delay 2ms --global-delay 2ms --queue PACKETS
    --link-profile df-scatter --dilation N|auto [--calibration FILE]

Either explicit rates and delays, or a paper's links dilated by a factor (``auto``: the factor
``make calibrate`` chose for this machine). Nothing given: unshaped links."""

from __future__ import annotations

import argparse
from pathlib import Path

from mininet_topos.links.dilation import PAPERS, Calibration
from mininet_topos.links.shaping import DEFAULT_QUEUE, LinkModel
from mininet_topos.links.units import LinkParameterError, parse_delay, parse_queue, parse_rate

DEFAULT_CALIBRATION = Path("docs/calibration.json")  # this machine's; make calibrate rewrites it


def add_link_arguments(parser: argparse.ArgumentParser, default_profile: str | None = None) -> None:
    group = parser.add_argument_group(
        "links", "rates, delays and queues (Mininet's units); default: unshaped"
    )
    group.add_argument("--rate", default=None, help="host and local links, Mb/s (TCLink's bw)")
    group.add_argument("--global-rate", default=None, help="global links, Mb/s (default --rate)")
    group.add_argument("--delay", default=None, help="host and local links, one way: 2ms, 150us")
    group.add_argument("--global-delay", default=None, help="global links (default --delay)")
    group.add_argument("--queue", default=None, help=f"packets per port (default {DEFAULT_QUEUE})")
    group.add_argument(
        "--link-profile",
        dest="link_profile",
        default=None,
        choices=[*PAPERS, "none"],
        help="a paper's links, dilated by --dilation (instead of --rate and --delay)"
        + (
            f"; default {default_profile} unless --rate or --delay is given, 'none': unshaped"
            if default_profile
            else ""
        ),
    )
    group.add_argument(
        "--dilation",
        default="auto",
        help="the profile's dilation factor, or 'auto': the one 'make calibrate' chose",
    )
    group.add_argument("--calibration", type=Path, default=DEFAULT_CALIBRATION)


def link_options_given(args: argparse.Namespace) -> list[str]:
    """The link options the command line gave (left out: none, and --dilation auto), as
    written there: for a command that takes its links from elsewhere and must refuse them."""
    names = ["rate", "global_rate", "delay", "global_delay", "queue", "link_profile"]
    given = [n for n in names if getattr(args, n) is not None]
    given += ["dilation"] if args.dilation != "auto" else []
    return ["--" + n.replace("_", "-") for n in given]


def link_model_from(
    args: argparse.Namespace, default_profile: str | None = None
) -> tuple[LinkModel, float | None]:
    """The links the arguments ask for, and the dilation factor (None: explicit links).
    ``default_profile`` is the command's own default, used when no link option is given."""
    queue = parse_queue(args.queue, "--queue") if args.queue is not None else DEFAULT_QUEUE
    explicit = [
        name
        for name in ("rate", "global_rate", "delay", "global_delay")
        if getattr(args, name) is not None
    ]
    profile = args.link_profile
    if profile is None and not explicit:
        profile = default_profile
    if profile == "none":
        profile = None
    if profile is not None and explicit:
        raise LinkParameterError(
            f"--link-profile {profile} sets every rate and delay: leave out "
            + ", ".join("--" + n.replace("_", "-") for n in explicit)
        )
    if profile is not None:
        factor = dilation_factor(args.dilation, args.calibration, profile)
        return PAPERS[profile].dilated(factor, queue), factor
    return (
        LinkModel(
            rate=parse_rate(args.rate, "--rate") if args.rate is not None else None,
            global_rate=(
                parse_rate(args.global_rate, "--global-rate")
                if args.global_rate is not None
                else None
            ),
            delay=parse_delay(args.delay, "--delay") if args.delay is not None else 0.0,
            global_delay=(
                parse_delay(args.global_delay, "--global-delay")
                if args.global_delay is not None
                else None
            ),
            queue=queue,
        ),
        None,
    )


def dilation_factor(text: str, calibration: Path, profile: str) -> float:
    if text == "auto":
        cal = Calibration.load(calibration)
        if cal.profile != profile:
            raise LinkParameterError(
                f"{calibration} calibrates profile {cal.profile}, not {profile}: "
                "run 'make calibrate' for it, or give --dilation N"
            )
        return cal.factor
    try:
        factor = float(text)
    except ValueError:
        raise LinkParameterError(f"--dilation {text!r}: a number, or 'auto'") from None
    if factor < 1:
        raise LinkParameterError(f"--dilation {factor:g} must be at least 1")
    return factor


def links_or_exit(
    args: argparse.Namespace, default_profile: str | None = None
) -> tuple[LinkModel, float | None]:
    """:func:`link_model_from` for a command line: a bad option ends the command with its
    reason and argparse's exit status, before anything is brought up."""
    try:
        return link_model_from(args, default_profile)
    except LinkParameterError as exc:
        raise SystemExit(f"error: {exc}") from None
