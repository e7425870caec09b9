"""The `scaler` command: its parser (every command's flags, serve's from serve_flags.py), the
SCALER_* environment variables behind their defaults (`env`), logging (logsetup.py), and
`scaler serve`'s run and shutdown (the process itself is wiring.py's). The only module that
reads os.environ."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence

from scaler import argtypes, commands, helptext, logsetup, serve_flags, threads
from scaler.clock import WallClock
from scaler.errors import UNREACHABLE_EXIT, ScalerError, Unreachable

logger = logging.getLogger("scaler")


def env(name: str, default: str | None = None) -> str | None:
    """SCALER_`name`, read for a flag's default; the name is recorded as one the command being
    built reads (commands.READS), so that a variable no flag reads is told at start-up."""
    commands.READS.asked(name)
    return os.environ.get(f"SCALER_{name}", default)


EXIT_SLACK = 0.8
"""Seconds past the grace period after which a stuck shutdown is cut short."""


def exit_deadline(grace: float) -> None:
    """Cut a stuck shutdown short at `grace` + EXIT_SLACK seconds: a thread still waiting on a
    Prometheus query must not hold the pod past its terminationGracePeriod."""

    def expire() -> None:
        logger.error("shutdown took longer than %.1fs; exiting now", grace + EXIT_SLACK)
        logging.shutdown()
        os._exit(1)

    timer = threading.Timer(grace + EXIT_SLACK, expire)
    timer.daemon = True
    timer.start()


def cmd_serve(args: argparse.Namespace) -> int:
    # Here, not at the top: every other command (check, backtest, retrain...) runs without
    # gRPC's C core loaded (a `scaler check` under a memory limit once aborted in its poller).
    from scaler import wiring

    settings = serve_flags.settings_from(args)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if not stop.is_set():
                logger.info(
                    "stopping: in-flight RPCs have %gs, queued fits are cancelled",
                    settings.server.grace_seconds,
                )
                exit_deadline(settings.server.drain_seconds + settings.server.grace_seconds)
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        await wiring.run_server(settings, clock=WallClock(), stop=stop)

    asyncio.run(main())
    # Everything of ours is closed. The interpreter's own teardown (numpy, pandas, Prophet)
    # takes 0.5-0.7 s on a busy node, all of it past the grace period: skip it.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def build_parser(*, serve_only: bool = False) -> argparse.ArgumentParser:
    """The CLI; `serve_only` leaves out the other subcommands, whose modules import pandas (a
    second of CPU at every replica's start, which `scaler serve` never uses)."""
    commands.READS.reset()
    parser = argparse.ArgumentParser(
        prog="scaler",
        description="Predictive GPU autoscaler: a KEDA external scaler that prewarms replicas "
        "from a calibrated P95 forecast, under a strict budget. `scaler COMMAND --help` says "
        "more about each command.",
        epilog="examples:\n"
        "  scaler demo                                  # see it work, no Prometheus, ~1 min\n"
        "  scaler backtest export.csv --out /tmp/bt     # what it would have done on your load\n"
        "  scaler serve --prometheus-url http://prometheus:9090   # what KEDA talks to\n"
        "  scaler explain inference/llm --server http://localhost:8080 --since 6h",
        formatter_class=helptext.Paragraphs,
        allow_abbrev=False,  # `explain --log` is not an abbreviation of --log-level
    )
    add_global_flags(parser, from_env=True)
    # Every command takes them after its name too; there a flag not given sets nothing, so the
    # value given before the name (or the variable's) stands.
    common = argparse.ArgumentParser(add_help=False)
    add_global_flags(common, from_env=False)
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", action=commands.commands_with(common)
    )
    serve = sub.add_parser(
        "serve",
        help="run the gRPC external scaler KEDA talks to",
        description="Run the KEDA external scaler (gRPC) with /metrics.\n\n"
        "Each ScaledObject trigger's metadata is one target, learnt on KEDA's first call; with\n"
        "--targets FILE or --scaler-address (the cluster's ScaledObjects naming this scaler,\n"
        "then watched) they are warmed up before SERVING. Every flag can also be set as\n"
        "SCALER_<FLAG>.",
        epilog="examples:\n"
        "  scaler serve --prometheus-url http://prometheus-operated.monitoring.svc:9090\n"
        "  scaler serve --source file: --step 30s          # the bundled trace, no Prometheus\n"
        "  scaler serve --store configmap:keda --scaler-address scaler.keda.svc:9000  # discover\n"
        "  scaler serve --tls-cert tls.crt --tls-key tls.key --tls-client-ca ca.crt "
        "--tls-require-client-cert",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve_flags.add_serve_flags(serve, env=env)
    serve.set_defaults(func=cmd_serve)
    if serve_only:
        return parser
    from scaler.kube import check_cli
    from scaler.offline import backtest_cli, demo, retrain_cli
    from scaler.record import explain_cli

    demo.add_parser(sub)
    backtest_cli.add_parser(sub, env)
    explain_cli.add_parser(sub)
    retrain_cli.add_parser(sub, env=env, job_index=os.environ.get("JOB_COMPLETION_INDEX"))
    check_cli.add_parser(sub)
    return parser


def add_global_flags(parser: argparse.ArgumentParser, *, from_env: bool) -> None:
    """--log-level and --log-format, on `parser` (defaults from SCALER_*, `from_env`) or on a
    parent of every command's parser (no default: argparse.SUPPRESS)."""
    g = parser.add_argument_group("logging (before or after the command)")
    g.add_argument(
        "--log-level",
        type=logsetup.log_level,
        default=env("LOG_LEVEL", "INFO") if from_env else argparse.SUPPRESS,
        help="DEBUG, INFO, WARNING or ERROR (env SCALER_LOG_LEVEL; default INFO)",
    )
    g.add_argument(
        "--log-format",
        type=argtypes.one_of("text", "json"),
        metavar="{text,json}",
        default=env("LOG_FORMAT", "text") if from_env else argparse.SUPPRESS,
        help="text for terminals, json for log pipelines (env SCALER_LOG_FORMAT)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # a reader that left is met here, not in the interpreter's exit
    except BrokenPipeError:
        # `scaler explain ... | head`: the reader has what it wanted. Say nothing; stdout goes
        # to /dev/null so that the exit's own flush of what is left fails no more.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _main(argv: Sequence[str] | None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(serve_only=given[:1] == ["serve"])
    args = parser.parse_args(given)
    logsetup.setup_logging(args.log_level, args.log_format)
    for unread in commands.READS.unread(args.command, os.environ):
        logger.warning(unread)
    logger.debug(threads.limit(os.environ))
    try:
        code: int = args.func(args)
        return code
    except ScalerError as exc:
        print(f"scaler: error: {exc}", file=sys.stderr)
        return UNREACHABLE_EXIT if isinstance(exc, Unreachable) else 2
    except KeyboardInterrupt:
        return 130
