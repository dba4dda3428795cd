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

{{/* Where every namespaced object goes: namespaceOverride (as in NVIDIA's dcgm-exporter
chart, for umbrella charts that install into several namespaces), else the release's. */}}
{{- define "gpu-otel-agent.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{/* "true" when the pod shares the host's network namespace: asked for (hostNetwork), or
needed by the netlink process connector. */}}
{{- define "gpu-otel-agent.hostNetwork" -}}
{{- if or .Values.hostNetwork (include "gpu-otel-agent.netlinkProcessEvents" .) }}{{ true }}{{ end }}
{{- end }}

{{/* The pod's securityContext: RuntimeDefault seccomp, podSecurityContext merged over it. */}}
{{- define "gpu-otel-agent.podSecurityContext" -}}
{{- toYaml (mustMergeOverwrite (dict "seccompProfile" (dict "type" "RuntimeDefault")) (deepCopy .Values.podSecurityContext)) }}
{{- end }}

{{/* The agent container's securityContext (the DaemonSet's and the helm test's): root
without capabilities, enough to read the root-owned kubelet socket and /proc of other
users' processes (hostPID), plus what an enabled feature needs; securityContext merged over
it (a list such as capabilities.add given there replaces the chart's). */}}
{{- define "gpu-otel-agent.securityContext" -}}
{{- $caps := include "gpu-otel-agent.capabilities" . | fromJsonArray -}}
{{- $capabilities := dict "drop" (list "ALL") -}}
{{- if $caps }}{{ $_ := set $capabilities "add" $caps }}{{ end -}}
{{- $base := dict "runAsUser" 0 "runAsNonRoot" false "privileged" false "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" $capabilities -}}
{{- toYaml (mustMergeOverwrite $base (deepCopy .Values.securityContext)) }}
{{- end }}

{{/* The endpoint settings shared by the ServiceMonitor and the PodMonitor (Prometheus
Operator spells them alike): honorLabels defaults to true in the dcgm schemes, whose series
carry their own pod/namespace/container labels (the workload's), which the target's labels
would otherwise rename exported_pod...; the node relabeling, then the user's. */}}
{{- define "gpu-otel-agent.monitorEndpoint" -}}
{{- $m := .monitor -}}
{{- $honor := $m.honorLabels -}}
{{- if kindIs "invalid" $honor }}{{ $honor = hasPrefix "dcgm" .root.Values.prometheus.scheme }}{{ end -}}
{{- $relabelings := prepend (default (list) $m.relabelings) (dict "sourceLabels" (list "__meta_kubernetes_pod_node_name") "targetLabel" "node" "action" "replace") -}}
{{- $endpoint := dict "port" "metrics" "path" "/metrics" "interval" $m.interval "scrapeTimeout" $m.scrapeTimeout "honorLabels" $honor "relabelings" $relabelings -}}
{{- with $m.metricRelabelings }}{{ $_ := set $endpoint "metricRelabelings" . }}{{ end -}}
{{- if not (kindIs "invalid" $m.honorTimestamps) }}{{ $_ := set $endpoint "honorTimestamps" $m.honorTimestamps }}{{ end -}}
{{- toYaml (mustMergeOverwrite $endpoint (deepCopy (default (dict) $m.endpoint))) }}
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
  "local_endpoint" (dict
    "enabled" .Values.localEndpoint.enabled
    "socket" "/run/gpu-otel-agent/agent.sock")
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

{{/* The agent container's environment (the DaemonSet's agent and the helm test's check). */}}
{{- define "gpu-otel-agent.env" -}}
{{- $headers := include "gpu-otel-agent.headersSecret" . -}}
- name: K8S_NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: POD_UID
  valueFrom:
    fieldRef:
      fieldPath: metadata.uid
# The agent's own pod, for the gateway's k8s_attributes: by UID first (the processor
# never associates a host-network pod by IP, which all such pods of a node share),
# then by IP. Not k8s.pod.name: that name is on every workload data point, and a
# resource attribute of the same name would clash with it wherever resource attributes
# are promoted to labels (the gateway deletes the UID once it has served).
- name: OTEL_RESOURCE_ATTRIBUTES
  value: "k8s.pod.ip=$(POD_IP),k8s.pod.uid=$(POD_UID)"
# NVIDIA container toolkit: inject the driver's management library (NVML), no
# compute; every GPU, since the agent watches them all.
- name: NVIDIA_VISIBLE_DEVICES
  value: all
- name: NVIDIA_DRIVER_CAPABILITIES
  value: utility
{{- if $headers }}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef:
      name: {{ $headers }}
      key: {{ .Values.otlp.existingSecretKey }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The agent container's mounts (the DaemonSet's agent and the helm test's check). */}}
{{- define "gpu-otel-agent.volumeMounts" -}}
- name: config
  mountPath: /etc/gpu-otel-agent
  readOnly: true
- name: tmp
  mountPath: /tmp
- name: host-cgroup
  mountPath: /host/sys/fs/cgroup
  readOnly: true
  mountPropagation: HostToContainer
- name: spool
  mountPath: /var/lib/gpu-otel-agent
{{- if .Values.attribution.enabled }}
- name: pod-resources
  mountPath: /var/lib/kubelet/pod-resources
  readOnly: true
{{- range $i, $dir := .Values.attribution.cdiSpecDirs }}
- name: cdi-{{ $i }}
  mountPath: {{ $dir }}
  readOnly: true
{{- end }}
{{- end }}
{{- if .Values.health.kernelLog }}
- name: kmsg
  mountPath: /dev/kmsg
  readOnly: true
{{- end }}
{{- if .Values.prometheus.webConfig.existingSecret }}
- name: web-config
  mountPath: /etc/gpu-otel-agent/web
  readOnly: true
{{- end }}
{{- if .Values.otlp.caSecret }}
- name: otlp-ca
  mountPath: /etc/gpu-otel-agent/otlp-ca
  readOnly: true
{{- end }}
{{- if .Values.localEndpoint.enabled }}
# The read-only socket of gpu-agent top / check: a host directory (0755, made by
# the kubelet), so root on the node can attach too.
- name: local-endpoint
  mountPath: /run/gpu-otel-agent
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The pod's volumes (the DaemonSet's and the helm test's). */}}
{{- define "gpu-otel-agent.volumes" -}}
- name: config
  configMap:
    name: {{ include "gpu-otel-agent.fullname" . }}
- name: tmp
  emptyDir:
    medium: Memory
    sizeLimit: 16Mi
- name: host-cgroup
  hostPath:
    path: {{ .Values.hostCgroupRoot }}
    type: Directory
- name: spool
  hostPath:
    path: {{ .Values.health.spool.hostPath }}
    type: DirectoryOrCreate
{{- if .Values.attribution.enabled }}
- name: pod-resources
  hostPath:
    path: {{ .Values.attribution.kubeletSocketDir }}
    type: Directory
{{- range $i, $dir := .Values.attribution.cdiSpecDirs }}
# CDI spec directory (Kubernetes DRA); made empty where the node has none yet, so
# specs written later are seen.
- name: cdi-{{ $i }}
  hostPath:
    path: {{ $dir }}
    type: DirectoryOrCreate
{{- end }}
{{- end }}
{{- if .Values.health.kernelLog }}
- name: kmsg
  hostPath:
    path: /dev/kmsg
    type: CharDevice
{{- end }}
{{- if .Values.prometheus.webConfig.existingSecret }}
- name: web-config
  secret:
    secretName: {{ .Values.prometheus.webConfig.existingSecret }}
{{- end }}
{{- if .Values.otlp.caSecret }}
- name: otlp-ca
  secret:
    secretName: {{ .Values.otlp.caSecret }}
{{- end }}
{{- if .Values.localEndpoint.enabled }}
- name: local-endpoint
  hostPath:
    path: {{ .Values.localEndpoint.hostPath }}
    type: DirectoryOrCreate
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}
