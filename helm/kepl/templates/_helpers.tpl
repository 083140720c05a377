{{/*
Names, labels and the statement file shared by every template.
*/}}

{{/* Chart name, overridable with nameOverride. */}}
{{- define "kepl.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-qualified name (fullnameOverride, else <release>-<chart> unless the release name already holds the chart name). */}}
{{- define "kepl.fullname" -}}
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

{{- define "kepl.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every resource. */}}
{{- define "kepl.labels" -}}
helm.sh/chart: {{ include "kepl.chart" . }}
{{ include "kepl.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kepl
{{- end -}}

{{/* Labels that select this release's pods (a component label is added per workload). */}}
{{- define "kepl.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kepl.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kepl.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kepl.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kepl.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The statement file as parsed YAML; a file that does not parse or has no app fails the render. */}}
{{- define "kepl.statementsDoc" -}}
{{- $doc := fromYaml .Values.statements -}}
{{- if hasKey $doc "Error" -}}
{{- fail (printf "statements: not a YAML mapping: %s" (get $doc "Error")) -}}
{{- end -}}
{{- if not (get $doc "app") -}}
{{- fail "statements: the statement file has no 'app'" -}}
{{- end -}}
{{- toYaml $doc -}}
{{- end -}}

{{/* The app id of the statement file: it names the consumer group kepl.<app>. */}}
{{- define "kepl.app" -}}
{{- get (include "kepl.statementsDoc" . | fromYaml) "app" -}}
{{- end -}}

{{/*
The statement file as mounted: the statements value verbatim, then the chart's topic
defaults (kafka.replicationFactor, kafka.minInsyncReplicas) for keys the file leaves out.
*/}}
{{- define "kepl.statements" -}}
{{- $doc := include "kepl.statementsDoc" . | fromYaml -}}
{{- $text := trimSuffix "\n" .Values.statements -}}
{{- $extra := list -}}
{{- if and .Values.kafka.replicationFactor (not (hasKey $doc "replication_factor")) -}}
{{- $extra = append $extra (printf "replication_factor: %d" (int .Values.kafka.replicationFactor)) -}}
{{- end -}}
{{- if and .Values.kafka.minInsyncReplicas (not (hasKey $doc "min_insync_replicas")) -}}
{{- $extra = append $extra (printf "min_insync_replicas: %d" (int .Values.kafka.minInsyncReplicas)) -}}
{{- end -}}
{{- $text }}
{{- if $extra }}
# chart defaults (kafka.replicationFactor, kafka.minInsyncReplicas)
{{ join "\n" $extra }}
{{- end }}
{{ end -}}

{{/*
Partitions the workers share the work of: the largest of the statement file's
'partitions' (default 1), its numeric context_partitions and its statement_partitions, unless
workers.partitions says otherwise (topics created with more partitions beforehand).
Workers beyond this count would sit idle, so it bounds replicas and KEDA's maxReplicaCount.
*/}}
{{- define "kepl.partitions" -}}
{{- if .Values.workers.partitions -}}
{{- int .Values.workers.partitions -}}
{{- else -}}
{{- $doc := include "kepl.statementsDoc" . | fromYaml -}}
{{- $n := int (default 1 (get $doc "partitions")) -}}
{{- range $ctx, $p := (default dict (get $doc "context_partitions")) -}}
{{- if and (or (kindIs "float64" $p) (kindIs "int64" $p) (kindIs "int" $p)) (gt (int $p) $n) -}}
{{- $n = int $p -}}
{{- end -}}
{{- end -}}
{{- range $stmt, $p := (default dict (get $doc "statement_partitions")) -}}
{{- if and (or (kindIs "float64" $p) (kindIs "int64" $p) (kindIs "int" $p)) (gt (int $p) $n) -}}
{{- $n = int $p -}}
{{- end -}}
{{- end -}}
{{- $n -}}
{{- end -}}
{{- end -}}

{{/* The checksum pods carry so that a change of the statement file rolls them. */}}
{{- define "kepl.statementsChecksum" -}}
{{- include "kepl.statements" . | sha256sum -}}
{{- end -}}

{{/*
Kafka client settings of every kepl container: non-secret properties as KEPL_KAFKA_*
variables, secret ones from Secrets (secretKeyRef), and an optional properties file
from a Secret (KEPL_KAFKA_CONFIG).
*/}}
{{- define "kepl.kafkaEnv" -}}
- name: KAFKA_BOOTSTRAP_SERVERS
  value: {{ .Values.kafka.bootstrap | quote }}
{{- range $key, $value := .Values.kafka.config }}
- name: {{ printf "KEPL_KAFKA_%s" ($key | upper | replace "." "_" | replace "-" "_") }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- range .Values.kafka.secretEnv }}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .key }}
{{- end }}
{{- if .Values.kafka.configSecret.name }}
- name: KEPL_KAFKA_CONFIG
  value: /etc/kepl/kafka/{{ .Values.kafka.configSecret.key }}
{{- end }}
{{- end -}}

{{/* Volume mounts every kepl container shares (statement file at /etc/kepl/statements.yaml, /tmp, Kafka files). */}}
{{- define "kepl.commonMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.kafka.configSecret.name }}
- name: kafka-config
  mountPath: /etc/kepl/kafka
  readOnly: true
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Volumes matching kepl.commonMounts. */}}
{{- define "kepl.commonVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
{{- if .Values.kafka.configSecret.name }}
- name: kafka-config
  secret:
    secretName: {{ .Values.kafka.configSecret.name }}
    items:
      - key: {{ .Values.kafka.configSecret.key }}
        path: {{ .Values.kafka.configSecret.key }}
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}
