"""The magics' flags: shared argument groups, parsing into a ``UsageError`` that says what to type.

Follows ipyparallel: ``@magic_arguments`` groups shared between magics, ``parse_argstring``,
and every mistake a :class:`~IPython.core.error.UsageError` with a sentence the user can act on.

>>> check_timeout(float("nan"))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
IPython.core.error.UsageError: --timeout nan: the timeout must be a positive, finite number ...
"""

from __future__ import annotations

import difflib
import math
import shlex
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, argument_group, parse_argstring

from ..exceptions import OptionsError
from ..hpc._internal import resolve_options

__all__ = [
    "CELL_FLAGS",
    "cell_flags",
    "check_cell_flags",
    "check_line_flags",
    "check_timeout",
    "optimize_word",
    "options_from",
    "parse",
    "resource_flags",
]

CELL_FLAGS = (
    "--num-cpus N, --num-gpus F, --memory M, --gpu-memory M, --options W, --name NAME, "
    "--timeout S, --no-block --out VAR, --optimize [MODE]"
)
#: What ``--optimize MODE`` and ``%eugo optimize on|off`` accept, as ``optimize=`` values.
OPTIMIZE_WORDS: dict[str, bool | str] = {
    "on": True,
    "true": True,
    "off": False,
    "false": False,
    "cpu": "cpu",
    "gpu": "gpu",
}
#: The resource flags, as the option names they set.
RESOURCE_KEYS = ("num_cpus", "num_gpus", "memory", "gpu_memory")


def _stack(*decorators: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Apply decorators as if written top to bottom, so groups can be shared between magics."""

    def apply(func: Any) -> Any:
        for deco in reversed(decorators):
            func = deco(func)
        return func

    return apply


#: Per-call resources, shared by %%distribute, %eugo options and %eugo check.
resource_flags = _stack(
    argument_group("resources", "What one call asks the scheduler for (as in f.options(...))."),
    argument("--num-cpus", type=float, metavar="N", help="CPUs for the task (default 1)."),
    argument(
        "--num-gpus", type=float, metavar="F",
        help="GPUs: a fraction below 1 (0.25, 0.5) shares one GPU, or whole GPUs (1, 2).",
    ),
    argument("--memory", metavar="M", help='Memory to reserve: bytes or "4GB", "512MiB".'),
    argument(
        "--gpu-memory", metavar="M",
        help='GPU memory one call needs ("6GB"): sized into a num_gpus fraction of the '
        "cluster's GPUs.",
    ),
    argument(
        "--options", metavar="W",
        help="A ResourceOptions widget or a dict from the notebook; the flags above win over it.",
    ),
)  # fmt: skip

#: How a cell is run and waited for.
cell_flags = _stack(
    argument_group("running", "How the cell is submitted and waited for."),
    argument(
        "--name", metavar="NAME", help="Task name shown in the dashboard and eugo.hpc.waiting()."
    ),
    argument(
        "--timeout", type=float, metavar="S",
        help="Cancel the cell if it has not finished after S seconds.",
    ),
    argument("--no-block", action="store_true", help="Return at once; needs --out VAR."),
    argument(
        "--optimize", nargs="?", const="on", default=None, metavar="MODE",
        help="Compile the notebook's functions the cell calls with numba, verified against "
        "Python (MODE: on, cpu, gpu or off; as optimize= in the API).",
    ),
    argument(
        "--out", metavar="VAR", help="With --no-block: the variable that gets the cell's future."
    ),
)  # fmt: skip


def parse(magic: Callable[..., Any], line: str, usage: str) -> Any:
    """The parsed flags of ``line``, or a ``UsageError`` that ends with ``usage``."""
    try:
        return parse_argstring(magic, line)
    except ValueError as exc:  # shlex: an unclosed quote ("No closing quotation")
        raise UsageError(
            f"{line.strip()!r} cannot be read as flags: {exc} (a quote was opened and not "
            f'closed). Close it, as in --name "my run". {usage}'
        ) from None
    except UsageError as exc:
        message = str(exc)
        words = [w for w in shlex.split(line, posix=True) if w.startswith("--")] if line else []
        known = [a for action in magic.parser._actions for a in action.option_strings]  # type: ignore[attr-defined]
        hints = [
            f"{word} is not a flag; did you mean {close[0]}?"
            for word in words
            if word.split("=")[0] not in known
            for close in [difflib.get_close_matches(word.split("=")[0], known, n=1)]
            if close
        ]
        hint = (" " + " ".join(hints)) if hints else ""
        raise UsageError(f"{message}.{hint} {usage}") from None


def check_timeout(timeout: float | None) -> None:
    """A ``--timeout`` must be a positive, finite number of seconds (``nan`` would never fire)."""
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(
            f"--timeout {timeout:g}: the timeout must be a positive, finite number of seconds, "
            "such as --timeout 60."
        )


def check_cell_flags(args: Any) -> None:
    """``--no-block`` with ``--out VAR`` (and only then), a valid name, a finite ``--timeout``
    on a blocking cell only."""
    if args.no_block and not args.out:
        raise UsageError(
            "--no-block needs --out VAR to name the cell's future, for example "
            "%%distribute --no-block --out fut; then eugo.hpc.get(fut)."
        )
    if args.out and not args.no_block:
        raise UsageError("--out VAR goes with --no-block; a blocking cell binds its own names.")
    if args.out and not args.out.isidentifier():
        raise UsageError(f"--out {args.out}: that is not a valid variable name.")
    if args.no_block and args.timeout is not None:
        raise UsageError(
            "--timeout applies to a blocking cell; with --no-block pass the timeout to "
            "eugo.hpc.get(fut, timeout=S)."
        )
    check_timeout(args.timeout)


def check_line_flags(args: Any, commands: tuple[str, ...], usage: str) -> None:
    """``%eugo COMMAND [ADDRESS]``: a known command (or the closest one named), an address
    for ``connect`` and a word for ``optimize`` only, resource flags for ``options`` and
    ``check`` only."""
    command = args.command
    if command not in commands:
        close = difflib.get_close_matches(command, commands, n=1)
        hint = f" Did you mean %eugo {close[0]}?" if close else ""
        raise UsageError(f"%eugo has no command {command!r}.{hint} {usage}")
    if command == "connect" and not args.address:
        raise UsageError("%eugo connect needs an address: %eugo connect 10.0.0.5:6379.")
    if command == "optimize" and not args.address:
        raise UsageError("%eugo optimize needs on or off: %eugo optimize on.")
    if command not in ("connect", "optimize") and args.address:
        raise UsageError(f"%eugo {command} takes no address ({args.address!r}). {usage}")
    flags = any(getattr(args, k) is not None for k in (*RESOURCE_KEYS, "options"))
    if flags and command not in ("options", "check"):
        raise UsageError(
            f"Resource flags go with %eugo options or %eugo check, not %eugo {command}."
        )


def optimize_word(word: str, where: str) -> bool | str:
    """``on``/``off``/``cpu``/``gpu`` as an ``optimize=`` value, or a UsageError naming them.

    >>> optimize_word("on", "--optimize"), optimize_word("off", "%eugo optimize")
    (True, False)
    """
    value = OPTIMIZE_WORDS.get(word.lower())
    if value is None:
        raise UsageError(f"{where} {word}: use one of on, off, cpu or gpu.")
    return value


def options_from(args: Any, user_ns: dict[str, Any]) -> dict[str, Any]:
    """Options from ``--options W``, then the flags (which win); checked by the API's rules."""
    options: dict[str, Any] = {}
    if args.options:
        name = args.options
        if name not in user_ns:
            raise UsageError(
                f"--options {name}: there is no variable {name!r} in the notebook. Pass the "
                "name of a ResourceOptions widget or of a dict, such as "
                "opts = {'num_cpus': 2} then --options opts."
            )
        source = user_ns[name]
        value = getattr(source, "value", source)
        if not isinstance(value, dict):
            raise UsageError(
                f"--options {name}: {name} is a {type(source).__name__}; it must be a "
                "ResourceOptions widget (eugo.widgets.ResourceOptions()) or a dict of options."
            )
        options.update(value)
    for key in RESOURCE_KEYS:
        flag = getattr(args, key, None)
        if flag is not None:
            options[key] = int(flag) if isinstance(flag, float) and flag.is_integer() else flag
    if getattr(args, "name", None):
        options["name"] = args.name
    word = getattr(args, "optimize", None)
    if word is not None:
        options["optimize"] = optimize_word(word, "--optimize")
    try:
        return resolve_options(options, "task")
    except OptionsError as exc:
        flag = str(exc).split("=")[0].replace("_", "-")
        raise UsageError(f"{exc} (from --{flag.lstrip('-')} or --options)") from None
