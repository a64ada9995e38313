{{/* Names and labels shared by every template. */}}
{{- define "cairn.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cairn.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "cairn.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "cairn.labels" -}}
app.kubernetes.io/name: {{ include "cairn.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "cairn.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cairn.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end -}}

{{/* The headless Service: one DNS record per replica (the proxy's endpoints). */}}
{{- define "cairn.headless" -}}
{{- printf "%s-replicas" (include "cairn.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cairn.metricsService" -}}
{{- printf "%s-metrics" (include "cairn.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cairn.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "cairn.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "cairn.authSecret" -}}
{{- default (printf "%s-auth" (include "cairn.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{- define "cairn.snapshotKeySecret" -}}
{{- default (printf "%s-snapshot-key" (include "cairn.fullname" .)) .Values.snapshotKey.existingSecret -}}
{{- end -}}

{{- define "cairn.tlsSecret" -}}
{{- default (printf "%s-tls" (include "cairn.fullname" .)) .Values.tls.existingSecret -}}
{{- end -}}

{{- define "cairn.sessionsClaim" -}}
{{- default (printf "%s-sessions" (include "cairn.fullname" .)) .Values.sharedSessions.existingClaim -}}
{{- end -}}

{{/*
The image. Values are read as Helm reads them (numbers are floats), so a
number never goes into a string through printf "%d" or plain printing:
`int` converts it first (2592000 would print as 2.592e+06).
*/}}
{{- define "cairn.image" -}}
{{- $repo := required "image.repository is required: the registry and name of the image you built and pushed (e.g. registry.example.com/team/cairn); cairn's image is on no public registry, see the README's First day" .Values.image.repository -}}
{{- if not (regexMatch "^(localhost(:[0-9]+)?|[^/]*[.:][^/]*)/[^:@]+$" $repo) -}}
{{- fail (printf "image.repository %q names no registry: give the registry host the cluster pulls from, e.g. registry.example.com/team/cairn (a bare name would be looked up on Docker Hub, where cairn is not)" $repo) -}}
{{- end -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion (toString .Values.image.tag)) -}}
{{- end -}}

{{/* The affinity proxy's address (clients and the drain). */}}
{{- define "cairn.proxyAddress" -}}
{{- if .Values.drainOnStop.target -}}
{{- .Values.drainOnStop.target -}}
{{- else -}}
{{- printf "%s-proxy:%d" (include "cairn.fullname" .) (int .Values.proxy.envoy.port) -}}
{{- end -}}
{{- end -}}

{{/* cairn-cli's connection flags for the container's own server (the drain). */}}
{{- define "cairn.cliFlags" -}}
"--server=127.0.0.1:50051"
{{- if .Values.tls.enabled }}, "--tls-ca=/etc/cairn/tls/ca.crt", "--tls-server-name={{ default "localhost" .Values.tls.serverName }}"{{ end }}
{{- if .Values.tls.requireClientCerts }}, "--tls-cert=/etc/cairn/tls/tls.crt", "--tls-key=/etc/cairn/tls/tls.key"{{ end }}
{{- end -}}

{{/*
--shutdown-grace: what terminationGracePeriodSeconds leaves after the disk
tier's writes at exit, the drain's budget and 5 s for the process to exit.
*/}}
{{- define "cairn.shutdownGrace" -}}
{{- $grace := int .Values.server.shutdownGraceSeconds -}}
{{- if eq $grace 0 -}}
{{- $grace = sub (int .Values.terminationGracePeriodSeconds) (add (int .Values.server.shutdownPersistSeconds) 5) -}}
{{- if .Values.drainOnStop.enabled -}}
{{- $grace = sub $grace (int .Values.drainOnStop.budgetSeconds) -}}
{{- end -}}
{{- if lt $grace 1 -}}
{{- fail (printf "terminationGracePeriodSeconds=%d leaves no time for running calls after shutdownPersistSeconds, drainOnStop.budgetSeconds and 5 s to exit: raise it or set server.shutdownGraceSeconds" (int .Values.terminationGracePeriodSeconds)) -}}
{{- end -}}
{{- end -}}
{{- $grace -}}
{{- end -}}

{{/* The families the image loads (CAIRN_BACKENDS). */}}
{{- define "cairn.backends" -}}
{{- if .Values.backends -}}
{{- range .Values.backends -}}
{{- if not (has . (list "transformer" "swa" "recurrent" "hybrid")) -}}
{{- fail (printf "backends: unknown family %q (the image has transformer, swa, recurrent, hybrid)" .) -}}
{{- end -}}
{{- end -}}
{{- range $.Values.models -}}
{{- if and .family (not (has .family $.Values.backends)) -}}
{{- fail (printf "models: %s is of family %q, which backends does not load (%s)" .name .family (join ", " $.Values.backends)) -}}
{{- end -}}
{{- end -}}
{{- join "," .Values.backends -}}
{{- else -}}
all
{{- end -}}
{{- end -}}

{{/*
Readiness from the HTTP API's GET /health (200 serving, 503 draining), over
HTTPS with tls.enabled (the kubelet does not verify the certificate).
*/}}
{{- define "cairn.httpReadiness" -}}
readinessProbe:
  httpGet:
    path: /health
    port: http
    scheme: {{ if .Values.tls.enabled }}HTTPS{{ else }}HTTP{{ end }}
  periodSeconds: {{ int .Values.probes.periodSeconds }}
{{- end }}
