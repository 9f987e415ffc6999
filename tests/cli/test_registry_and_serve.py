"""The `rtxviz` command line: the registry and parser, `rtxviz serve`'s checks."""

from __future__ import annotations

import argparse

from rtxviz import cli
from rtxviz.cli import registry
from rtxviz.cli.serve import is_loopback


def test_serve_refuses_non_loopback_without_token(capsys):
    assert cli.main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "--token" in capsys.readouterr().err


def test_loopback_detection():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("example.com")


def test_adding_a_subcommand_is_one_function(monkeypatch):
    monkeypatch.setattr(registry, "COMMANDS", dict(registry.COMMANDS))  # the registry `command` writes

    @cli.command("hello", "say hello", lambda p: p.add_argument("--who", default="world"))
    def hello(args: argparse.Namespace) -> int:
        return len(args.who)

    assert cli.main(["hello", "--who", "abc"]) == 3
    args = cli.build_parser().parse_args(["serve"])
    assert (args.host, args.port, args.db) == ("127.0.0.1", 8000, None)


def test_no_command_prints_help(capsys):
    assert cli.main([]) == 2
    assert "serve" in capsys.readouterr().out


def test_serve_refuses_an_unknown_log_level_before_serving(capsys):
    """Review (eighteenth session): `--log-level loud` printed "serving on ..." and then a KeyError traceback."""
    import uvicorn.config

    from rtxviz.cli.serve import LOG_LEVELS

    assert sorted(LOG_LEVELS) == sorted(uvicorn.config.LOG_LEVELS)  # the choices are uvicorn's own
    try:
        cli.main(["serve", "--port", "0", "--log-level", "loud"])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("--log-level loud was accepted")
    err = capsys.readouterr().err
    assert "--log-level" in err and "'loud'" in err and "serving on" not in err
