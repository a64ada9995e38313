{{/* Names and labels shared by every template. */}}
{{- define "cairn.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cairn.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "cairn.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end -}}

{{/* The headless Service: one DNS record per replica (the proxy's endpoints). */}}
{{- define "cairn.headless" -}}
{{- printf "%s-replicas" (include "cairn.fullname" .) | trunc 63 | trimSuffix "-" -}}
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

{{/* Where clients (and a drain) reach the affinity proxy. */}}
{{- define "cairn.proxyAddress" -}}
{{- if .Values.drainOnStop.target -}}
{{- .Values.drainOnStop.target -}}
{{- else -}}
{{- printf "%s-proxy:%d" (include "cairn.fullname" .) (int .Values.proxy.envoy.port) -}}
{{- end -}}
{{- end -}}

{{/* cairn-cli's connection flags for the container's own server. */}}
{{- define "cairn.cliFlags" -}}
"--server=127.0.0.1:50051"
{{- if .Values.tls.enabled }}, "--tls-ca=/etc/cairn/tls/ca.crt", "--tls-server-name={{ default "localhost" .Values.tls.serverName }}"{{ end }}
{{- if .Values.tls.requireClientCerts }}, "--tls-cert=/etc/cairn/tls/tls.crt", "--tls-key=/etc/cairn/tls/tls.key"{{ end }}
{{- end -}}
