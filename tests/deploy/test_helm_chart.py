"""The chart, rendered with its defaults and with each values file under values/: lint-clean,
and every object holds the properties a safe, reachable deployment needs."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from chart_render import (
    CHART,
    NAMESPACE,
    RELEASE,
    VALUE_SETS,
    Helm,
    containers,
    of_kind,
    pod_specs,
)

from dxts.core.storage import StorageSettings

Manifests = list[dict[str, Any]]
PREFIX = f"{RELEASE}-dxts"
SERVICES = ["definition", "execution", "accounting", "dispatcher"]
SETS = list(VALUE_SETS)


def workloads(manifests: Manifests) -> list[dict[str, Any]]:
    return [doc for doc in manifests if doc["kind"] in {"Deployment", "StatefulSet"}]


def component(doc: dict[str, Any]) -> str:
    return str(doc["metadata"]["labels"]["app.kubernetes.io/component"])


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in container.get("env", [])}


def is_dxts(container: dict[str, Any]) -> bool:
    return "mariadb" not in container["image"]


def hooks(doc: dict[str, Any]) -> set[str]:
    annotations = doc["metadata"].get("annotations") or {}
    return set(filter(None, annotations.get("helm.sh/hook", "").split(",")))


@pytest.mark.parametrize("value_set", SETS)
def test_helm_lint_is_clean(helm: Helm, value_set: str) -> None:
    files = [arg for path in VALUE_SETS[value_set] for arg in ("--values", str(path))]
    result = helm.run("lint", "--strict", str(CHART), *files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_components_rendered_per_value_set(rendered: dict[str, Manifests]) -> None:
    def deployments(name: str) -> set[str]:
        return set(of_kind(rendered[name], "Deployment"))

    core = {f"{PREFIX}-{name}" for name in SERVICES}
    assert deployments("default") == core | {f"{PREFIX}-backend-local"}
    assert deployments("external-db") == core | {f"{PREFIX}-backend-local"}
    assert deployments("everything") == core | {
        f"{PREFIX}-backend-local",
        f"{PREFIX}-backend-null",
        f"{PREFIX}-backend-slurm",
    }
    assert set(of_kind(rendered["everything"], "StatefulSet")) == {f"{PREFIX}-mariadb"}
    assert not of_kind(rendered["default"], "StatefulSet")
    for name, manifests in rendered.items():
        assert set(of_kind(manifests, "Service")) >= deployments(name), name


@pytest.mark.parametrize("value_set", SETS)
def test_every_workload_has_probes_resources_and_a_locked_down_context(
    rendered: dict[str, Manifests], value_set: str
) -> None:
    found = workloads(rendered[value_set])
    assert found
    for doc in found:
        spec = doc["spec"]["template"]["spec"]
        where = doc["metadata"]["name"]
        assert spec["securityContext"]["runAsNonRoot"] is True, where
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert spec["automountServiceAccountToken"] is False, where
        for container in spec["containers"]:
            assert container.get("readinessProbe"), where
            assert container.get("livenessProbe"), where
            assert container["resources"]["requests"]["cpu"], where
            assert container["resources"]["requests"]["memory"], where
            assert container["resources"]["limits"]["memory"], where
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["runAsNonRoot"] is True, where
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["capabilities"]["drop"] == ["ALL"], where
            mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
            assert "/tmp" in mounts, f"{where}: a read-only root needs a writable /tmp"


@pytest.mark.parametrize("value_set", SETS)
def test_nothing_runs_as_root(rendered: dict[str, Manifests], value_set: str) -> None:
    specs = list(pod_specs(rendered[value_set]))
    assert {doc["kind"] for doc, _ in specs} >= {"Deployment", "Job"}
    for doc, spec in specs:
        pod_user = spec["securityContext"].get("runAsUser")
        for container in containers(spec):
            where = f"{doc['metadata']['name']}/{container['name']}"
            context = container.get("securityContext", {})
            user = context.get("runAsUser", pod_user)
            assert user is not None and user != 0, where
            assert context.get("runAsNonRoot", spec["securityContext"].get("runAsNonRoot")), where
            if is_dxts(container):
                # The image's fixed user (Dockerfile DXTS_UID).
                assert user == 10001, where


@pytest.mark.parametrize("value_set", SETS)
def test_dxts_probes_use_the_grpc_health_service(
    rendered: dict[str, Manifests], value_set: str
) -> None:
    """On the plain-text health port beside TLS (the kubelet cannot speak TLS), else on the
    gRPC port itself."""
    for doc in of_kind(rendered[value_set], "Deployment").values():
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        ports = {port["name"]: port["containerPort"] for port in container["ports"]}
        env = env_of(container)
        tls = "DXTS_TLS_CERT_FILE" in env
        probed = "health" if tls else "grpc"
        assert set(ports) == {"grpc", "metrics"} | ({"health"} if tls else set())
        for probe in ("readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"] == {"port": ports[probed]}, doc["metadata"]["name"]
        assert env["DXTS_LISTEN"]["value"].endswith(f":{ports['grpc']}")
        assert env["DXTS_METRICS_PORT"]["value"] == str(ports["metrics"])
        if tls:
            assert env["DXTS_HEALTH_LISTEN"]["value"].endswith(f":{ports['health']}")


@pytest.mark.parametrize("value_set", SETS)
def test_every_service_port_targets_a_named_container_port(
    rendered: dict[str, Manifests], value_set: str
) -> None:
    manifests = rendered[value_set]
    pods = [
        (doc["spec"]["template"]["metadata"]["labels"], doc["spec"]["template"]["spec"])
        for doc in workloads(manifests)
    ]
    for service in of_kind(manifests, "Service").values():
        selector = service["spec"]["selector"]
        selected = [spec for labels, spec in pods if selector.items() <= labels.items()]
        assert selected, f"{service['metadata']['name']} selects no pods"
        for spec in selected:
            named = {port["name"]: port for c in spec["containers"] for port in c["ports"]}
            for port in service["spec"]["ports"]:
                assert port["targetPort"] in named, (service["metadata"]["name"], port)
                assert named[port["targetPort"]]["protocol"] == port["protocol"]


@pytest.mark.parametrize("value_set", SETS)
def test_migration_job_is_a_pre_install_pre_upgrade_hook_that_waits_for_the_database(
    rendered: dict[str, Manifests], value_set: str
) -> None:
    manifests = rendered[value_set]
    (job,) = of_kind(manifests, "Job").values()
    annotations = job["metadata"]["annotations"]
    assert hooks(job) == {"pre-install", "pre-upgrade"}
    assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"]
    weight = int(annotations["helm.sh/hook-weight"])
    spec = job["spec"]["template"]["spec"]
    (wait,) = spec["initContainers"]
    (migrate,) = spec["containers"]
    assert [*wait["command"], *wait["args"]] == ["dxts-db", "current"]
    assert [*migrate["command"], *migrate["args"]] == ["dxts-db", "upgrade"]
    assert spec["restartPolicy"] == "OnFailure"
    assert job["spec"]["activeDeadlineSeconds"] > 0
    for container in (wait, migrate):
        secret = env_of(container)["DXTS_DB_URL"]["valueFrom"]["secretKeyRef"]
        # The Secret the Job reads must exist before it: made earlier or a lighter hook.
        made_by_chart = {
            doc["metadata"]["name"]: doc for doc in manifests if doc["kind"] == "Secret"
        }
        if secret["name"] in made_by_chart:
            source = made_by_chart[secret["name"]]
            assert hooks(source) >= {"pre-install", "pre-upgrade"}, secret["name"]
            assert int(source["metadata"]["annotations"]["helm.sh/hook-weight"]) < weight
            assert secret["key"] in source["data"]
    for doc in manifests:
        if component(doc) == "mariadb":
            # The trial database must be up before the hook that migrates it.
            assert hooks(doc) == {"pre-install"}, doc["metadata"]["name"]
            assert int(doc["metadata"]["annotations"]["helm.sh/hook-weight"]) < weight


@pytest.mark.parametrize(
    ("value_set", "secret", "key"),
    [
        ("default", f"{PREFIX}-database", "url"),
        ("external-db", "dxts-db-credentials", "DXTS_DB_URL"),
        ("everything", f"{PREFIX}-database", "url"),
    ],
)
def test_services_read_the_database_url_from_the_secret_and_adaptors_do_not(
    rendered: dict[str, Manifests], value_set: str, secret: str, key: str
) -> None:
    for name, doc in of_kind(rendered[value_set], "Deployment").items():
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        env = env_of(container)
        if component(doc) in SERVICES:
            assert env["DXTS_DB_URL"]["valueFrom"]["secretKeyRef"] == {"name": secret, "key": key}
        else:
            assert "DXTS_DB_URL" not in env, name


def test_trial_database_url_points_at_the_in_cluster_mariadb(
    rendered: dict[str, Manifests],
) -> None:
    secret = of_kind(rendered["everything"], "Secret")[f"{PREFIX}-database"]
    url = base64.b64decode(secret["data"]["url"]).decode()
    assert url == f"mysql+asyncmy://dxts:trial-password@{PREFIX}-mariadb:3306/dxts"
    assert f"{PREFIX}-mariadb" in of_kind(rendered["everything"], "Service")
    # Production values never render the trial database.
    for value_set in ("default", "external-db"):
        assert not [doc for doc in rendered[value_set] if component(doc) == "mariadb"]


def mounted_file(spec: dict[str, Any], container: dict[str, Any], path: str) -> dict[str, Any]:
    """The volume that holds the file `path` in `container` (and holds that very file)."""
    directory, name = path.rsplit("/", 1)
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    assert directory in mounts, f"{container['name']}: nothing is mounted at {directory}"
    volume = volumes[mounts[directory]]
    if "secret" in volume:
        assert [item["path"] for item in volume["secret"]["items"]] == [name], path
    return volume


@pytest.mark.parametrize("value_set", SETS)
def test_files_named_by_the_environment_are_mounted_there(
    rendered: dict[str, Manifests], value_set: str
) -> None:
    manifests = rendered[value_set]
    config_maps = of_kind(manifests, "ConfigMap")
    for name, doc in of_kind(manifests, "Deployment").items():
        spec = doc["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        env = env_of(container)

        # Only the readers of the installation file get it: definition, execution (the
        # policy's quotas) and the dispatcher.
        readers = {"definition", "execution", "dispatcher"}
        assert ("DXTS_CONFIG_FILE" in env) == (component(doc) in readers)
        if "DXTS_CONFIG_FILE" in env:
            path = env["DXTS_CONFIG_FILE"]["value"]
            config_map = mounted_file(spec, container, path)["configMap"]["name"]
            assert path.rsplit("/", 1)[1] in config_maps[config_map]["data"], name

        mounted_file(spec, container, env["DXTS_AUTH_PUBLIC_KEY_FILE"]["value"])
        assert env["DXTS_AUTH_ISSUER"]["value"] and env["DXTS_AUTH_AUDIENCE"]["value"]


def test_existing_secrets_are_referenced_not_generated(rendered: dict[str, Manifests]) -> None:
    manifests = rendered["external-db"]
    assert set(of_kind(manifests, "Secret")) == set()
    deployment = of_kind(manifests, "Deployment")[f"{PREFIX}-definition"]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["auth"]["secret"]["secretName"] == "dxts-token-key"
    assert volumes["tls"]["secret"]["secretName"] == "dxts-tls"
    # A chart-generated key ends up in a Secret the pods mount.
    generated = of_kind(rendered["everything"], "Secret")[f"{PREFIX}-auth"]
    assert list(generated["data"]) == ["public.pem"]


@pytest.mark.parametrize("value_set", SETS)
def test_dispatcher_knows_every_enabled_backend_and_each_has_a_service(
    rendered: dict[str, Manifests], value_set: str
) -> None:
    manifests = rendered[value_set]
    dispatcher = of_kind(manifests, "Deployment")[f"{PREFIX}-dispatcher"]
    (container,) = dispatcher["spec"]["template"]["spec"]["containers"]
    backends = json.loads(env_of(container)["DXTS_BACKENDS"]["value"])
    services = of_kind(manifests, "Service")
    adaptors = {
        component(doc).removeprefix("backend-")
        for doc in of_kind(manifests, "Deployment").values()
        if component(doc).startswith("backend-")
    }
    assert {backend["name"] for backend in backends} == adaptors
    for backend in backends:
        assert set(backend) == {"name", "address", "kind"}
        assert backend["kind"] in {"compute", "data"}
        host, port = backend["address"].rsplit(":", 1)
        ports = {p["port"] for p in services[host]["spec"]["ports"] if p["name"] == "grpc"}
        assert ports == {int(port)}
    for peer in ("definition", "execution"):
        host, port = env_of(container)[f"DXTS_{peer.upper()}_ADDRESS"]["value"].rsplit(":", 1)
        assert host == f"{PREFIX}-{peer}" and host in services
    # Each adaptor is told the name and kind the dispatcher knows it by.
    deployments = of_kind(manifests, "Deployment")
    for backend in backends:
        (adaptor,) = deployments[f"{PREFIX}-backend-{backend['name']}"]["spec"]["template"]["spec"][
            "containers"
        ]
        prefix = f"DXTS_{backend['name'].upper()}"
        assert env_of(adaptor)[f"{prefix}_NAME"]["value"] == backend["name"]
        assert env_of(adaptor)[f"{prefix}_KIND"]["value"] == backend["kind"]


@pytest.mark.parametrize("value_set", SETS)
def test_each_service_has_a_disruption_budget_over_its_own_pods(
    rendered: dict[str, Manifests], value_set: str
) -> None:
    manifests = rendered[value_set]
    budgets = of_kind(manifests, "PodDisruptionBudget")
    deployments = of_kind(manifests, "Deployment")
    assert set(budgets) == {f"{PREFIX}-{name}" for name in SERVICES}
    for name, budget in budgets.items():
        labels = deployments[name]["spec"]["template"]["metadata"]["labels"]
        assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
        assert budget["spec"]["maxUnavailable"] >= 1


def test_services_run_two_replicas_by_default(rendered: dict[str, Manifests]) -> None:
    deployments = of_kind(rendered["default"], "Deployment")
    for name in SERVICES:
        assert deployments[f"{PREFIX}-{name}"]["spec"]["replicas"] == 2
    assert deployments[f"{PREFIX}-backend-local"]["spec"]["replicas"] == 1


def test_autoscalers_target_the_stateless_services_which_leave_replicas_to_them(
    rendered: dict[str, Manifests],
) -> None:
    assert not of_kind(rendered["default"], "HorizontalPodAutoscaler")
    manifests = rendered["everything"]
    autoscalers = of_kind(manifests, "HorizontalPodAutoscaler")
    deployments = of_kind(manifests, "Deployment")
    assert set(autoscalers) == {f"{PREFIX}-{n}" for n in ("definition", "execution", "accounting")}
    for name, hpa in autoscalers.items():
        target = hpa["spec"]["scaleTargetRef"]
        assert (target["kind"], target["name"]) == ("Deployment", name)
        assert "replicas" not in deployments[name]["spec"], name
        assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    assert autoscalers[f"{PREFIX}-execution"]["spec"]["maxReplicas"] == 10
    assert deployments[f"{PREFIX}-dispatcher"]["spec"]["replicas"] == 2


def test_service_monitor_scrapes_the_metrics_port_of_every_component(
    rendered: dict[str, Manifests],
) -> None:
    assert not of_kind(rendered["default"], "ServiceMonitor")
    manifests = rendered["everything"]
    (monitor,) = of_kind(manifests, "ServiceMonitor").values()
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert [endpoint["port"] for endpoint in monitor["spec"]["endpoints"]] == ["metrics"]
    selector = monitor["spec"]["selector"]
    (expression,) = selector["matchExpressions"]
    scraped = {
        name
        for name, service in of_kind(manifests, "Service").items()
        if selector["matchLabels"].items() <= service["metadata"]["labels"].items()
        and service["metadata"]["labels"][expression["key"]] in expression["values"]
    }
    components = set(of_kind(manifests, "Deployment"))
    assert scraped == components
    for name in scraped:
        ports = of_kind(manifests, "Service")[name]["spec"]["ports"]
        assert "metrics" in {port["name"] for port in ports}


def test_standard_labels_on_every_object(rendered: dict[str, Manifests]) -> None:
    for doc in rendered["everything"]:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "dxts"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/component"]
        assert labels["helm.sh/chart"].startswith("dxts-")


def test_notes_say_how_to_reach_the_services_and_submit(helm: Helm) -> None:
    result = helm.run("install", RELEASE, str(CHART), "--dry-run=client", "--namespace", NAMESPACE)
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert f"port-forward svc/{PREFIX}-definition" in notes
    assert "dxts submit" in notes
    assert f"create secret generic {PREFIX}-database" in notes


# Who opens the file catalogue with the services' credential: execution registers outputs,
# definition's clean-up actions remove files (the adaptors that stage inputs have their own:
# test_chart_jobs_in_a_box). Who calls another component on its own behalf:
# definition's lifecycle engine, execution, the dispatcher, and a null adaptor that pushes.
CATALOGUE_USERS = {"definition", "execution"}
CALLERS = {"definition", "execution", "dispatcher"}
# The key of the component-tokens Secret each caller mounts: its own kind of caller.
TOKEN_KEYS = {"definition": "service", "execution": "service", "dispatcher": "dispatcher"}


@pytest.mark.parametrize(
    ("value_set", "secret"),
    [
        # Without a catalogue Secret of its own, the catalogue lives in the dxts database.
        ("default", {"name": f"{PREFIX}-database", "key": "url"}),
        ("external-db", {"name": "dxts-catalogue-credentials", "key": "DXTS_CATALOGUE_URL"}),
        ("everything", {"name": f"{PREFIX}-database", "key": "url"}),
    ],
)
def test_every_catalogue_user_reads_the_same_url_from_a_secret(
    rendered: dict[str, Manifests], value_set: str, secret: dict[str, str]
) -> None:
    users = set()
    deployments = of_kind(rendered[value_set], "Deployment")
    for name, doc in deployments.items():
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        env = env_of(container)
        if component(doc) in CATALOGUE_USERS:
            assert env["DXTS_CATALOGUE_URL"]["valueFrom"]["secretKeyRef"] == secret, name
            users.add(component(doc))
        else:
            assert "DXTS_CATALOGUE_URL" not in env, name
    assert users == CATALOGUE_USERS & {component(doc) for doc in deployments.values()}
    assert users >= {"definition", "execution"}


def test_a_catalogue_url_given_as_a_value_is_kept_in_a_secret_of_its_own(helm: Helm) -> None:
    url = "mysql+asyncmy://dxts:pw@db.example.org:3306/dxts_catalogue"
    manifests = helm.render([], "--set", f"catalogue.url={url}")
    secret = of_kind(manifests, "Secret")[f"{PREFIX}-catalogue"]
    assert base64.b64decode(secret["data"]["url"]).decode() == url
    readers = 0
    for doc in of_kind(manifests, "Deployment").values():
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        reference = env_of(container).get("DXTS_CATALOGUE_URL")
        if reference is not None:
            assert reference["valueFrom"]["secretKeyRef"] == {
                "name": f"{PREFIX}-catalogue",
                "key": "url",
            }
            readers += 1
        assert url not in json.dumps(doc)
    assert readers == len(CATALOGUE_USERS)


@pytest.mark.parametrize(
    ("value_set", "secret"),
    [
        ("default", f"{PREFIX}-component-tokens"),
        ("external-db", "dxts-component-tokens"),
        ("everything", f"{PREFIX}-component-tokens"),
    ],
)
def test_components_that_call_others_carry_their_own_kind_of_token_and_only_they(
    rendered: dict[str, Manifests], value_set: str, secret: str
) -> None:
    pushing = {"everything": {"backend-null"}}.get(value_set, set())
    keys = {**TOKEN_KEYS, "backend-null": "adaptor-null"}
    holders = set()
    for name, doc in of_kind(rendered[value_set], "Deployment").items():
        spec = doc["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        env = env_of(container)
        assert "DXTS_SERVICE_TOKEN" not in env, f"{name}: a token belongs in a Secret"
        secrets = {v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
        if component(doc) in CALLERS | pushing:
            path = env["DXTS_SERVICE_TOKEN_FILE"]["value"]
            volume = mounted_file(spec, container, path)["secret"]
            assert volume["secretName"] == secret, name
            assert volume["items"] == [
                {"key": keys[component(doc)], "path": path.rsplit("/", 1)[1]}
            ], name
            holders.add(component(doc))
        else:
            assert "DXTS_SERVICE_TOKEN_FILE" not in env, name
            assert secret not in secrets, name
    assert holders == CALLERS | pushing


def test_a_pushing_null_adaptor_is_told_where_the_dispatcher_is(
    rendered: dict[str, Manifests],
) -> None:
    deployments = of_kind(rendered["everything"], "Deployment")
    (container,) = deployments[f"{PREFIX}-backend-null"]["spec"]["template"]["spec"]["containers"]
    env = env_of(container)
    assert env["DXTS_NULL_REPORT_MODE"]["value"] == "push"
    host, port = env["DXTS_DISPATCHER_ADDRESS"]["value"].rsplit(":", 1)
    service = of_kind(rendered["everything"], "Service")[host]
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "dispatcher"
    assert int(port) in {p["port"] for p in service["spec"]["ports"] if p["name"] == "grpc"}


def test_the_adaptors_and_the_definition_service_are_told_the_storage_endpoints_alone(
    rendered: dict[str, Manifests],
) -> None:
    """`storageEndpoints` reaches the local and Slurm adaptors (they stage over XRootD) and the
    definition service (it refuses a data member writing to a read-only SE) as the JSON object
    dxts.core.storage reads, and no other component (the others neither move nor judge bytes)."""
    told = {}
    for doc in of_kind(rendered["everything"], "Deployment").values():
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        value = env_of(container).get("DXTS_STORAGE_ENDPOINTS")
        if value is not None:
            told[component(doc)] = StorageSettings(endpoints=value["value"]).endpoints
    for told_it in ("backend-local", "backend-slurm", "definition"):
        (endpoint,) = told.pop(told_it).values()
        assert endpoint.url("/vo/x") == "root://xrootd.example.org:1094//data/dst/vo/x"
    assert told == {}
    for doc in of_kind(rendered["default"], "Deployment").values():
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        assert "DXTS_STORAGE_ENDPOINTS" not in env_of(container)
