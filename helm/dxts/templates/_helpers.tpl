{{/* Names, labels and the shared pieces of every dxts pod. */}}

{{- define "dxts.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* "<release>-dxts", or the release name alone when it already contains the chart name. */}}
{{- define "dxts.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "dxts.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels; call with (dict "root" $ "component" "definition"). */}}
{{- define "dxts.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dxts.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Standard labels; call with (dict "root" $ "component" "definition"). */}}
{{- define "dxts.labels" -}}
{{ include "dxts.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: dxts
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ include "dxts.chart" .root }}
{{- end -}}

{{- define "dxts.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "dxts.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dxts.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The components, as JSON ({"items": [...]}): the four services, then one entry per enabled
backend adaptor. `command` is the console entry point the container runs; `service` marks the
four services (database, PodDisruptionBudget, rolling updates); `autoscaled` marks those with an
HPA. What each one is given is exactly what its settings read (tests/deploy checks it against
the settings classes):
  peers         the components whose addresses it calls (DXTS_<PEER>_ADDRESS)
  config        reads the installation file (DXTS_CONFIG_FILE)
  catalogue     opens the file catalogue (DXTS_CATALOGUE_URL)
  token         the key of the component-tokens Secret it calls others with on its own behalf
                (DXTS_SERVICE_TOKEN_FILE; empty: none): "service" (definition, execution),
                "dispatcher", "adaptor-<backend>" (a push-mode adaptor): each token carries its
                caller kind (role), which the authorisation table checks
definition: its lifecycle engine calls accounting and execution, and its clean-up actions
remove files from the catalogue (forwarded user calls carry the caller's token). execution
reads definition, registers outputs in the catalogue, and holds feeders at the installation
file's quotas. accounting calls definition with the
caller's token only. The dispatcher calls definition and execution (and the adaptors). The
local and Slurm adaptors stage inputs through the catalogue (with a credential of their own,
catalogue.adaptors, or none); the null adaptor calls the
dispatcher only when it pushes its reports.
*/}}
{{- define "dxts.components" -}}
{{- $items := list -}}
{{- $services := dict
  "definition" (dict "peers" (list "execution" "accounting") "config" true "catalogue" true "token" "service")
  "execution" (dict "peers" (list "definition") "config" true "catalogue" true "token" "service")
  "accounting" (dict "peers" (list "definition") "config" false "catalogue" false "token" "")
-}}
{{- range $name := list "definition" "execution" "accounting" -}}
{{- $values := index $.Values $name -}}
{{- $items = append $items (merge (dict "component" $name "command" (printf "dxts-%s" $name) "values" $values "service" true "autoscaled" $values.autoscaling.enabled) (index $services $name)) -}}
{{- end -}}
{{- $items = append $items (dict "component" "dispatcher" "command" "dxts-dispatcher" "values" .Values.dispatcher "service" true "autoscaled" false "peers" (list "definition" "execution") "config" true "catalogue" false "token" "dispatcher") -}}
{{- $seen := dict -}}
{{- range $backend := .Values.backends -}}
{{- if hasKey $seen $backend.name -}}
{{- fail (printf "backends: %q is listed twice" $backend.name) -}}
{{- end -}}
{{- $_ := set $seen $backend.name true -}}
{{- $push := eq (default "pull" $backend.reportMode) "push" -}}
{{- $items = append $items (dict "component" (printf "backend-%s" $backend.name) "command" (printf "dxts-backend-%s" $backend.name) "values" $backend "service" false "autoscaled" false "peers" ($push | ternary (list "dispatcher") (list)) "config" false "catalogue" (has $backend.name (list "local" "slurm")) "token" ($push | ternary (printf "adaptor-%s" $backend.name) "") "adaptor" $backend.name "kind" (default "compute" $backend.kind) "push" $push) -}}
{{- end -}}
{{- dict "items" $items | toJson -}}
{{- end -}}

{{/* "host:port" of a component's Service inside the namespace. */}}
{{- define "dxts.address" -}}
{{- printf "%s-%s:%d" (include "dxts.fullname" .root) .component (int .root.Values.grpc.port) -}}
{{- end -}}

{{/* The backend list the dispatcher gets as DXTS_BACKENDS. */}}
{{- define "dxts.backendsJson" -}}
{{- $backends := list -}}
{{- range $backend := .Values.backends -}}
{{- $address := include "dxts.address" (dict "root" $ "component" (printf "backend-%s" $backend.name)) -}}
{{- $backends = append $backends (dict "name" $backend.name "address" $address "kind" (default "compute" $backend.kind)) -}}
{{- end -}}
{{- $backends | toJson -}}
{{- end -}}

{{/*
The database URL the chart stores itself (from database.url or the trial MariaDB); empty when
the URL comes from an existing Secret.
*/}}
{{- define "dxts.database.generatedUrl" -}}
{{- $db := .Values.database -}}
{{- if and .Values.mariadb.enabled (or $db.existingSecret $db.url) -}}
{{- fail "mariadb.enabled (trial database) excludes database.existingSecret and database.url" -}}
{{- end -}}
{{- if and $db.existingSecret $db.url -}}
{{- fail "set database.existingSecret or database.url, not both" -}}
{{- end -}}
{{- if $db.url -}}
{{- $db.url -}}
{{- else if .Values.mariadb.enabled -}}
{{- $m := .Values.mariadb -}}
{{- $password := required "mariadb.password is required when mariadb.enabled" $m.password -}}
{{- printf "mysql+asyncmy://%s:%s@%s:3306/%s" $m.username $password (include "dxts.mariadb.name" .) $m.database -}}
{{- end -}}
{{- end -}}

{{/* The Secret the pods read DXTS_DB_URL from. */}}
{{- define "dxts.database.secretName" -}}
{{- default (printf "%s-database" (include "dxts.fullname" .)) .Values.database.existingSecret -}}
{{- end -}}

{{/* The Secret the pods mount the token-verification key from. */}}
{{- define "dxts.auth.secretName" -}}
{{- default (printf "%s-auth" (include "dxts.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{/* The catalogue URL the chart stores itself (from catalogue.url); empty otherwise. */}}
{{- define "dxts.catalogue.generatedUrl" -}}
{{- if and .Values.catalogue.existingSecret .Values.catalogue.url -}}
{{- fail "set catalogue.existingSecret or catalogue.url, not both" -}}
{{- end -}}
{{- .Values.catalogue.url -}}
{{- end -}}

{{/*
The Secret and key DXTS_CATALOGUE_URL is read from: the existing Secret, the chart's own (from
catalogue.url), else the database's, whose database then holds the catalogue's tables too.
*/}}
{{- define "dxts.catalogue.secretKeyRef" -}}
{{- $c := .Values.catalogue -}}
{{- if $c.existingSecret -}}
{{- dict "name" $c.existingSecret "key" $c.existingSecretKey | toJson -}}
{{- else if include "dxts.catalogue.generatedUrl" . -}}
{{- dict "name" (printf "%s-catalogue" (include "dxts.fullname" .)) "key" $c.existingSecretKey | toJson -}}
{{- else -}}
{{- dict "name" (include "dxts.database.secretName" .) "key" .Values.database.existingSecretKey | toJson -}}
{{- end -}}
{{- end -}}

{{/*
The Secret and key the local and Slurm adaptors read DXTS_CATALOGUE_URL from (as JSON; empty:
none): a credential of their own (catalogue.adaptors), never the services' or the database's.
Their jobs run user code, so whatever the adaptor holds is the most exposed secret there is.
*/}}
{{- define "dxts.catalogue.adaptorSecretKeyRef" -}}
{{- $a := .Values.catalogue.adaptors -}}
{{- if and $a.existingSecret $a.url -}}
{{- fail "set catalogue.adaptors.existingSecret or catalogue.adaptors.url, not both" -}}
{{- end -}}
{{- if $a.existingSecret -}}
{{- dict "name" $a.existingSecret "key" $a.existingSecretKey | toJson -}}
{{- else if $a.url -}}
{{- dict "name" (printf "%s-catalogue-adaptors" (include "dxts.fullname" .)) "key" $a.existingSecretKey | toJson -}}
{{- end -}}
{{- end -}}

{{/* The Secret the components that call others mount their own token from (a key per kind). */}}
{{- define "dxts.componentTokens.secretName" -}}
{{- default (printf "%s-component-tokens" (include "dxts.fullname" .)) .Values.componentTokens.existingSecret -}}
{{- end -}}

{{- define "dxts.mariadb.name" -}}
{{- printf "%s-mariadb" (include "dxts.fullname" .) -}}
{{- end -}}

{{/* DXTS_DB_URL from its Secret (the services and the migration; the adaptors have no database). */}}
{{- define "dxts.databaseEnv" -}}
- name: DXTS_DB_URL
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .root.Values.database.existingSecretKey }}
{{- with .root.Values.database.failoverWaitSeconds }}
- name: DXTS_DB_FAILOVER_WAIT_S
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{/* Environment of every long-running dxts container: listening ports, token checks. */}}
{{- define "dxts.commonEnv" -}}
- name: DXTS_LISTEN
  value: {{ printf "%s:%d" .Values.grpc.listenHost (int .Values.grpc.port) | quote }}
- name: DXTS_METRICS_PORT
  value: {{ .Values.metrics.port | quote }}
- name: DXTS_SHUTDOWN_GRACE_S
  value: {{ .Values.shutdownGraceSeconds | quote }}
- name: DXTS_AUTH_PUBLIC_KEY_FILE
  value: {{ printf "/etc/dxts/auth/%s" .Values.auth.existingSecretKey | quote }}
- name: DXTS_AUTH_ISSUER
  value: {{ .Values.auth.issuer | quote }}
- name: DXTS_AUTH_AUDIENCE
  value: {{ .Values.auth.audience | quote }}
{{- with .Values.auth.diracx }}
{{- if .url }}
{{- if not .vos }}
{{- fail "auth.diracx.vos: name the VOs whose DiracX users may call dxts" }}
{{- end }}
- name: DXTS_AUTH_DIRACX_URL
  value: {{ .url | quote }}
- name: DXTS_AUTH_DIRACX_VOS
  value: {{ toJson .vos | quote }}
- name: DXTS_AUTH_DIRACX_KEYS_REFRESH_S
  value: {{ .keysRefreshSeconds | quote }}
{{- with .audience }}
- name: DXTS_AUTH_DIRACX_AUDIENCE
  value: {{ . | quote }}
{{- end }}
{{- with .propertyRoles }}
- name: DXTS_AUTH_DIRACX_PROPERTY_ROLES
  value: {{ toJson . | quote }}
{{- end }}
{{- with .groupRoles }}
- name: DXTS_AUTH_DIRACX_GROUP_ROLES
  value: {{ toJson . | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Annotations that roll the pods when what the chart generates for them changes. */}}
{{- define "dxts.checksums" -}}
checksum/config: {{ toJson .Values.config | sha256sum }}
checksum/auth: {{ printf "%s|%s" .Values.auth.existingSecret .Values.auth.publicKey | sha256sum }}
checksum/database: {{ printf "%s|%s" .Values.database.existingSecret (include "dxts.database.generatedUrl" .) | sha256sum }}
checksum/catalogue: {{ printf "%s|%s" .Values.catalogue.existingSecret (include "dxts.catalogue.generatedUrl" .) | sha256sum }}
{{- end -}}

{{/*
The Secret holding one component's certificate (tls.crt, tls.key, ca.crt): its own
("<fullname>-tls-<component>"), or the operator's existing one (then every component's).
*/}}
{{- define "dxts.tls.secretName" -}}
{{- .root.Values.tls.existingSecret | default (printf "%s-tls-%s" (include "dxts.fullname" .root) .component) -}}
{{- end -}}

{{/* The names one component is called by inside the cluster: its Service's short and full names. */}}
{{- define "dxts.tls.dnsNames" -}}
{{- $service := printf "%s-%s" (include "dxts.fullname" .root) .component -}}
{{- $namespace := .root.Release.Namespace -}}
{{- list "localhost" $service (printf "%s.%s" $service $namespace) (printf "%s.%s.svc" $service $namespace) (printf "%s.%s.svc.cluster.local" $service $namespace) | toJson -}}
{{- end -}}

{{/* The TLS settings of every component (DXTS_TLS_*) and its health listener. */}}
{{- define "dxts.tlsEnv" -}}
{{- if .Values.tls.enabled }}
- name: DXTS_TLS_CERT_FILE
  value: /etc/dxts/tls/tls.crt
- name: DXTS_TLS_KEY_FILE
  value: /etc/dxts/tls/tls.key
- name: DXTS_TLS_CA_FILE
  value: /etc/dxts/tls/ca.crt
- name: DXTS_TLS_REQUIRE_CLIENT_CERT
  value: {{ .Values.tls.mutual | quote }}
- name: DXTS_HEALTH_LISTEN
  value: {{ printf "%s:%d" .Values.grpc.listenHost (int .Values.tls.healthPort) | quote }}
{{- end }}
{{- end -}}
