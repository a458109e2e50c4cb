"""LHCbBookkeeping: feed the files a bookkeeping query selects, from the file catalogue."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from dxts.core.catalogue import FileCatalogue
from dxts.core.plugins import FeederProposal, FileInput, NoMoreInputs, Phase, SetFeederState
from dxts_example_experiment.bookkeeping import BookkeepingArgs, in_sample
from dxts_example_experiment.settings import ExperimentSettings


async def bookkeeping_feeder(
    *,
    feeder_args: BookkeepingArgs,
    feeder_state: dict[str, Any],
    scouting: bool,
    catalogue: FileCatalogue,
    settings: ExperimentSettings,
) -> AsyncIterator[FeederProposal]:
    """Page through the selection from the bookmark on, one bookmark per page.

    The bookmark is the catalogue's watermark together with a fingerprint of the selection: when
    the selection changes (the scout ends, a hook moves end_run) the watermark no longer says
    what has been fed, so the feeder starts a full pass and the core drops what it already has.
    """
    phase = Phase.SCOUTING if scouting else Phase.ACTIVE
    fraction = feeder_args.fraction(phase, settings.scouting_fraction)
    fingerprint = feeder_args.fingerprint(phase, fraction)
    watermark = feeder_state.get("watermark") if feeder_state.get("query") == fingerprint else None
    while True:
        page = await catalogue.query(
            feeder_args.where(phase), after=watermark, limit=feeder_args.page_size
        )
        for file in page.files:
            if in_sample(file.lfn, fraction):
                keys = feeder_args.descriptor_keys
                yield FileInput(
                    lfn=file.lfn,
                    lfn_size=file.size,
                    descriptor={key: file.metadata[key] for key in keys if key in file.metadata},
                )
        watermark = page.watermark
        yield SetFeederState({"query": fingerprint, "watermark": watermark})
        if not page.more:
            break
    if feeder_args.exhaust_after_pass:
        yield NoMoreInputs()
