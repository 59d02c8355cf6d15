"""The option reference, docs/options.md, generated from the commands' own parsers.

    python -m chunkd.cli.docs > docs/options.md

Each command's table is read from its argparse declarations (the filter's
``chunkd.cli.filter.build_parser`` and the ``build_parser`` of every module in
``chunkd.cli.commands.COMMANDS``), and each help text is expanded as ``--help`` expands it
(``%%`` is ``%``, ``%(default)s`` the default), so the reference cannot say what the
parsers do not. ``tests/cli/test_docs.py`` regenerates it and compares it with the file.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMAND = "python -m chunkd.cli.docs > docs/options.md"


def parsers() -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(command, one-line summary, parser) for the filter, then each subcommand."""
    from chunkd.cli.commands import COMMANDS
    from chunkd.cli.filter import build_parser

    found = [("chunkd", "the filter: documents in, chunk records out", build_parser())]
    for name, (module, summary) in COMMANDS.items():
        found.append((f"chunkd {name}", summary, importlib.import_module(module).build_parser()))
    return found


def _cell(text: str) -> str:
    """Text for one Markdown table cell: one line, pipes escaped, and asterisks
    (``*.txt``) shown as written rather than as emphasis."""
    return " ".join(text.split()).replace("|", "\\|").replace("*", "\\*")


def _code(text: str) -> str:
    """``text`` as inline code, with enough backticks around it."""
    fence = "``" if "`" in text else "`"
    padded = f" {text} " if fence == "``" else text
    return f"{fence}{padded}{fence}"


def _spelling(action: argparse.Action) -> str:
    if action.option_strings:
        return ", ".join(_code(option) for option in action.option_strings)
    metavar = action.metavar
    return _code(metavar if isinstance(metavar, str) else action.dest)


def _value(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """What the option takes: its choices, else its metavar as --help writes it."""
    if action.nargs == 0:
        return ""
    if action.choices is not None and action.metavar is None:
        return " | ".join(_code(str(choice)) for choice in action.choices)
    formatter = parser._get_formatter()
    default = action.dest.upper() if action.option_strings else action.dest
    return _code(formatter._format_args(action, default))


#: A default that depends on the machine the reference is generated on is written as
#: what it means, so that the file is the same everywhere: (its value, its words).
_CORES = (os.cpu_count(), "the number of cores")


def _machine(action: argparse.Action) -> bool:
    """Whether the action's default is the number of cores (``--jobs``)."""
    return (action.default == _CORES[0] and isinstance(action.help, str)
            and _CORES[1] in action.help)


def _default(action: argparse.Action) -> str:
    if _machine(action):
        return _CORES[1]
    value = action.default
    if value is None or value is argparse.SUPPRESS or action.nargs == 0 or value == []:
        return ""
    if isinstance(value, (list, tuple)):
        return _code(" ".join(str(item) for item in value))
    return _code(str(value))


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    text = parser._get_formatter()._expand_help(action)
    if _machine(action):  # "(default: the number of cores, 2 here)"
        text = text.replace(f"{_CORES[1]}, {_CORES[0]} here", _CORES[1])
    return text


def table(parser: argparse.ArgumentParser) -> list[str]:
    """The Markdown table of one parser's arguments, in their declared order."""
    lines = ["| option | value | default | meaning |", "| --- | --- | --- | --- |"]
    for action in parser._actions:
        if action.help is argparse.SUPPRESS:
            continue
        lines.append("| " + " | ".join(_cell(cell) for cell in (
            _spelling(action), _value(parser, action), _default(action),
            _help(parser, action))) + " |")
    return lines


def render() -> str:
    """The whole of docs/options.md."""
    lines = [
        "# Every option of every command",
        "",
        "For anyone looking up an option's exact spelling, value, default or help text: this",
        "file is generated from the commands' argparse parsers (`chunkd/cli/docs.py`), so it lists",
        "exactly what each command accepts, as its `--help` says it, and from the declared",
        "fields of a chunk record ([at the end](#optional-fields-of-a-chunk-record)). Do not",
        "edit it by hand:",
        f"run `{COMMAND}`; `tests/cli/test_docs.py` fails when it is stale. What the options",
        "mean together is explained in [cli.md](cli.md), [strategies.md](strategies.md),",
        "[daemon.md](daemon.md), [serve.md](serve.md) and [eval.md](eval.md).",
        "",
    ]
    for command, summary, parser in parsers():
        lines += [f"## `{command}`", "", f"{summary[0].upper()}{summary[1:]}.", "",
                  *table(parser), ""]
    return "\n".join(lines + record_fields())


def record_fields() -> list[str]:
    """The table of a chunk record's optional fields (``chunkd.model.chunk.RECORD_FIELDS``)."""
    from chunkd.model.chunk import RECORD_FIELDS

    lines = ["## Optional fields of a chunk record", "",
             "Written before `text`, in this order, when the strategy or the options give "
             "them (in Arrow and Parquet, as columns of these types).", "",
             "| field | Arrow type | what |", "| --- | --- | --- |"]
    try:
        import pyarrow
    except ImportError:  # the reference is generated where the arrow extra is installed
        raise SystemExit("chunkd.cli.docs: needs pyarrow (the arrow extra) for the Arrow types")
    for field in RECORD_FIELDS:
        lines.append("| " + " | ".join(_cell(cell) for cell in (
            _code(field.name), _code(str(field.arrow_type(pyarrow))), field.description)) + " |")
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    """Write docs/options.md's text to stdout."""
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
