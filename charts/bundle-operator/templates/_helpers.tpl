{{/* The chart name. */}}
{{- define "bundle-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The full name of the release's resources, at most 63 characters. */}}
{{- define "bundle-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The embedded platform's name (its StatefulSet and Service). */}}
{{- define "bundle-operator.platformName" -}}
{{- printf "%s-platform" (include "bundle-operator.fullname" . | trunc 54 | trimSuffix "-") -}}
{{- end -}}

{{- define "bundle-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every resource. */}}
{{- define "bundle-operator.labels" -}}
helm.sh/chart: {{ include "bundle-operator.chart" . }}
{{ include "bundle-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: bundle-operator
{{- end -}}

{{- define "bundle-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bundle-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of the operator's pods and its selector. */}}
{{- define "bundle-operator.operatorSelectorLabels" -}}
{{ include "bundle-operator.selectorLabels" . }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* Labels of the embedded platform's pods and its selector. */}}
{{- define "bundle-operator.platformSelectorLabels" -}}
{{ include "bundle-operator.selectorLabels" . }}
app.kubernetes.io/component: platform
{{- end -}}

{{- define "bundle-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "bundle-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image reference: repository:tag, or repository@digest when a digest is given. */}}
{{- define "bundle-operator.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* "true" when a watched namespace is a kopf pattern (glob, negation or comma list), not a name. */}}
{{- define "bundle-operator.hasNamespacePattern" -}}
{{- $found := false -}}
{{- range .Values.watchNamespaces -}}
{{- if regexMatch "[\\[\\]!*?,]" . -}}{{- $found = true -}}{{- end -}}
{{- end -}}
{{- if $found -}}true{{- end -}}
{{- end -}}

{{/* "cluster" (ClusterRole: every namespace, or patterns) or "namespaces" (a Role in each listed one). */}}
{{- define "bundle-operator.scope" -}}
{{- if or (empty .Values.watchNamespaces) (include "bundle-operator.hasNamespacePattern" .) -}}
cluster
{{- else -}}
namespaces
{{- end -}}
{{- end -}}

{{/* "true" in standby mode: two or more replicas with leader election. */}}
{{- define "bundle-operator.standby" -}}
{{- if gt (int .Values.replicas) 1 -}}true{{- end -}}
{{- end -}}

{{- define "bundle-operator.leaderElectionId" -}}
{{- default (include "bundle-operator.fullname" .) .Values.operator.leaderElectionId -}}
{{- end -}}

{{/* "true" when the embedded reference platform is rendered. */}}
{{- define "bundle-operator.embeddedPlatform" -}}
{{- if and (empty .Values.platform.url) .Values.embeddedPlatform.enabled -}}true{{- end -}}
{{- end -}}

{{/* The embedded platform's in-cluster base URL. */}}
{{- define "bundle-operator.embeddedPlatformUrl" -}}
{{- printf "http://%s.%s.svc:%d" (include "bundle-operator.platformName" .) .Release.Namespace (int .Values.embeddedPlatform.port) -}}
{{- end -}}

{{/* The operator's default platform URL: the given one, else the embedded platform's, else none. */}}
{{- define "bundle-operator.platformUrl" -}}
{{- if .Values.platform.url -}}
{{- .Values.platform.url -}}
{{- else if include "bundle-operator.embeddedPlatform" . -}}
{{- include "bundle-operator.embeddedPlatformUrl" . -}}
{{- end -}}
{{- end -}}

{{/* Where the platform token Secret is mounted in the operator. */}}
{{- define "bundle-operator.tokenDir" -}}
/var/run/secrets/bundle-operator/platform
{{- end -}}

{{/* Metadata of a resource from values: name, namespace, the chart's labels plus the item's own,
and the item's annotations. Called with (dict "item" $item "root" $). */}}
{{- define "bundle-operator.itemMetadata" -}}
{{- $item := .item -}}
{{- $root := .root -}}
name: {{ $item.name }}
namespace: {{ default $root.Release.Namespace $item.namespace }}
{{- $labels := fromYaml (include "bundle-operator.labels" $root) }}
labels:
  {{- toYaml (mergeOverwrite $labels (default (dict) $item.labels)) | nindent 2 }}
{{- with $item.annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Seconds in a Prometheus duration of one unit ("30m", "14d"), for comparing with a timestamp's age. */}}
{{- define "bundle-operator.seconds" -}}
{{- $unit := regexFind "[smhdw]$" . -}}
{{- $factor := get (dict "s" 1 "m" 60 "h" 3600 "d" 86400 "w" 604800) $unit -}}
{{- mul (regexFind "^[0-9]+" . | int64) $factor -}}
{{- end -}}
