"""The plugin API (docs/extensions.md): what an extension imports, and what the runners call.

A plugin is a plain or async function, or a (async) generator, registered under an entry point
of one of the groups `dxts.feeders`, `dxts.packers`, `dxts.hooks`, `dxts.actions`. It declares:

* its arguments, as one parameter annotated with a pydantic model — `feeder_args` for a
  feeder, `packer_args` for a packer, `args` for a hook or an action (derive the model from
  `PluginArgs`; override `check_phase` for the phase rule);
* which of the point's fixed parameters it wants, by name (`Point.fixed`): a feeder
  `feeder_state`, `scouting`, `transformation`; a packer `inputs`, `flush`, `feeder_active`,
  `input_overview`, `transformation`; hooks and actions their context (`Point.context`);
* anything else by type annotation, injected from the process's `Providers` (the file
  catalogue, settings classes, service stubs) — checked at start-up by `Registry.check()`;
* for a hook or an action, the point(s) it serves: `@hook("HandleFailedInput")`,
  `@action("Finalizing")`.

It returns or yields proposals (`Input`, `FileInput`, `SetFeederState`, `NoMoreInputs`;
`ComputeParcel`, `DataParcel`, `StorageDelta`, `BadInput`, `DelayInput`; `Operation`; `Accept`;
`ToUnassigned`, `ToProblematic`, `SplitInto`, `RetryWith`, `WriteOff`; `ActionResult`) and never
writes anything itself.
"""

from dxts.core.plugins.args import NoArgs, PluginArgs
from dxts.core.plugins.context import (
    InputOverview,
    InputRecord,
    Parcel,
    Transformation,
    Workgraph,
)
from dxts.core.plugins.errors import PluginFailed, PluginRegistryError
from dxts.core.plugins.points import Phase, PluginKind, Point, action, hook
from dxts.core.plugins.proposals import (
    Accept,
    ActionResult,
    BadInput,
    ComputeParcel,
    DataParcel,
    Decision,
    DelayInput,
    FeederProposal,
    FileInput,
    Input,
    NoMoreInputs,
    Operation,
    PackerProposal,
    RetryWith,
    SetFeederState,
    SplitInto,
    StorageDelta,
    ToProblematic,
    ToUnassigned,
    WriteOff,
)
from dxts.core.plugins.providers import Providers
from dxts.core.plugins.registry import Plugin, Registry

__all__ = [
    "Accept",
    "ActionResult",
    "BadInput",
    "ComputeParcel",
    "DataParcel",
    "Decision",
    "DelayInput",
    "FeederProposal",
    "FileInput",
    "Input",
    "InputOverview",
    "InputRecord",
    "NoArgs",
    "NoMoreInputs",
    "Operation",
    "PackerProposal",
    "Parcel",
    "Phase",
    "Plugin",
    "PluginArgs",
    "PluginFailed",
    "PluginKind",
    "PluginRegistryError",
    "Point",
    "Providers",
    "Registry",
    "RetryWith",
    "SetFeederState",
    "SplitInto",
    "StorageDelta",
    "ToProblematic",
    "ToUnassigned",
    "Transformation",
    "Workgraph",
    "WriteOff",
    "action",
    "hook",
]
