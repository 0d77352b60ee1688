"""The ``tensig`` command line.

``tensig spec`` prints a spec's parsed structure and, given operand shapes, the inferred
sizes or the error; ``tensig verify`` verifies the shape-annotated functions of files and
folders; ``tensig findings`` prints the registry of verify's findings.  Options and exit
statuses: the README ("The command line", "Findings, suppressions, exit codes").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import Any

from tensig.check import findings
from tensig.check.verify import DEFAULT_TIMEOUT
from tensig.check.verify_files import verify_path
from tensig.core.errors import ShapeError, SpecSyntaxError
from tensig.core.inference import Inferred, infer
from tensig.core.notation import (
    Affine,
    Concat,
    Fixed,
    Label,
    Merge,
    Placeholder,
    Spec,
    parse,
)

__all__ = ["describe_spec", "main"]


def _axis_text(a: Any) -> str:
    if isinstance(a, Label):
        return a.name
    if isinstance(a, Affine):
        kind = {"padded": "padded", "valid": "valid", None: "padding from use_padding"}
        what = "affine, " + ("offset" if a.kernel is None else kind[a.padding])
    else:
        what = {Placeholder: "placeholder", Fixed: "fixed index", Concat: "concatenation",
                Merge: "merged, row-major"}[type(a)]
    return f"{a.render(True)} ({what})"


def describe_spec(spec: Spec) -> dict[str, Any]:
    """The parsed structure as plain data (what ``tensig spec --json`` prints)."""
    mc = spec.multichar

    def shape(s: Any) -> dict[str, Any]:
        return {
            kind: {
                "text": "... (context ellipsis)" if row.is_context_ellipsis
                        else row.render(mc) or "(empty, closed)",
                "left": [_axis_text(a) for a in row.left],
                "row_var": row.var.render() if row.var is not None else None,
                "right": [_axis_text(a) for a in row.right],
            }
            for kind, row in s.rows()
        }

    return {
        "spec": spec.text,
        "canonical": str(spec),
        "mode": "multichar" if spec.multichar else "single-char",
        "operands": [shape(s) for s in spec.operands],
        "result": shape(spec.result),
        "labels": sorted(spec.labels),
        "row_variables": sorted(spec.row_vars),
        "params": sorted(spec.params),
    }


def _inferred_data(r: Inferred) -> dict[str, Any]:
    return {
        "result": str(r.shape),
        "operands": [str(s) for s in r.operands],
        "dims": {k: str(v) for k, v in r.dims.items()},
        "rows": {k: [str(s) for s in v] for k, v in r.rows.items()},
        "ellipses": {k: [str(s) for s in v] for k, v in r.ellipses.items()},
        "conditions": [str(c) for c in r.conditions],
    }


def _print_text(desc: dict[str, Any], inferred: dict[str, Any] | None) -> None:
    print(f"spec:      {desc['spec']}")
    print(f"canonical: {desc['canonical']}")
    print(f"mode:      {desc['mode']}")
    shapes = [(f"operand {i}", s) for i, s in enumerate(desc["operands"])]
    for name, s in [*shapes, ("result", desc["result"])]:
        rows = "  ".join(f"{k}: {v['text']}" for k, v in s.items())
        print(f"  {name:<10} {rows}")
    if desc["row_variables"]:
        print(f"row variables: {', '.join('..' + v + '..' for v in desc['row_variables'])}")
    if desc["params"]:
        print(f"params: {', '.join(desc['params'])}")
    if inferred is None:
        return
    print(f"result shape: {inferred['result']}")
    for k, v in inferred["dims"].items():
        print(f"  {k} = {v}")
    for k, v in inferred["rows"].items():
        print(f"  ..{k}.. = ({', '.join(v)})")
    for k, v in inferred["ellipses"].items():
        if v:
            print(f"  ... ({k}) = ({', '.join(v)})")
    for c in inferred["conditions"]:
        print(f"  requires {c}")


def _param(text: str) -> tuple[str, int]:
    name, eq, value = text.partition("=")
    if not eq or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name, int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name}: {value!r} is not an integer") from None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tensig", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("spec", help="parse a spec and infer shapes")
    s.add_argument("spec", help="an einsum spec, e.g. 'ij;jk=>ik'")
    s.add_argument("shapes", nargs="*", metavar="SHAPE",
                   help="operand shapes such as '2,3' or '8|3->4' (then a result=: '--result')")
    s.add_argument("--param", action="append", type=_param, default=[], metavar="NAME=VALUE",
                   help="an integer stride/dilation identifier used in the spec")
    pad = s.add_mutually_exclusive_group()
    pad.add_argument("--use-padding", dest="use_padding", action="store_true", default=None,
                     help="plain '+' affine axes are padded")
    pad.add_argument("--no-padding", dest="use_padding", action="store_false",
                     help="plain '+' affine axes are valid (unpadded)")
    s.add_argument("--result", help="the known result shape (for middle concatenation)")
    v = sub.add_parser("verify", help="verify annotated functions for all sizes")
    v.add_argument("paths", nargs="+", metavar="PATH",
                   help="a .py file, a folder, or FILE::FUNCTION")
    v.add_argument("--ignore", action="append", default=[], metavar="CODE",
                   help="leave out findings of a code or name (TS202, reorder); repeatable")
    v.add_argument("--strict", action="store_true",
                   help="warnings and notes (incomplete verification) count as errors")
    v.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                   help="time limit per function and per import (default: 5)")
    v.add_argument("--in-process", action="store_true",
                   help="import the files in this interpreter instead of a worker")
    f = sub.add_parser("findings", help="list what verify finds: codes, severities, docs")
    f.add_argument("codes", nargs="*", metavar="CODE", help="codes or names (default: all)")
    for command in (s, v, f):
        command.add_argument("--json", action="store_true", help="print JSON")
    return p


def _findings_command(args: argparse.Namespace) -> int:
    """Print the registered findings (those named, or all); exit 2 on an unknown code."""
    try:
        wanted = findings.resolve(args.codes) if args.codes else None
    except ValueError as e:
        print(f"tensig findings: {e}", file=sys.stderr)
        return 2
    rules = [r for r in findings.RULES if wanted is None or r.code in wanted]
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in rules], indent=2))
    for r in [] if args.json else rules:
        print(f"{r.code} {r.name} ({r.severity}): {r.doc}\n    e.g. {r.example}")
    return 0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"the timeout must be a positive number, got {text}")
    return value


def _verify_command(args: argparse.Namespace) -> int:
    """Exit status 0: only warnings/notes (or nothing), 1: an error (``--strict``: anything),
    2: bad usage (a missing path, an unknown code, no such function)."""
    try:
        timeout = args.timeout or DEFAULT_TIMEOUT
        reports = [r for path in args.paths for r in verify_path(
            path, ignore=args.ignore, timeout=timeout, isolate=not args.in_process)]
    except (OSError, LookupError, ValueError) as e:
        print(f"tensig verify: {e}", file=sys.stderr)
        return 2
    errors, warnings, notes = (sum(len(getattr(r, kind)) for r in reports)
                               for kind in ("errors", "warnings", "notes"))
    if args.json:
        print(json.dumps([r.to_dict() for r in reports], indent=2))
    else:
        for r in reports:
            print(r)
        functions = sum(1 for r in reports if r.function != "<module>")
        print(f"{functions} function(s) verified: {errors} error(s), {warnings} warning(s), "
              f"{notes} note(s)")
    return 1 if errors or (args.strict and warnings + notes) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on usage errors, 0 on --help
        return int(e.code or 0)
    if args.command == "verify":
        return _verify_command(args)
    if args.command == "findings":
        return _findings_command(args)
    try:
        spec = parse(args.spec)
        desc = describe_spec(spec)
        inferred = None
        if args.shapes:
            r = infer(args.spec, *args.shapes, params=dict(args.param),
                      use_padding=args.use_padding, result=args.result)
            inferred = _inferred_data(r)
    except (SpecSyntaxError, ShapeError, ValueError, TypeError) as e:
        if args.json:
            data: dict[str, object] = e.to_dict() if isinstance(e, ShapeError) else {
                "error": type(e).__name__, "message": str(e)}
            if isinstance(e, SpecSyntaxError):
                data.update(column=e.column, reason=e.reason, hint=e.hint)
            print(json.dumps(data, indent=2))
        else:
            print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({**desc, **({"inferred": inferred} if inferred else {})}, indent=2))
    else:
        _print_text(desc, inferred)
    return 0


if __name__ == "__main__":
    sys.exit(main())
