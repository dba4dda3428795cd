{{- define "gpu-otel-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpu-otel-agent.fullname" -}}
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

{{- define "gpu-otel-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpu-otel-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpu-otel-agent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gpu-otel-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "gpu-otel-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpu-otel-agent.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret and key holding OTEL_EXPORTER_OTLP_HEADERS, if any. */}}
{{- define "gpu-otel-agent.headersSecret" -}}
{{- if .Values.otlp.existingSecret }}{{ .Values.otlp.existingSecret }}{{- else if .Values.otlp.headers }}{{ include "gpu-otel-agent.fullname" . }}-otlp{{- end }}
{{- end }}

{{/* "true" when attribution takes process events from the eBPF plugin, not netlink. */}}
{{- define "gpu-otel-agent.ebpfProcessEvents" -}}
{{- if eq .Values.ebpf.processEvents "ebpf" }}
{{- if not .Values.ebpf.enabled }}
{{- fail "ebpf.processEvents: ebpf needs ebpf.enabled: true (the events come from the eBPF plugin)" }}
{{- end }}
{{- true }}
{{- end }}
{{- end }}

{{/* The netlink process connector: host network namespace and CAP_NET_ADMIN. */}}
{{- define "gpu-otel-agent.netlinkProcessEvents" -}}
{{- if and .Values.attribution.processEvents (not (include "gpu-otel-agent.ebpfProcessEvents" .)) }}{{ true }}{{ end }}
{{- end }}

{{/* Only what an enabled feature needs; everything else is dropped. */}}
{{- define "gpu-otel-agent.capabilities" -}}
{{- $caps := list }}
{{- if include "gpu-otel-agent.netlinkProcessEvents" . }}{{ $caps = append $caps "NET_ADMIN" }}{{ end }}
{{- if .Values.health.kernelLog }}{{ $caps = append $caps "SYSLOG" }}{{ end }}
{{- if .Values.ebpf.enabled }}{{ $caps = concat $caps (list "BPF" "PERFMON" "SYS_ADMIN" "SYS_PTRACE") }}{{ end }}
{{- toJson $caps }}
{{- end }}

{{/* The agent's configuration file: the chart's settings, then .Values.config over them. */}}
{{- define "gpu-otel-agent.config" -}}
{{- $base := dict
  "export_interval" .Values.exportInterval
  "log_level" .Values.logLevel
  "prometheus" (dict
    "enabled" .Values.prometheus.enabled
    "listen" (printf "0.0.0.0:%d" (int .Values.prometheus.port))
    "scheme" .Values.prometheus.scheme
    "dcgm_exporter_version" .Values.prometheus.dcgmExporterVersion)
  "attribution" (dict
    "enabled" .Values.attribution.enabled
    "cgroup_root" "/host/sys/fs/cgroup"
    "kubelet" (dict "socket" "/var/lib/kubelet/pod-resources/kubelet.sock")
    "process_events" (ternary "ebpf" "netlink" (eq (include "gpu-otel-agent.ebpfProcessEvents" .) "true")))
  "ebpf" (dict "enabled" .Values.ebpf.enabled)
  "tracing" (dict "enabled" .Values.tracing.enabled)
  "health" (dict
    "kmsg" .Values.health.kernelLog
    "spool_path" "/var/lib/gpu-otel-agent/events"
    "spool_max_mib" .Values.health.spool.maxMiB)
-}}
{{- if .Values.prometheus.webConfig.existingSecret }}
{{- $_ := set $base.prometheus "web_config_file" "/etc/gpu-otel-agent/web/web-config.yml" }}
{{- end }}
{{- $otlp := dict "protocol" .Values.otlp.protocol "compression" .Values.otlp.compression "insecure" .Values.otlp.insecure }}
{{- if .Values.otlp.endpoint }}{{ $_ := set $otlp "endpoint" .Values.otlp.endpoint }}{{ end }}
{{- if .Values.otlp.caSecret }}{{ $_ := set $otlp "certificate" "/etc/gpu-otel-agent/otlp-ca/ca.crt" }}{{ end }}
{{- $_ := set $base "otlp" $otlp }}
{{- toYaml (mustMergeOverwrite $base (deepCopy .Values.config)) }}
{{- end }}
