"""No RPC name is typed by hand on the server side: a command takes its name from the call it
serves (`served_rpc`), and code naming an RPC outside its call names the generated servicer's
method (`rpc(DefinitionServiceServicer.StartWorkgraph)`), which the import and the type checker
check. A string spelling a contract's method (`Flush`, `DefinitionService.SubmitWorkgraph`,
`dxts.v1.ExecutionService.Flush`, `/dxts.v1.ExecutionService/Flush`) would be a name a typo
silently breaks: a command logged under another event never recognises its retries."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

from dxts.core.kernel.authorisation import contract_methods

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
    "package-dir"
]
# The server side: core, the services, the dispatcher and the adaptors (the generated contracts,
# `dxts.v1`, are where the names are declared; the CLI and the web view are clients).
SERVER_SIDE = (
    "dxts.core",
    "dxts.definition",
    "dxts.execution",
    "dxts.accounting",
    "dxts.dispatcher",
    "dxts.backends",
)
# The clients: they pick an RPC at run time (a steering verb, a listing) by the servicer's
# method too (`dxts.core.grpc.calls`: `method_on(stub, DefinitionServiceServicer.StartWorkgraph)`),
# so that a renamed RPC fails at import and under the type checker, not when someone clicks.
CLIENTS = ("dxts.cli", "dxts.web", "dxts.bench")
# Strings that spell a method's name and mean something else, by module and why.
NOT_RPC_NAMES = {
    ("dxts.definition", "logic/lifecycle/operations.py", "Flush"): (
        "the transformation-log event of a hook asking for a flush, not a command's name"
    ),
    **{
        ("dxts.web", "steering.py", title): "a button's title, the English word"
        for title in ("Cancel", "Flush")
    },
}


def rpc_spellings() -> frozenset[str]:
    """Every way an RPC of the contracts can be spelt."""
    spellings = set()
    for path, method in contract_methods().items():
        service = method.containing_service
        spellings |= {method.name, f"{service.name}.{method.name}", method.full_name, path}
    return frozenset(spellings)


def typed_rpc_names(path: Path, spellings: frozenset[str]) -> Iterator[tuple[int, str]]:
    """(line, text) of every string constant of `path` spelling an RPC, and of every request
    class name built from a string (`getattr(pb, f"{rpc}Request")`)."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        value = node.value if isinstance(node, ast.Constant) else None
        if isinstance(value, str) and value in spellings:
            yield node.lineno, value
        elif (
            isinstance(node, ast.JoinedStr)
            and any(isinstance(part, ast.FormattedValue) for part in node.values)
            and isinstance(node.values[-1], ast.Constant)
            and str(node.values[-1].value).endswith(("Request", "Response"))
        ):
            yield node.lineno, ast.unparse(node)


def test_no_module_types_an_rpc_name() -> None:
    spellings = rpc_spellings()
    found = []
    for component in (*SERVER_SIDE, *CLIENTS):
        root = REPO / PACKAGE_DIRS[component]
        for path in sorted(root.rglob("*.py")):
            module = path.relative_to(root).as_posix()
            for line, text in typed_rpc_names(path, spellings):
                if (component, module, text) not in NOT_RPC_NAMES:
                    found.append(f"{path.relative_to(REPO)}:{line} types {text!r}")
    assert not found, "\n".join(found)


def test_every_exception_still_spells_an_rpc() -> None:
    """An exception that no longer matches anything is stale: remove it."""
    spellings = rpc_spellings()
    for (component, module, text), why in NOT_RPC_NAMES.items():
        path = REPO / PACKAGE_DIRS[component] / module
        assert text in {t for _, t in typed_rpc_names(path, spellings)}, why


def test_the_scanner_sees_every_spelling(tmp_path: Path) -> None:
    offender = tmp_path / "m.py"
    offender.write_text(
        'A = "StartWorkgraph"\n'
        'B = contract("DefinitionService.SubmitWorkgraph")\n'
        'C = {"/dxts.v1.ExecutionService/Flush": 1}\n'
        'D = "dxts.v1.AccountingService.Rebuild"\n'
        'E = "StartWorkgraph is mentioned in prose"\n'
        'F = getattr(stub, "ListWorkgraphs")\n'
        'G = getattr(definition_pb2, f"{rpc}Request")\n'
        'H = f"{count} requests"\n'
    )
    assert sorted(typed_rpc_names(offender, rpc_spellings())) == [
        (1, "StartWorkgraph"),
        (2, "DefinitionService.SubmitWorkgraph"),
        (3, "/dxts.v1.ExecutionService/Flush"),
        (4, "dxts.v1.AccountingService.Rebuild"),
        (6, "ListWorkgraphs"),
        (7, "f'{rpc}Request'"),
    ]
