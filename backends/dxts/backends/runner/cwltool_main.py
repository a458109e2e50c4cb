"""The default CWL runner: cwltool, with the stderr of every tool it runs written to a file of
its own (`DXTS_TOOL_STDERR`, set by whoever starts it: `dxts.backends.runner.cwl`) instead of
into its log, so that a failed parcel's reason is the tool's own line, not the runner's banner.

A tool whose document names its own `stderr:` file keeps it; everything else cwltool does as
`cwltool` on the command line (`python -m cwltool` would exit 0 whatever happened).
"""

from __future__ import annotations

import os
import sys

TOOL_STDERR_VARIABLE = "DXTS_TOOL_STDERR"


def main() -> int:
    from cwltool import main as cwltool
    from cwltool.argparser import arg_parser
    from cwltool.context import RuntimeContext

    sys.argv[0] = "cwltool"  # its banner names it, not "-m"
    path = os.environ.get(TOOL_STDERR_VARIABLE)
    if not path:
        return cwltool.main()
    args = arg_parser().parse_args(sys.argv[1:])
    with open(path, "ab") as tool_stderr:
        context = RuntimeContext(vars(args))
        context.default_stderr = tool_stderr
        return cwltool.main(args=args, runtimeContext=context)


if __name__ == "__main__":
    sys.exit(main())
