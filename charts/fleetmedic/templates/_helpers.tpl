{{/* Names and labels shared by every template. */}}

{{- define "fleetmedic.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "fleetmedic.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "fleetmedic.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "fleetmedic.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of one component: include with (dict "ctx" . "component" "server"). */}}
{{- define "fleetmedic.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetmedic.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "fleetmedic.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* True (non-empty) when the server uses an external PostgreSQL rather than SQLite on a volume. */}}
{{- define "fleetmedic.externalDatabase" -}}
{{- if or .Values.database.url .Values.database.existingSecret }}true{{ end }}
{{- end }}

{{- define "fleetmedic.kubernetesMode" -}}
{{- if eq .Values.mode "kubernetes" }}true{{ end }}
{{- end }}

{{- define "fleetmedic.agentEnabled" -}}
{{- if and (eq .Values.mode "kubernetes") .Values.agent.enabled }}true{{ end }}
{{- end }}

{{- define "fleetmedic.serverServiceAccount" -}}
{{- if .Values.serviceAccount.create }}
{{- default (printf "%s-server" (include "fleetmedic.fullname" .)) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the tokens, and the one holding the database URL. */}}
{{- define "fleetmedic.authSecret" -}}
{{- default (include "fleetmedic.fullname" .) .Values.auth.existingSecret }}
{{- end }}

{{- define "fleetmedic.databaseSecret" -}}
{{- default (include "fleetmedic.fullname" .) .Values.database.existingSecret }}
{{- end }}

{{/* Does the chart render its own Secret? (tokens unless existing, database URL unless existing) */}}
{{- define "fleetmedic.ownSecret" -}}
{{- if or (not .Values.auth.existingSecret) (and .Values.database.url (not .Values.database.existingSecret)) }}true{{ end }}
{{- end }}

{{/* Extra settings: a map of setting name -> value becomes FLEETMEDIC_<NAME> variables. */}}
{{- define "fleetmedic.settingsEnv" -}}
{{- range $name, $value := . }}
- name: {{ printf "FLEETMEDIC_%s" ($name | upper) }}
  value: {{ kindIs "slice" $value | ternary (join "," $value) (toString $value) | quote }}
{{- end }}
{{- end }}

{{/* The server's database URL variable. */}}
{{- define "fleetmedic.databaseEnv" -}}
- name: FLEETMEDIC_DATABASE_URL
{{- if include "fleetmedic.externalDatabase" . }}
  valueFrom:
    secretKeyRef:
      name: {{ include "fleetmedic.databaseSecret" . }}
      key: {{ ternary .Values.database.existingSecretKey "database-url" (not (empty .Values.database.existingSecret)) }}
{{- else }}
  value: "sqlite:////var/lib/fleetmedic/fleetmedic.db"
{{- end }}
{{- end }}
