{{/* Labels of every object, with the component as argument. */}}
{{- define "jobfleet.labels" -}}
app.kubernetes.io/name: jobfleet
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end }}

{{/* Selector labels: stable across upgrades. */}}
{{- define "jobfleet.selector" -}}
app.kubernetes.io/name: jobfleet
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "jobfleet.orchestrator" -}}{{ .Release.Name }}-orchestrator{{- end }}
{{- define "jobfleet.worker" -}}{{ .Release.Name }}-worker{{- end }}
{{- define "jobfleet.scheme" -}}{{ if .Values.tls.enabled }}https{{ else }}http{{ end }}{{- end }}

{{/* The majority of the orchestrators. */}}
{{- define "jobfleet.majority" -}}{{ add1 (div (int .Values.orchestrator.replicas) 2) }}{{- end }}

{{/* Probes: on the API port over HTTPS, or on the metrics port when the
     API requires client certificates (kubelet has none). */}}
{{- define "jobfleet.probePort" -}}
{{- if and .Values.tls.enabled .Values.tls.clientCASecret -}}
port: metrics
scheme: HTTP
{{- else -}}
port: api
scheme: {{ if .Values.tls.enabled }}HTTPS{{ else }}HTTP{{ end }}
{{- end -}}
{{- end }}

{{- define "jobfleet.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}
