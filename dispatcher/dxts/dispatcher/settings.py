"""The dispatcher's settings: which backends exist, which one gets which parcels, and its pace.

* `DXTS_BACKENDS`: a JSON list of `{name, address, kind}` (the Helm chart writes it), plus an
  optional `adaptor` naming the adaptor type when it differs from the name ("local", "null"):
  the type picks the identifier table the backend's identifiers are recorded in.
* The installation file `DXTS_CONFIG_FILE` (`dxts.core.config.load_installation_config`, the
  loader every component uses): its definition defaults are resolved into the sidecar each
  compute parcel records, exactly as the definition service resolves them; its
  `backend_policy` section is the policy unless `DXTS_BACKEND_POLICY` (JSON) is set.
* The policy: per kind, a `default` backend and optionally a `route` of a stable `fraction` of
  the parcels to another `backend`. A kind the policy leaves out goes to the first configured
  backend of that kind.
* `DXTS_DEFINITION_ADDRESS`, `DXTS_EXECUTION_ADDRESS`: the definition service (process trees,
  transformation scopes) and the execution service (RecordOutcomes).
* Credentials for the calls the dispatcher makes on its own behalf: `DXTS_SERVICE_TOKEN` or
  `DXTS_SERVICE_TOKEN_FILE`; with neither, a token minted from the development key pair in
  `DXTS_DATA_DIR` (a single machine only).
* Tunables: `DXTS_DISPATCH_*` (batch sizes, lease, intervals, timeouts).
* The cap on each VO's parcels in flight: `DXTS_DISPATCH_VO_IN_FLIGHT_CAP` for every VO, and
  `DXTS_DISPATCH_VO_IN_FLIGHT_CAPS` (JSON, VO → cap) overriding it per VO; enforced by the claim
  (`dxts.dispatcher.store.quota`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from dxts.core.config import load_installation_config
from dxts.core.kernel.bounds import MAX_BATCH  # what one request may carry
from dxts.core.settings import KindSetting, ServiceTokenSettings
from dxts.core.states import Kind

# The backend execution directs the born-Done recovery parcels to (DirectedParcels), which are
# never submitted: never a configured backend.
RESERVED_BACKEND_NAMES = frozenset({"recovery"})


class BackendConfig(BaseModel):
    """One backend adaptor the dispatcher submits to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=32, description="Parcels.Backend value")
    address: str = Field(min_length=1, description="host:port of the adaptor's gRPC server")
    kind: KindSetting = Kind.COMPUTE
    adaptor: str = Field(
        "", max_length=64, description="adaptor type (BackendIDs.Adaptor); default: the name"
    )

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value in RESERVED_BACKEND_NAMES:
            raise ValueError(f"{value!r} is reserved for recovery parcels, not a backend")
        return value

    @model_validator(mode="after")
    def _adaptor_defaults_to_name(self) -> BackendConfig:
        if not self.adaptor:
            object.__setattr__(self, "adaptor", self.name)
        return self


class Route(BaseModel):
    """A stable fraction of a kind's parcels (by ParcelID hash) sent to another backend."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: str
    fraction: float = Field(ge=0.0, le=1.0)


class KindPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default: str
    route: Route | None = None


class BackendPolicy(BaseModel):
    """Which backend gets a parcel the packer did not direct, per kind."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compute: KindPolicy | None = None
    data: KindPolicy | None = None

    def for_kind(self, kind: Kind) -> KindPolicy | None:
        return self.compute if kind is Kind.COMPUTE else self.data


class DispatcherSettings(ServiceTokenSettings):
    model_config = SettingsConfigDict(env_prefix="DXTS_DISPATCH_", extra="ignore")

    backends: list[BackendConfig] = Field(
        default_factory=list, validation_alias=AliasChoices("DXTS_BACKENDS", "backends")
    )
    backend_policy: BackendPolicy | None = Field(
        None, validation_alias=AliasChoices("DXTS_BACKEND_POLICY", "backend_policy")
    )
    config_file: Path | None = Field(
        None,
        validation_alias=AliasChoices("DXTS_CONFIG_FILE", "config_file"),
        description="installation YAML: the definition defaults of the sidecars, and its "
        "backend_policy section when none is set directly",
    )
    definition_address: str | None = Field(
        None, validation_alias=AliasChoices("DXTS_DEFINITION_ADDRESS", "definition_address")
    )
    execution_address: str | None = Field(
        None, validation_alias=AliasChoices("DXTS_EXECUTION_ADDRESS", "execution_address")
    )

    claim_batch: int = Field(100, ge=1, description="parcels per claim transaction")
    submit_batch: int = Field(500, ge=1, le=MAX_BATCH, description="parcels per Submit call")
    poll_batch: int = Field(1000, ge=1, le=MAX_BATCH, description="identifiers per Poll call")
    outcome_batch: int = Field(
        500, ge=1, le=MAX_BATCH, description="outcomes per RecordOutcomes call"
    )
    claimers: int = Field(2, ge=1, description="concurrent claim loops per kind in a replica")
    lease_s: float = Field(
        300.0, gt=0, description="a Reserved parcel older than this is re-submitted"
    )
    idle_s: float = Field(1.0, gt=0, description="pause of a claim loop that found nothing")
    poll_interval_s: float = Field(5.0, gt=0)
    cancel_interval_s: float = Field(5.0, gt=0)
    cancel_resend_s: float = Field(60.0, gt=0, description="repeat a Cancel not yet confirmed")
    lost_grace_s: float = Field(
        300.0,
        ge=0,
        description="a parcel whose identifier its backend has not known for this long is lost "
        "by the backend: recorded Failed (Cancelled when its cancellation was asked)",
    )
    recovery_interval_s: float = Field(30.0, gt=0)
    status_interval_s: float = Field(15.0, gt=0, description="Describe and the gauges")
    call_timeout_s: float = Field(30.0, gt=0, description="deadline of every adaptor call")
    refusal_backoff_s: float = Field(
        5.0, ge=0, description="pause claiming for a backend that refused work"
    )
    vo_in_flight_cap: int | None = Field(
        None,
        ge=0,
        description="parcels in flight (Reserved, Assigned, Completing) a VO may have at most, "
        "checked when parcels are claimed (unset: no cap)",
    )
    vo_in_flight_caps: dict[str, Annotated[int, Field(ge=0)]] = Field(
        default_factory=dict,
        description="per VO, a cap replacing vo_in_flight_cap (JSON object: VO → parcels)",
    )
    output_lfn_base: str = Field("/dxts", description="LFN prefix of every parcel's outputs")

    @model_validator(mode="after")
    def _consistent(self) -> DispatcherSettings:
        names = [backend.name for backend in self.backends]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"backend names must be unique: {', '.join(duplicates)}")
        if self.backend_policy is None and self.config_file is not None:
            section = load_installation_config(self.config_file).backend_policy
            self.backend_policy = BackendPolicy.model_validate(section) if section else None
        by_name = {backend.name: backend for backend in self.backends}
        policy = self.backend_policy or BackendPolicy()
        for kind in Kind:
            chosen = policy.for_kind(kind)
            if chosen is None:
                continue
            targets = [chosen.default, *([chosen.route.backend] if chosen.route else [])]
            for target in targets:
                backend = by_name.get(target)
                if backend is None:
                    raise ValueError(f"backend_policy names {target!r}, which is not configured")
                if backend.kind is not kind:
                    raise ValueError(
                        f"backend_policy sends {kind.value} parcels to {target!r}, "
                        f"a {backend.kind.value} backend"
                    )
        return self

    def kind_policy(self, kind: Kind) -> KindPolicy | None:
        """The policy for `kind`: the configured one, else the first backend of that kind."""
        chosen = (self.backend_policy or BackendPolicy()).for_kind(kind)
        if chosen is not None:
            return chosen
        first = next((b.name for b in self.backends if b.kind is kind), None)
        return KindPolicy(default=first) if first else None
