"""``%eugo status | connect ADDRESS | options | check | optimize on|off``: from the notebook.

>>> %eugo connect 10.0.0.5:6379                 # doctest: +SKIP
>>> %eugo options --num-gpus 0.25               # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from ..exceptions import ClusterError, EugoError
from ..hpc._internal import connection, probe
from .flags import check_line_flags, options_from, parse, resource_flags
from .tracebacks import short

__all__ = ["EugoLineMagics"]

COMMANDS = ("status", "connect", "options", "check", "optimize")
USAGE = (
    "Use %eugo status | connect ADDRESS | options [--num-cpus N --num-gpus F] | check | "
    "optimize on|off."
)


@magics_class
class EugoLineMagics(Magics):
    """``%eugo``: status, connect, the options widget, the GPU check."""

    shell: Any  # IPython types it Optional; a registered magic always has its shell

    @line_magic
    @magic_arguments()
    @argument(
        "command", metavar="COMMAND", help="status | connect ADDRESS | options | check | optimize"
    )
    @argument(
        "address",
        nargs="?",
        metavar="ADDRESS",
        help="For connect: host:port of the head (GCS); for optimize: on or off.",
    )
    @resource_flags
    def eugo(self, line: str) -> Any:
        """The cluster from the notebook: ``%eugo status``, ``%eugo connect ADDRESS``,
        ``%eugo options [--num-gpus 0.25 ...]`` (the options widget), ``%eugo check`` (GPU check).
        """
        __tracebackhide__ = True
        args = parse(self.eugo, line, USAGE)
        check_line_flags(args, COMMANDS, USAGE)
        try:
            return getattr(self, f"_{args.command}")(args)
        except EugoError as exc:
            raise short(exc) from None

    def _status(self, args: Any) -> Any:
        from .. import hpc

        return hpc.cluster()

    def _connect(self, args: Any) -> Any:
        import ray

        from .. import hpc

        if ray.is_initialized():
            current = connection()
            if current.address != args.address:
                # Try the new cluster first: a typo must not cost the working connection.
                problem = probe(args.address)
                if problem is not None:
                    raise ClusterError(
                        f"{problem} Still connected to {current.address} ({current.source}); "
                        "check the address (host:port of the head's GCS, as printed by "
                        "`ray start --head`)."
                    )
                print(f"Disconnecting from {current.address} ({current.source}).")
                hpc.shutdown()
        hpc.init(address=args.address)
        return hpc.cluster()

    def _optimize(self, args: Any) -> None:
        from .. import hpc
        from .flags import optimize_word

        value = optimize_word(args.address, "%eugo optimize")
        if value == "gpu":
            raise UsageError(
                "%eugo optimize gpu: a GPU is per call; use optimize='gpu' with num_gpus= on "
                "that call, or %eugo optimize on."
            )
        hpc.set_optimize(value)
        if value:
            print(
                "optimize=True for every call of this notebook that does not say otherwise "
                "(eugo.hpc.set_optimize(True)); %eugo optimize off to stop."
            )
        else:
            print("optimize is off: calls run the plain functions unless they say optimize=.")

    def _options(self, args: Any) -> Any:
        from ..widgets import ResourceOptions

        options = options_from(args, self.shell.user_ns)
        return ResourceOptions(
            num_cpus=options.get("num_cpus", 1),
            num_gpus=options.get("num_gpus", 0),
            memory=options.get("memory"),
        )

    def _check(self, args: Any) -> Any:
        from ..gpu import check

        options = options_from(args, self.shell.user_ns)
        num_gpus = options.pop("num_gpus", 1)
        return check(num_gpus=num_gpus, **options)
