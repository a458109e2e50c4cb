"""Every component as its own process, with only its own settings, as the Helm chart runs them.

`LocalCluster` is the deployed shape on one machine: `dxts-definition`, `dxts-execution`,
`dxts-accounting`, `dxts-dispatcher` and each adaptor (`dxts-backend-null`,
`dxts-backend-local`) started from their console scripts, each with the environment the chart
gives its pod — the database URL only to the services, a peer's address only to the
components that call it, the installation's public key to all, and a token of its own kind
(service, dispatcher, adaptor: the chart's component-tokens Secret) only to those that call on
their own behalf. Nothing is shared between them but the database, the
catalogue and the storage directory. The end-to-end tests, the fault suite and the end-to-end
benchmark run against it; `dxts up` (one process) is a convenience, not what is tested here.

    with LocalCluster(directory, db_url=url, backends=[Backend("null")]) as cluster:
        # execution_replicas=2, dispatcher_replicas=2: "execution" and "execution-2", ...
        token = cluster.user_token("lhcb", "alice", ["operator"])
        ...  # cluster.addresses["definition"], cluster.kill("execution"), cluster.restart(...)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import TracebackType

import grpc
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from dxts.core.grpc.auth import DEFAULT_AUDIENCE, DEFAULT_ISSUER, issue_token
from dxts.core.grpc.ports import free_port
from dxts.core.kernel.authorisation import CallerKind, adaptor_subject

SERVICES = ("definition", "execution", "accounting", "dispatcher")
# Whom each component calls (the chart's `peers`) and whether it calls on its own behalf.
PEERS: Mapping[str, tuple[str, ...]] = {
    "definition": ("execution", "accounting"),
    "execution": ("definition",),
    "accounting": ("definition",),
    "dispatcher": ("definition", "execution"),
}
# The components whose sweeps call their peers from the first round (started after them).
CALLERS_AT_START = ("dxts-execution", "dxts-dispatcher")
READY_TIMEOUT_S = 90.0
# A port chosen free can be taken by another process before the component binds it (another
# cluster choosing from the same range): the start then tries again with new ports.
PORT_TAKEN = ("Address already in use", "Failed to bind to address")
START_ATTEMPTS = 3
STOP_TIMEOUT_S = 20.0
TOKEN_LIFETIME = timedelta(days=1)


def fast_pacing(
    pace_s: float, *, archive_delay_s: float = 3600.0, status_interval_s: float | None = None
) -> dict[str, dict[str, str]]:
    """Every sweep paced in `pace_s` (the defaults are minutes and seconds), as each
    component's environment (`LocalCluster(env=...)`): a test or a fault run sees a
    workgraph through in seconds."""
    values: dict[str, dict[str, float]] = {
        "definition": {
            "DXTS_LIFECYCLE_INTERVAL_S": pace_s,
            "DXTS_LIFECYCLE_ARCHIVE_DELAY_S": archive_delay_s,
            "DXTS_DEFINITION_ATTENTION_METRICS_INTERVAL_S": pace_s,
        },
        "execution": {
            "DXTS_EXECUTION_FEED_INTERVAL_S": pace_s,
            "DXTS_EXECUTION_PACK_INTERVAL_S": pace_s,
            "DXTS_EXECUTION_RECORD_INTERVAL_S": pace_s / 2,
            "DXTS_EXECUTION_FAILED_INPUTS_INTERVAL_S": pace_s,
            "DXTS_EXECUTION_STOP_GRACE_S": 1.0,
        },
        "dispatcher": {
            "DXTS_DISPATCH_IDLE_S": pace_s / 2,
            "DXTS_DISPATCH_POLL_INTERVAL_S": pace_s,
            "DXTS_DISPATCH_CANCEL_INTERVAL_S": pace_s,
            "DXTS_DISPATCH_CANCEL_RESEND_S": 2.0,
            "DXTS_DISPATCH_REFUSAL_BACKOFF_S": 2 * pace_s,
            "DXTS_DISPATCH_RECOVERY_INTERVAL_S": 5.0,
            # A Submit that failed (an adaptor restarting) is retried after the lease.
            "DXTS_DISPATCH_LEASE_S": 5.0,
            # An adaptor that restarts forgetting its work: its parcels are lost in seconds.
            "DXTS_DISPATCH_LOST_GRACE_S": 3.0,
            "DXTS_DISPATCH_STATUS_INTERVAL_S": status_interval_s or 2 * pace_s,
        },
    }
    return {name: {k: str(v) for k, v in env.items()} for name, env in values.items()}


@dataclass(frozen=True)
class Backend:
    """An adaptor to run: `name` is its Parcels.Backend value, `adaptor` its type (null, local;
    default: the name) — two adaptors of one type under two names are two backends."""

    name: str
    kind: str = "compute"
    env: Mapping[str, str] = field(default_factory=dict)
    push: bool = False
    adaptor: str = ""

    @property
    def type(self) -> str:
        return self.adaptor or self.name


@dataclass
class Component:
    """One running (or stopped) component process."""

    name: str
    command: str
    env: dict[str, str]
    address: str
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class ComponentFailed(RuntimeError):
    """A component exited or never became healthy; the message ends with its log's tail."""


class PortTaken(ComponentFailed):
    """A component exited because a port chosen for it was taken before it could bind it."""


class LocalCluster:
    """Starts, inspects, injects faults into and stops the components (see the module doc)."""

    def __init__(
        self,
        directory: Path,
        *,
        db_url: str,
        backends: Sequence[Backend] = (Backend("null"),),
        env: Mapping[str, Mapping[str, str]] | None = None,
        common_env: Mapping[str, str] | None = None,
        migrate: bool = True,
        replicas: Mapping[str, int] | None = None,
        execution_replicas: int = 1,
        dispatcher_replicas: int = 1,
        metrics: bool = False,
    ) -> None:
        self.directory = directory
        self.db_url = db_url
        self.backends = list(backends)
        self.extra_env = {name: dict(values) for name, values in (env or {}).items()}
        self.common_env = dict(common_env or {})
        self.components: dict[str, Component] = {}
        self.migrates = migrate  # False: the schema exists already (a test created it)
        # More than one replica of a service: "dispatcher", "dispatcher-2", ...; replica n of a
        # component calls replica n of each peer, wrapping around (a Service spreading calls).
        self.replicas = dict(replicas or {})
        for name, count in (("execution", execution_replicas), ("dispatcher", dispatcher_replicas)):
            if count < 1:
                raise ValueError(f"{name}_replicas must be at least 1, got {count}")
            self.replicas[name] = max(count, self.replicas.get(name, 1))
        self.metrics = metrics  # each service process serves Prometheus metrics (`counter`)
        self._private_key = ed25519.Ed25519PrivateKey.generate()

    # -- set-up ---------------------------------------------------------------------------------

    def _write_keys(self) -> Path:
        keys = self.directory / "keys"
        keys.mkdir(parents=True, exist_ok=True)
        public = keys / "public.pem"
        public.write_bytes(
            self._private_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        return public

    def _token_file(self, key: str, sub: str, role: CallerKind) -> Path:
        """A component's own token, as the chart mounts key `key` of its Secret."""
        token = self.directory / "keys" / f"{key}.token"
        token.write_text(self.token("dxts", sub, [role]))
        token.chmod(0o600)
        return token

    def token(self, vo: str, sub: str, roles: Iterable[str] = ()) -> str:
        """A token the installation's components accept (signed with its key)."""
        return issue_token(
            vo,
            sub,
            roles,
            key=self._private_key,
            issuer=DEFAULT_ISSUER,
            audience=DEFAULT_AUDIENCE,
            lifetime=TOKEN_LIFETIME,
        )

    def user_token(self, vo: str, sub: str, roles: Iterable[str] = ("user",)) -> str:
        return self.token(vo, sub, roles)

    def _plan(self) -> None:
        public = self._write_keys()
        own_tokens = {
            "dispatcher": self._token_file("dispatcher", "dxts-dispatcher", CallerKind.DISPATCHER),
            **dict.fromkeys(
                ("definition", "execution"),
                self._token_file("service", "dxts-services", CallerKind.SERVICE),
            ),
        }
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        common = {
            "DXTS_AUTH_PUBLIC_KEY_FILE": str(public),
            "DXTS_AUTH_ISSUER": DEFAULT_ISSUER,
            "DXTS_AUTH_AUDIENCE": DEFAULT_AUDIENCE,
            "DXTS_CATALOGUE_URL": f"sqlite+aiosqlite:///{data / 'catalogue.sqlite'}",
            "DXTS_SHUTDOWN_GRACE_S": "5",
            **self.common_env,
        }
        addresses = {name: f"127.0.0.1:{free_port()}" for name in SERVICES}
        for name, count in self.replicas.items():
            addresses |= {f"{name}-{n}": f"127.0.0.1:{free_port()}" for n in range(2, count + 1)}
        for backend in self.backends:
            addresses[f"backend-{backend.name}"] = f"127.0.0.1:{free_port()}"
        (self.directory / "logs").mkdir(exist_ok=True)
        for name in SERVICES:
            env = {**common, "DXTS_DB_URL": self.db_url, "DXTS_LISTEN": addresses[name]}
            env |= {f"DXTS_{peer.upper()}_ADDRESS": addresses[peer] for peer in PEERS[name]}
            if name in own_tokens:
                env["DXTS_SERVICE_TOKEN_FILE"] = str(own_tokens[name])
            if name == "dispatcher":
                env["DXTS_BACKENDS"] = json.dumps(
                    [
                        {
                            "name": b.name,
                            "address": addresses[f"backend-{b.name}"],
                            "kind": b.kind,
                            "adaptor": b.type,
                        }
                        for b in self.backends
                    ]
                )
            self._add(name, f"dxts-{name}", env, addresses[name])
            for n in range(2, self.replicas.get(name, 1) + 1):
                replica = f"{name}-{n}"
                peers = {
                    f"DXTS_{peer.upper()}_ADDRESS": addresses[self.replica_name(peer, n)]
                    for peer in PEERS[name]
                }
                self._add(
                    replica,
                    f"dxts-{name}",
                    {**env, **peers, "DXTS_LISTEN": addresses[replica]},
                    addresses[replica],
                    settings_of=name,
                )
        for backend in self.backends:
            name = f"backend-{backend.name}"
            prefix = f"DXTS_{backend.type.upper()}"
            env = {
                **common,
                "DXTS_LISTEN": addresses[name],
                f"{prefix}_NAME": backend.name,
                f"{prefix}_KIND": backend.kind,
                "DXTS_DATA_DIR": str(data),
                **backend.env,
            }
            if backend.push:
                env |= {
                    f"{prefix}_REPORT_MODE": "push",
                    "DXTS_DISPATCHER_ADDRESS": addresses["dispatcher"],
                    "DXTS_SERVICE_TOKEN_FILE": str(
                        self._token_file(
                            f"adaptor-{backend.name}",
                            adaptor_subject(backend.name),
                            CallerKind.ADAPTOR,
                        )
                    ),
                }
            self._add(name, f"dxts-backend-{backend.type}", env, addresses[name])

    def replica_name(self, name: str, n: int) -> str:
        """The component name of replica `n` (from 1) of `name`, wrapping around its count."""
        n = (n - 1) % self.replicas.get(name, 1) + 1
        return name if n == 1 else f"{name}-{n}"

    def _add(
        self, name: str, command: str, env: dict[str, str], address: str, settings_of: str = ""
    ) -> None:
        env = {**env, **self.extra_env.get(settings_of or name, {})}
        if self.metrics and (settings_of or name) in SERVICES:
            env["DXTS_METRICS_PORT"] = str(free_port())
        log_path = self.directory / "logs" / f"{name}.log"
        self.components[name] = Component(name, command, env, address, log_path)

    def replicas_of(self, name: str) -> list[str]:
        """The component names of every replica of `name`: "execution", "execution-2", ..."""
        return [self.replica_name(name, n) for n in range(1, self.replicas.get(name, 1) + 1)]

    def counter(self, name: str, metric: str, **labels: str) -> float:
        """The total of a Prometheus counter (`metric`, without `_total`) over the samples
        matching `labels`, as component `name` serves it now (the cluster needs `metrics`)."""
        port = self.components[name].env["DXTS_METRICS_PORT"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == f"{metric}_total"
            and all(sample.labels.get(k) == v for k, v in labels.items())
        )

    @property
    def addresses(self) -> dict[str, str]:
        return {name: component.address for name, component in self.components.items()}

    # -- lifecycle ------------------------------------------------------------------------------

    def migrate(self) -> None:
        """The chart's migration job: `dxts-db upgrade` before anything starts."""
        result = subprocess.run(
            [_script("dxts-db"), "upgrade", "--url", self.db_url],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise ComponentFailed(f"dxts-db upgrade failed:\n{result.stdout}{result.stderr}")

    def start(self) -> LocalCluster:
        """Migrate, start every component, and wait until each reports SERVING: first those
        whose sweeps call no peer from their first round (definition, accounting, the
        adaptors), then execution and the dispatcher, whose sweeps call those from the start
        and would otherwise begin in their error back-off (a wait doubling up to 30 s) rather
        than at their normal pace."""
        self._plan()
        if self.migrates:
            self.migrate()
        for _ in range(START_ATTEMPTS - 1):
            try:
                self._start_components()
                return self
            except PortTaken:
                self.stop()
                self._plan()  # new ports: nobody outside has been told the old ones
        self._start_components()
        return self

    def _start_components(self) -> None:
        callers = [n for n, c in self.components.items() if c.command in CALLERS_AT_START]
        for wave in ([n for n in self.components if n not in callers], callers):
            for name in wave:
                self._spawn(name)
            for name in wave:
                self.wait_ready(name)

    def _spawn(self, name: str) -> None:
        component = self.components[name]
        environment = {k: v for k, v in os.environ.items() if not k.startswith("DXTS_")}
        environment |= component.env
        log = component.log_path.open("ab")
        try:
            component.process = subprocess.Popen(
                [_script(component.command)],
                env=environment,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            log.close()

    def wait_ready(self, name: str, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until the component's health check answers SERVING; ComponentFailed if it exits
        or does not within `timeout_s`."""
        component = self.components[name]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not component.running:
                tail = self.log_tail(name)
                failure = PortTaken if any(m in tail for m in PORT_TAKEN) else ComponentFailed
                raise failure(f"{name} exited\n{tail}")
            if _serving(component.address):
                return
            time.sleep(0.1)
        raise ComponentFailed(f"{name} not SERVING after {timeout_s:.0f} s\n{self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.components[name].log_path
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def signal(self, name: str, number: signal.Signals) -> None:
        process = self.components[name].process
        if process is not None and process.poll() is None:
            process.send_signal(number)

    def kill(self, name: str) -> None:
        """kill -9, and wait for the process to be gone."""
        self.signal(name, signal.SIGKILL)
        process = self.components[name].process
        if process is not None:
            process.wait()

    def pause(self, name: str) -> None:
        self.signal(name, signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self.signal(name, signal.SIGCONT)

    def restart(self, name: str, env: Mapping[str, str] | None = None) -> None:
        """Start a stopped or killed component again, with the same settings (updated by
        `env`), and wait."""
        component = self.components[name]
        if component.running:
            raise ComponentFailed(f"{name} is still running")
        component.env |= dict(env or {})
        self._spawn(name)
        self.wait_ready(name)

    def stop(self) -> None:
        """SIGTERM everything (adaptors first, services last), then SIGKILL stragglers."""
        order = list(reversed(self.components))
        for name in order:
            self.resume(name)
            self.signal(name, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for name in order:
            process = self.components[name].process
            if process is None:
                continue
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> LocalCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _script(name: str) -> str:
    """The console script installed beside this interpreter."""
    return str(Path(sys.executable).parent / name)


def _serving(address: str) -> bool:
    try:
        with grpc.insecure_channel(address) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=1.0
            )
    except grpc.RpcError:
        return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)
