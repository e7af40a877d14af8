{{/* Labels of every object. scripts/chart drops the three Helm lines when it renders manifests/. */}}
{{- define "gangplank.labels" -}}
app.kubernetes.io/name: gangplank
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The image reference: by digest when one is given, else by tag (the appVersion by default). */}}
{{- define "gangplank.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
{{- end }}

{{/* A webhook's clientConfig for PATH: the gangplank Service, or webhooks.url. */}}
{{- define "gangplank.webhookClient" -}}
{{- if .root.Values.webhooks.url -}}
{{- if not (regexMatch "^https://[^/|]+$" .root.Values.webhooks.url) -}}
{{- fail (printf "webhooks.url must be https://HOST:PORT with no path, not %q" .root.Values.webhooks.url) -}}
{{- end -}}
url: {{ .root.Values.webhooks.url }}{{ .path }}
{{- else -}}
service: {namespace: {{ .root.Release.Namespace }}, name: gangplank, port: {{ .root.Values.webhooks.port }}, path: {{ .path }}}{{ include "gangplank.toFill" .root }}
{{- end }}
caBundle: {{ include "gangplank.caBundle" .root | quote }}{{ include "gangplank.toFill" .root }}
{{- end }}

{{/*
The marker of a line webhooks/render.sh fills in: rendered without a CA bundle (as
webhooks/*.yaml are), the caBundle and the Service client config are left to it.
*/}}
{{- define "gangplank.toFill" -}}
{{- if not (include "gangplank.caBundle" .) }} # substituted by webhooks/render.sh{{ end -}}
{{- end }}

{{/*
The certificates, made once per render and kept in .Values.__certs for every template: those of
the Secrets already installed (an upgrade keeps them), else new ones. The CA's key is not kept:
to renew, delete both Secrets and upgrade, then give the scheduler the new CA and client
certificate. genSignedCert gives every certificate both server and client usage (it takes no
usage argument), so the serving certificate could pass the extender's client CA check: the
extender also demands the client's common name, system:kube-scheduler
(--extender-client-name), which only the scheduler's certificate carries.
*/}}
{{- define "gangplank.certs" -}}
{{- if not (hasKey .Values "__certs") -}}
{{- $serving := lookup "v1" "Secret" .Release.Namespace "gangplank-tls" -}}
{{- $client := lookup "v1" "Secret" .Release.Namespace "gangplank-scheduler-client" -}}
{{- $certs := dict -}}
{{- if and $serving $client (index $serving.data "ca.crt") -}}
{{- $_ := set $certs "ca" (index $serving.data "ca.crt" | b64dec) -}}
{{- $_ := set $certs "cert" (index $serving.data "tls.crt" | b64dec) -}}
{{- $_ := set $certs "key" (index $serving.data "tls.key" | b64dec) -}}
{{- $_ := set $certs "clientCert" (index $client.data "tls.crt" | b64dec) -}}
{{- $_ := set $certs "clientKey" (index $client.data "tls.key" | b64dec) -}}
{{- else -}}
{{- $days := int .Values.tls.validityDays -}}
{{- $ca := genCA "gangplank-ca" $days -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list "localhost" -}}
{{- range $service := list "gangplank" "gangplank-extender" -}}
{{- $names = append $names (printf "%s.%s.svc" $service $ns) -}}
{{- $names = append $names (printf "%s.%s.svc.cluster.local" $service $ns) -}}
{{- end -}}
{{- $ips := list "127.0.0.1" -}}
{{- with .Values.extender.clusterIP }}{{ $ips = append $ips . }}{{ end -}}
{{- $cert := genSignedCert (printf "gangplank.%s.svc" $ns) $ips $names $days $ca -}}
{{- $clientCert := genSignedCert "system:kube-scheduler" nil nil $days $ca -}}
{{- $_ := set $certs "ca" $ca.Cert -}}
{{- $_ := set $certs "cert" $cert.Cert -}}
{{- $_ := set $certs "key" $cert.Key -}}
{{- $_ := set $certs "clientCert" $clientCert.Cert -}}
{{- $_ := set $certs "clientKey" $clientCert.Key -}}
{{- end -}}
{{- $_ := set .Values "__certs" $certs -}}
{{- end -}}
{{- end }}

{{/* base64 of the CA that signed Gangplank's serving certificate, for the webhooks' caBundle. */}}
{{- define "gangplank.caBundle" -}}
{{- if .Values.tls.generate -}}
{{- include "gangplank.certs" . -}}
{{- .Values.__certs.ca | b64enc -}}
{{- else -}}
{{- .Values.tls.caBundle -}}
{{- end -}}
{{- end }}

{{/*
The pod network's CIDRs as the cluster tells them at install, for the NetworkPolicy when neither
networkPolicy.controlPlaneCIDRs nor networkPolicy.podCIDRs is set: kubeadm's podSubnet
(ConfigMap kube-system/kubeadm-config), else kube-proxy's clusterCIDR (kube-system/kube-proxy),
else every node's spec.podCIDRs (set where the controller manager allocates them). Returns JSON
{"source": "...", "cidrs": [...]}; no CIDR under `helm template` without --dry-run=server (no
cluster to ask), with networkPolicy.learnPodCIDRs false, or when none of the three says.
*/}}
{{- define "gangplank.learnedPodCIDRs" -}}
{{- $learned := dict "source" "" "cidrs" list -}}
{{- if .Values.networkPolicy.learnPodCIDRs -}}
{{- $kubeadm := lookup "v1" "ConfigMap" "kube-system" "kubeadm-config" -}}
{{- $proxy := lookup "v1" "ConfigMap" "kube-system" "kube-proxy" -}}
{{- $subnet := "" -}}
{{- with $kubeadm }}{{ with .data }}{{ with index . "ClusterConfiguration" -}}
{{- $subnet = (fromYaml .).networking.podSubnet | default "" -}}
{{- end }}{{ end }}{{ end -}}
{{- if $subnet -}}
{{- $_ := set $learned "source" "kubeadm's podSubnet (kube-system/kubeadm-config)" -}}
{{- else -}}
{{- with $proxy }}{{ with .data }}{{ with index . "config.conf" -}}
{{- $subnet = (fromYaml .).clusterCIDR | default "" -}}
{{- end }}{{ end }}{{ end -}}
{{- if $subnet }}{{ $_ := set $learned "source" "kube-proxy's clusterCIDR (kube-system/kube-proxy)" }}{{ end -}}
{{- end -}}
{{- $cidrs := list -}}
{{- range splitList "," $subnet }}{{ with trim . }}{{ $cidrs = append $cidrs . }}{{ end }}{{ end -}}
{{- if not $cidrs -}}
{{- range (lookup "v1" "Node" "" "").items | default list -}}
{{- range .spec.podCIDRs | default list }}{{ $cidrs = append $cidrs . }}{{ end -}}
{{- end -}}
{{- if $cidrs }}{{ $_ := set $learned "source" "the nodes' spec.podCIDRs" }}{{ end -}}
{{- end -}}
{{- $_ := set $learned "cidrs" (uniq $cidrs) -}}
{{- end -}}
{{- toJson $learned -}}
{{- end }}
