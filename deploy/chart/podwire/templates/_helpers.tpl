{{/*
Base name of the release's cluster-scoped objects (ClusterRoles and their bindings), so two
releases never collide: the release name, with "-podwire" appended unless it already says podwire.
Release "podwire" gives the names in scripts/kube/rbac.mjs (podwire-agent, ...).
*/}}
{{- define "podwire.fullname" -}}
{{- if contains "podwire" .Release.Name -}}
{{- .Release.Name | trunc 45 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-podwire" .Release.Name | trunc 45 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount the agent runs as. */}}
{{- define "podwire.serviceAccountName" -}}
{{- include "podwire.fullname" . -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "podwire.labels" -}}
app.kubernetes.io/name: podwire
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | quote }}
{{- end -}}

{{/*
The image reference: <hub>/<image>:<tag>; <image>:<tag> when image has a "/" or no hub is set;
an image with a "/" and its own tag or digest is used as given (as Istio's chart uses one with a "/").
*/}}
{{- define "podwire.image" -}}
{{- $hub := .Values.hub | default .Values.global.hub -}}
{{- $tag := .Values.tag | default .Values.global.tag | default .Chart.AppVersion -}}
{{- if and (contains "/" .Values.image) (or (contains "@" .Values.image) (contains ":" (last (splitList "/" .Values.image)))) -}}
{{- .Values.image -}}
{{- else if or (contains "/" .Values.image) (not $hub) -}}
{{- printf "%s:%s" .Values.image $tag -}}
{{- else -}}
{{- printf "%s/%s:%s" $hub .Values.image $tag -}}
{{- end -}}
{{- end -}}

{{/*
Settings the chart cannot express: the agent would refuse them at start (exit 2), so refuse
them at install instead, naming the value.
*/}}
{{- define "podwire.validate" -}}
{{- if not .Values.ambient.enabled -}}
{{- fail "ambient.enabled=false: podwire's agent runs ambient mode only (AMBIENT_ENABLED must be true); there is no sidecar-only mode" -}}
{{- end -}}
{{- if not (has .Values.forceIptablesBinary (list "" "legacy" "nft")) -}}
{{- fail (printf "forceIptablesBinary=%q: must be \"\", legacy or nft" .Values.forceIptablesBinary) -}}
{{- end -}}
{{- end -}}

{{/* global.resourceScope: "true" when the release renders its namespaced objects. */}}
{{- define "podwire.namespaced" -}}
{{- if has .Values.global.resourceScope (list "all" "namespace") }}true{{ end -}}
{{- end -}}

{{/* global.resourceScope: "true" when the release renders its cluster-scoped objects (ClusterRoles, bindings). */}}
{{- define "podwire.clusterScoped" -}}
{{- if has .Values.global.resourceScope (list "all" "cluster") }}true{{ end -}}
{{- end -}}

{{/* The platform profile in use ("" when none). */}}
{{- define "podwire.platform" -}}
{{- coalesce .Values.platform .Values.global.platform | default "" -}}
{{- end -}}
