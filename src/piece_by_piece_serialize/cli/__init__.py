"""The ``pbp-serialize`` command line: schema checks for CI and pre-commit, a formatter, and decoders.

A thin argparse layer over the library. Each subcommand maps to one function returning an exit code:
0 clean, 1 findings (a schema error, a non-canonical schema under ``--check``, an undecodable name),
2 usage or I/O errors. User errors never show a traceback. Start-up stays light: this module imports
only the standard library at load time; ``schema`` commands load the schema parser (the table-driven
engine, not lark) when they first parse, and torch is imported only by the commands that need it
(``schema check`` with no path, ``name encode``, ``demo``); when it is not installed they exit 2 with the
line that installs it (torch and transformers are extras: :mod:`.._optional`).

Imports, each inside the handler that needs it: :mod:`._check` (``schema check``), :mod:`._format`
(``schema format``, ``schema names`` and argument errors), :mod:`._structure`, :mod:`._demo` and the
library's public modules. Nothing in the command line imports this module, so it cannot be in a cycle.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from ._prog import PROG

__all__ = ["main", "run"]


class _UsageError(Exception):
    """argparse found a usage error; ``run`` prints it with the usage line and returns 2."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class _Parser(argparse.ArgumentParser):
    # argparse would print and call sys.exit(2); tests and embedders want a return code instead.
    def error(self, message: str) -> NoReturn:
        raise _UsageError(self, message)


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Check and format PyTorch operator schemas; decode and encode TreeSpec names.",
        epilog="Exit status: 0 clean, 1 findings, 2 usage or I/O error.",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    _add_schema_commands(commands)

    name = commands.add_parser("name", help="decode and encode TreeSpec names and type-info strings")
    name_commands = name.add_subparsers(dest="name_command", metavar="SUBCOMMAND", parser_class=_Parser)
    name_commands.required = True
    decode = name_commands.add_parser(
        "decode",
        help="print the tree of a TreeSpec name or type-info string",
        description="Print the tree of a TreeSpec name (___v1_...) or of a type-info string (Tensor, list__3, "
        "dict__2_a__b, DynamicCache_2D, WithCaches__...), one node per line. Nothing it names is looked up, "
        "imported or evaluated, and torch is not needed. A malformed name is shown with a caret; exit 1.",
    )
    decode.add_argument("name", metavar="NAME_OR_TYPE_STRING", help="the name or type-info string, as logged")
    decode.set_defaults(usage_parser=decode, handler=_cmd_name_decode)
    encode = name_commands.add_parser(
        "encode",
        help="build a TreeSpec name from a structure description",
        description="Build the TreeSpec name of a structure written like a Python literal with '*' for every leaf, "
        "for example \"((*, *), {'a': *})\". Tuples, lists, dicts (string, int, bool or None keys) and "
        "OrderedDict({...}) are understood. The text is parsed, never evaluated.",
    )
    encode.add_argument("description", metavar="DESCRIPTION", help="the structure, quoted, e.g. \"((*, *), {'a': *})\"")
    encode.set_defaults(usage_parser=encode, handler=_cmd_name_encode)

    demo = commands.add_parser(
        "demo",
        help="the main job on a tiny Llama: exported piece by piece (torch.export, layers behind custom operators), "
        "equal outputs, saved and loaded in a fresh "
        "process; then every schema registered in torch checked, and an LLM input named and decoded",
        description="What make demo runs (needs the torch and transformers extras): a decode step of a tiny Llama "
        "built from config is exported piece by piece in one call (export_piece_by_piece, its decoder layers behind "
        "custom operators) and its report printed; the program must equal the model at other shapes, and so must the "
        "artifact it saves once loaded in a fresh process (load_piece_by_piece). Then every "
        "operator schema registered in torch is checked against torch's own parser, and the TreeSpec name of a "
        "realistic LLM input is encoded, printed and decoded. Exit 0 only when all of it holds.",
    )
    demo.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    demo.set_defaults(usage_parser=demo, handler=_cmd_demo)
    return parser


def _add_schema_commands(commands: argparse._SubParsersAction[_Parser]) -> None:
    """``schema check``, ``schema format`` and ``schema names``."""
    schema = commands.add_parser("schema", help="check, format and inspect operator schemas")
    schema_commands = schema.add_subparsers(dest="schema_command", metavar="SUBCOMMAND", parser_class=_Parser)
    schema_commands.required = True

    check = schema_commands.add_parser(
        "check",
        help="find and check every schema in files and folders",
        description=(
            "Find every operator schema in the given files and folders (plain text, one schema per line; Python "
            "torch.library.define / Library.define / custom_op(schema=...) / torch._C.parse_schema; C++ and "
            "Objective-C++ def( (outside PYBIND11_MODULE), TORCH_SELECTIVE_SCHEMA(, torch::schema(, "
            "torch::jit::parseSchema(, torch::jit::Operator( and RegisterOperators().op( string literals; the "
            "project's own --schema-function calls; YAML func: entries of native_functions.yaml-shaped files) and "
            "check it. '-' reads plain text from stdin. With no path, checks every schema registered in the "
            "installed torch and prints a summary (this needs torch). Each finding is printed as "
            "path:line:col: severity[rule]: message. Settings are read from [tool.pbp-serialize] in the nearest "
            "pyproject.toml."
        ),
    )
    check.add_argument("paths", nargs="*", metavar="PATH", help="files, folders, or '-' for stdin")
    check.add_argument("--strict", action="store_true", help="treat warnings as errors")
    check.add_argument(
        "--format",
        choices=("text", "json", "github", "sarif"),
        default="text",
        help="output format (json: one record per line; github: workflow annotations; sarif: one SARIF 2.1.0 document)",
    )
    check.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no summary line")
    check.add_argument(
        "--list-sites",
        action="store_true",
        help="with --format json, also one {\"record\": \"site\"} line for every schema site read, checked or not (to audit coverage)",
    )
    _add_reading_options(check)
    check.set_defaults(usage_parser=check, handler=_cmd_schema_check)

    fmt = schema_commands.add_parser(
        "format",
        help="print schemas in canonical form",
        description="Print the canonical form of every schema found (one per line): torch's own print, or with "
        "--shortest the same schema with every float default in its shortest spelling (1e-05, not torch's "
        "1.0000000000000001e-05), which parses to the same value. With --check, print nothing for schemas "
        "already in either form and exit 1 if any schema is in neither, showing both.",
    )
    fmt.add_argument("paths", nargs="*", metavar="PATH", help="files, folders, or '-' for stdin (default: stdin)")
    fmt.add_argument("--check", action="store_true", help="only report schemas that are not canonical")
    fmt.add_argument("--shortest", action="store_true", help="print float defaults in their shortest spelling, not torch's")
    fmt.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    _add_reading_options(fmt)
    fmt.set_defaults(usage_parser=fmt, handler=_cmd_schema_format)

    names = schema_commands.add_parser(
        "names",
        help="print the argument names of a schema, one per line",
        description="Print the argument names of one schema given on the command line, one per line, in order "
        "(what extract_names_from_schema returns). A schema that does not parse is shown with a caret; exit 1.",
    )
    names.add_argument("schema", metavar="SCHEMA", help="the schema, quoted, e.g. 'myops::f(Tensor x, *, float eps=1e-05) -> Tensor'")
    names.set_defaults(usage_parser=names, handler=_cmd_schema_names)


def _add_reading_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--require-name",
        action="store_true",
        help="plain-text and stdin schemas must have an operator name (by default '(Tensor x) -> Tensor' is accepted too)",
    )
    command.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="skip files and folders matching this glob (repeatable, or comma-separated); added to the configured exclude",
    )
    command.add_argument(
        "--schema-function",
        action="append",
        default=[],
        metavar="NAME",
        help="a function of your project that takes a schema (its schema= argument, else its first argument holding a "
        "string), read in Python and C++ like torch's own (repeatable, or comma-separated); added to the "
        "configured schema-functions",
    )
    command.add_argument("--config", metavar="FILE", help="read [tool.pbp-serialize] from FILE instead of the nearest pyproject.toml")


def run(argv: Sequence[str]) -> int:
    """Run the command line with ``argv`` (without the program name); return the exit code.

    Output goes to ``sys.stdout`` / ``sys.stderr`` as they are at call time, so tests can capture it.
    Never raises for user errors: usage errors return 2 after printing the usage line.
    """
    parser = _build_parser()
    try:
        args, extra = parser.parse_known_args(list(argv))
        if extra:
            # argparse would report these with the top-level usage; the subcommand's usage is the one that helps
            raise _UsageError(getattr(args, "usage_parser", parser), f"unrecognized arguments: {' '.join(extra)}")
        if getattr(args, "list_sites", False) and args.format != "json":
            raise _UsageError(args.usage_parser, "--list-sites needs --format json")
    except _UsageError as exc:
        exc.parser.print_usage(sys.stderr)
        print(f"{exc.parser.prog}: error: {exc.message}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help and --version exit through argparse
        return exc.code if isinstance(exc.code, int) else 0
    try:
        return int(args.handler(args))
    except ModuleNotFoundError as exc:
        from .._optional import EXTRAS, missing_torch

        if exc.name not in EXTRAS:
            raise
        # torch and transformers are extras: say which command needed which, and the line that installs it
        command = " ".join(word for word in (args.command, getattr(args, f"{args.command}_command", None)) if word)
        print(f"{PROG}: error: {missing_torch(f'{PROG} {command}', exc.name)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, as other command-line tools do
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point ``pbp-serialize``; ``argv`` defaults to ``sys.argv[1:]``."""
    return run(sys.argv[1:] if argv is None else argv)


# ------------------------------------------------------------------------------------------------
# Handlers: parse nothing themselves; the work lives in _check and _format (schemas) and the library.


def _cmd_schema_check(args: argparse.Namespace) -> int:
    from ._check import check_command

    return check_command(
        args.paths,
        strict=args.strict,
        fmt=args.format,
        quiet=args.quiet,
        require_name=args.require_name,
        exclude=args.exclude,
        config=args.config,
        schema_functions=args.schema_function,
        list_sites=args.list_sites,
    )


def _cmd_schema_format(args: argparse.Namespace) -> int:
    from ._format import format_command

    return format_command(
        args.paths or ["-"],
        check=args.check,
        quiet=args.quiet,
        require_name=args.require_name,
        exclude=args.exclude,
        config=args.config,
        schema_functions=args.schema_function,
        shortest=args.shortest,
    )


def _cmd_schema_names(args: argparse.Namespace) -> int:
    from ._format import names_command

    return names_command(args.schema)


def _cmd_name_decode(args: argparse.Namespace) -> int:
    from ..errors import TreeSpecNameError
    from ..type_info import pretty_type_info
    from ._format import print_argument_error

    try:
        print(pretty_type_info(args.name))
    except TreeSpecNameError as exc:
        print_argument_error("<name>", exc)
        return 1
    return 0


def _cmd_name_encode(args: argparse.Namespace) -> int:
    from ..errors import TreeSpecNameError
    from ._format import print_argument_error
    from ._structure import parse_structure

    try:
        structure = parse_structure(args.description)
    except TreeSpecNameError as exc:
        print_argument_error("<description>", exc)
        return 1
    from .._optional import import_torch

    import_torch(f"{PROG} name encode")
    from torch.utils._pytree import tree_flatten

    from ..treespec_name import tree_spec_as_name

    _, spec = tree_flatten(structure)
    try:
        print(tree_spec_as_name(spec))
    except TreeSpecNameError as exc:  # pragma: no cover - every describable structure is encodable
        print(f"{PROG}: error: {exc.msg}", file=sys.stderr)
        return 1
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from ._demo import demo

    return demo(quiet=args.quiet)
