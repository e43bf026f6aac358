package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// strictDecoder decodes Kubernetes objects (built-in kinds and the
// Prometheus Operator's) into their API types, failing on unknown and
// duplicate fields.
var strictDecoder = func() runtime.Decoder {
	sch := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(sch); err != nil {
		panic(err)
	}
	if err := monitoringv1.AddToScheme(sch); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(sch, serializer.EnableStrict).UniversalDeserializer()
}()

// decodeObjects decodes every YAML document of data strictly.
func decodeObjects(where string, data []byte) ([]runtime.Object, error) {
	var objs []runtime.Object
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", where, i, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := strictDecoder.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", where, i, err)
		}
		objs = append(objs, obj)
	}
}

// stripComments removes YAML comment lines.
func stripComments(doc []byte) []byte {
	var out bytes.Buffer
	for line := range strings.Lines(string(doc)) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			out.WriteString(line)
		}
	}
	return out.Bytes()
}

// decodeFiles decodes every .yaml file of dir (not its subdirectories).
func decodeFiles(t *testing.T, dir string) []runtime.Object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	var all []runtime.Object
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeObjects(f, data)
		if err != nil {
			t.Error(err)
			continue
		}
		all = append(all, objs...)
	}
	return all
}

// secretKeys returns the keys of the Secrets among objs, by name.
func secretKeys(objs []runtime.Object) map[string]map[string]bool {
	keys := map[string]map[string]bool{}
	for _, o := range objs {
		s, ok := o.(*corev1.Secret)
		if !ok {
			continue
		}
		keys[s.Name] = map[string]bool{}
		for k := range s.StringData {
			keys[s.Name][k] = true
		}
		for k := range s.Data {
			keys[s.Name][k] = true
		}
	}
	return keys
}

// fleetShape is what checkFleet found, for comparisons between the
// manifests and the chart.
type fleetShape struct {
	orchestratorArgs []string
	workerArgs       []string
	// orchestratorFlags and workerFlags are the settings each sets, from
	// its arguments, variables and config file.
	orchestratorFlags map[string]string
	workerFlags       map[string]string
	kinds             map[string]int
}

// checkFleet checks the objects of one way of deploying a fleet on
// Kubernetes: that the orchestrators and workers run the binary with its
// real flags, that probes, ports, Services, mounts, Secrets and the
// disruption budget agree, and that everything runs hardened. secrets
// gives the keys of the Secrets the pods may mount.
func checkFleet(t reporter, where string, objs []runtime.Object, secrets map[string]map[string]bool) fleetShape {
	t.Helper()
	shape := fleetShape{kinds: map[string]int{}}
	var (
		pods     []podOf
		services []*corev1.Service
		pdbs     []*policyv1.PodDisruptionBudget
		policies []*networkingv1.NetworkPolicy
		configs  = map[string]map[string]string{} // ConfigMaps' data, by name
	)
	for _, o := range objs {
		switch v := o.(type) {
		case *appsv1.StatefulSet:
			shape.kinds["StatefulSet"]++
			pods = append(pods, podOf{where: where + " StatefulSet " + v.Name, kind: "StatefulSet", replicas: v.Spec.Replicas, selector: v.Spec.Selector.MatchLabels, spec: v.Spec.Template.Spec, labels: v.Spec.Template.Labels})
			if v.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
				t.Errorf("%s StatefulSet %s: update strategy %q, want RollingUpdate", where, v.Name, v.Spec.UpdateStrategy.Type)
			}
		case *appsv1.Deployment:
			shape.kinds["Deployment"]++
			pods = append(pods, podOf{where: where + " Deployment " + v.Name, kind: "Deployment", replicas: v.Spec.Replicas, selector: v.Spec.Selector.MatchLabels, spec: v.Spec.Template.Spec, labels: v.Spec.Template.Labels})
		case *corev1.Service:
			shape.kinds["Service"]++
			services = append(services, v)
		case *policyv1.PodDisruptionBudget:
			shape.kinds["PodDisruptionBudget"]++
			pdbs = append(pdbs, v)
		case *networkingv1.NetworkPolicy:
			shape.kinds["NetworkPolicy"]++
			policies = append(policies, v)
		case *corev1.ConfigMap:
			shape.kinds["ConfigMap"]++
			configs[v.Name] = v.Data
		case *monitoringv1.ServiceMonitor:
			shape.kinds["ServiceMonitor"]++
		case *monitoringv1.PrometheusRule:
			shape.kinds["PrometheusRule"]++
		default:
			shape.kinds[fmt.Sprintf("%T", o)]++
		}
	}
	for _, p := range pods {
		r, args := p.check(t, secrets, configs)
		switch r.command {
		case "orchestrator":
			shape.orchestratorArgs, shape.orchestratorFlags = args, r.flags
			if p.kind != "StatefulSet" {
				t.Errorf("%s: orchestrators run as a %s, want a StatefulSet (stable IDs)", p.where, p.kind)
			}
			checkPDB(t, p, pdbs)
			checkOrchestratorService(t, p, r, services)
		case "worker":
			shape.workerArgs, shape.workerFlags = args, r.flags
			if p.kind != "Deployment" {
				t.Errorf("%s: workers run as a %s, want a Deployment", p.where, p.kind)
			}
		default:
			t.Errorf("%s: runs jobfleet %q, want orchestrator or worker", p.where, r.command)
		}
	}
	for _, s := range services {
		checkService(t, where, s, pods)
	}
	for _, np := range policies {
		sel := labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels)
		if np.Namespace != "" && np.Namespace != "jobfleet" && np.Namespace != pods[0].namespace() {
			continue // a policy for another namespace (etcd's)
		}
		if len(np.Spec.PodSelector.MatchLabels) == 0 {
			continue
		}
		matched := false
		for _, p := range pods {
			if sel.Matches(labels.Set(p.labels)) {
				matched = true
			}
		}
		if !matched {
			t.Errorf("%s NetworkPolicy %s selects no pod", where, np.Name)
		}
	}
	if len(pods) != 2 {
		t.Errorf("%s: %d workloads, want the orchestrators and the workers", where, len(pods))
	}
	return shape
}

// podOf is the pod template of a workload.
type podOf struct {
	where    string
	kind     string
	replicas *int32
	selector map[string]string
	labels   map[string]string
	spec     corev1.PodSpec
}

func (p podOf) namespace() string { return "jobfleet" }

// k8sRef matches the $(VAR) references Kubernetes expands in arguments.
var k8sRef = regexp.MustCompile(`\$\(([A-Z_][A-Z0-9_]*)\)`)

// check checks the pod's one jobfleet container and returns the flags it
// sets and its arguments. configs holds the data of the ConfigMaps the
// pod may mount, by name.
func (p podOf) check(t reporter, secrets map[string]map[string]bool, configs map[string]map[string]string) (resolved, []string) {
	t.Helper()
	if !labels.SelectorFromSet(p.selector).Matches(labels.Set(p.labels)) {
		t.Errorf("%s: selector %v does not match the template's labels %v", p.where, p.selector, p.labels)
	}
	sc := p.spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil {
		t.Errorf("%s: want runAsNonRoot and a seccomp profile", p.where)
	}
	if p.spec.AutomountServiceAccountToken == nil || *p.spec.AutomountServiceAccountToken {
		t.Errorf("%s: the service account token is mounted; jobfleet does not use the Kubernetes API", p.where)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range p.spec.Volumes {
		volumes[v.Name] = v
	}
	for _, c := range append(append([]corev1.Container{}, p.spec.InitContainers...), p.spec.Containers...) {
		cs := c.SecurityContext
		if cs == nil || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation ||
			cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem || cs.Capabilities == nil || len(cs.Capabilities.Drop) == 0 {
			t.Errorf("%s container %s: want no privilege escalation, a read-only root file system and capabilities dropped", p.where, c.Name)
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s container %s: want memory requests and limits", p.where, c.Name)
		}
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				t.Errorf("%s container %s: mounts volume %q, which the pod lacks", p.where, c.Name, m.Name)
			}
		}
	}
	if len(p.spec.Containers) != 1 {
		t.Errorf("%s: %d containers, want 1", p.where, len(p.spec.Containers))
		return resolved{}, nil
	}
	c := p.spec.Containers[0]
	if len(c.Command) > 0 {
		t.Errorf("%s: the container overrides the image's entry point (%q); give the command in args", p.where, c.Command)
	}
	env := map[string]string{}
	defined := map[string]bool{}
	for _, e := range c.Env {
		defined[e.Name] = true
		if strings.HasPrefix(e.Name, "JOBFLEET_") {
			env[e.Name] = e.Value
		}
	}
	for _, a := range c.Args {
		for _, m := range k8sRef.FindAllStringSubmatch(a, -1) {
			if !defined[m[1]] {
				t.Errorf("%s: argument %q refers to $(%s), which the container does not define", p.where, a, m[1])
			}
		}
	}
	files := map[string]string{}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok || v.ConfigMap == nil {
			continue
		}
		data, ok := configs[v.ConfigMap.Name]
		if !ok {
			t.Errorf("%s: volume %s mounts ConfigMap %s, which is not deployed", p.where, m.Name, v.ConfigMap.Name)
			continue
		}
		for key, content := range data {
			files[filepath.Join(m.MountPath, key)] = content
		}
	}
	r := invocation{where: p.where, args: c.Args, env: env, files: files}.check(t)

	// Every file a flag names is in a mounted volume (a Secret with
	// that key, or a volume the pod writes).
	for _, name := range sortedKeys(r.flags) {
		v := r.flags[name]
		if !strings.HasPrefix(v, "/") || strings.Contains(name, "namespace") {
			continue
		}
		checkMountedFile(t, p.where+" --"+name, v, c, volumes, secrets)
	}

	ports := map[string]int32{}
	for _, cp := range c.Ports {
		ports[cp.Name] = cp.ContainerPort
	}
	listenPort := func(flag string) int32 {
		v, ok := r.flags[flag]
		if !ok {
			return 0
		}
		_, port, err := net.SplitHostPort(v)
		if err != nil {
			t.Errorf("%s: --%s=%s: %v", p.where, flag, v, err)
			return 0
		}
		var n int32
		fmt.Sscan(port, &n)
		return n
	}
	api, metrics := listenPort("listen"), listenPort("metrics-listen")
	for name, port := range ports {
		if port != api && port != metrics {
			t.Errorf("%s: container port %s (%d) is neither --listen nor --metrics-listen", p.where, name, port)
		}
	}
	apiTLS := r.has("tls-cert")
	clientCerts := r.has("tls-client-ca")
	probe := func(kind string, pr *corev1.Probe, path string) {
		if pr == nil || pr.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", p.where, kind)
			return
		}
		g := pr.HTTPGet
		if g.Path != path {
			t.Errorf("%s: %s probe path %q, want %q", p.where, kind, g.Path, path)
		}
		port := g.Port.IntVal
		if g.Port.Type == intstr.String {
			var ok bool
			if port, ok = ports[g.Port.StrVal]; !ok {
				t.Errorf("%s: %s probe port %q is no container port", p.where, kind, g.Port.StrVal)
				return
			}
		}
		switch {
		case port == metrics && metrics != 0:
			if g.Scheme != corev1.URISchemeHTTP {
				t.Errorf("%s: %s probe on the metrics listener with scheme %s, want HTTP", p.where, kind, g.Scheme)
			}
		case port == api && api != 0:
			if clientCerts {
				t.Errorf("%s: %s probe on the API port, which requires client certificates the kubelet does not have: probe the --metrics-listen port", p.where, kind)
			}
			if want := map[bool]corev1.URIScheme{true: corev1.URISchemeHTTPS, false: corev1.URISchemeHTTP}[apiTLS]; g.Scheme != want {
				t.Errorf("%s: %s probe scheme %s on the API port, want %s (TLS %v)", p.where, kind, g.Scheme, want, apiTLS)
			}
		default:
			t.Errorf("%s: %s probe port %d is neither --listen nor --metrics-listen", p.where, kind, port)
		}
	}
	grace := time.Duration(0)
	if p.spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*p.spec.TerminationGracePeriodSeconds) * time.Second
	}
	switch r.command {
	case "orchestrator":
		probe("readiness", c.ReadinessProbe, "/readyz")
		probe("liveness", c.LivenessProbe, "/healthz")
		if !strings.HasPrefix(r.flags["advertise"], map[bool]string{true: "https://", false: "http://"}[apiTLS]) {
			t.Errorf("%s: --advertise=%s does not match TLS %v", p.where, r.flags["advertise"], apiTLS)
		}
		if !strings.Contains(r.flags["id"], "$(POD_NAME)") || !strings.Contains(r.flags["advertise"], "$(POD_NAME)") {
			t.Errorf("%s: --id and --advertise must come from the pod name (stable per StatefulSet ordinal)", p.where)
		}
		ttl, _ := time.ParseDuration(placeholders.ReplaceAllString(r.flags["lease-ttl"], "5s"))
		if ttl == 0 {
			ttl = 5 * time.Second
		}
		if grace < 2*ttl {
			t.Errorf("%s: termination grace %v, want at least 2× the lease TTL (%v) to hand partitions over", p.where, grace, ttl)
		}
		if _, ok := r.flags["admin-token-file"]; !ok {
			t.Logf("%s: no --admin-token-file (no bootstrap admin credential)", p.where)
		}
		if https := strings.Contains(r.flags["etcd-endpoints"], "https://"); https != r.has("etcd-cert") || https != r.has("etcd-ca") {
			t.Errorf("%s: --etcd-endpoints=%s with --etcd-cert %v and --etcd-ca %v: TLS to etcd wants both, plain HTTP neither", p.where, r.flags["etcd-endpoints"], r.has("etcd-cert"), r.has("etcd-ca"))
		}
	case "worker":
		probe("liveness", c.LivenessProbe, "/healthz")
		st := 30 * time.Second
		if v, ok := r.flags["shutdown-timeout"]; ok {
			st, _ = time.ParseDuration(v)
		}
		if grace < st+5*time.Second {
			t.Errorf("%s: termination grace %v, want above --shutdown-timeout %v with room to report", p.where, grace, st)
		}
		if _, ok := r.flags["token-file"]; !ok {
			t.Errorf("%s: the worker has no credential (--token-file)", p.where)
		}
		if r.has("etcd-endpoints") {
			t.Errorf("%s: workers reach etcd; only orchestrators may", p.where)
		}
		for _, seed := range strings.Split(r.flags["orchestrators"], ",") {
			if apiTLS := strings.HasPrefix(seed, "https://"); apiTLS != r.has("ca") {
				t.Errorf("%s: --orchestrators %s with --ca %v", p.where, seed, r.has("ca"))
			}
		}
	}
	return r, c.Args
}

// checkMountedFile checks that file, named by a flag of container c, lies
// in one of its volume mounts, and for a Secret volume that the Secret
// has the key.
func checkMountedFile(t reporter, where, file string, c corev1.Container, volumes map[string]corev1.Volume, secrets map[string]map[string]bool) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		rel, err := filepath.Rel(m.MountPath, file)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		v := volumes[m.Name]
		if v.Secret == nil {
			return // written by the pod (an init container)
		}
		key := rel
		if len(v.Secret.Items) > 0 {
			key = ""
			for _, it := range v.Secret.Items {
				if it.Path == rel {
					key = it.Key
				}
			}
			if key == "" {
				t.Errorf("%s: %s is not among the items of Secret %s", where, rel, v.Secret.SecretName)
				return
			}
		}
		keys, ok := secrets[v.Secret.SecretName]
		if !ok {
			t.Errorf("%s: Secret %s has no template", where, v.Secret.SecretName)
			return
		}
		if !keys[key] {
			t.Errorf("%s: Secret %s has no key %q", where, v.Secret.SecretName, key)
		}
		if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o077 != 0 {
			t.Errorf("%s: Secret volume %s is readable by others (defaultMode)", where, m.Name)
		}
		return
	}
	t.Errorf("%s: %s is in no volume mount of the container", where, file)
}

// checkPDB checks that a disruption budget keeps a majority of the
// orchestrators p running.
func checkPDB(t reporter, p podOf, pdbs []*policyv1.PodDisruptionBudget) {
	t.Helper()
	replicas := int32(1)
	if p.replicas != nil {
		replicas = *p.replicas
	}
	for _, b := range pdbs {
		if !labels.SelectorFromSet(b.Spec.Selector.MatchLabels).Matches(labels.Set(p.labels)) {
			continue
		}
		if b.Spec.MinAvailable == nil || b.Spec.MinAvailable.IntValue() != int(replicas/2+1) {
			t.Errorf("%s: disruption budget %s minAvailable %v, want a majority of %d: %d", p.where, b.Name, b.Spec.MinAvailable, replicas, replicas/2+1)
		}
		return
	}
	t.Errorf("%s: no PodDisruptionBudget selects the orchestrators", p.where)
}

// checkOrchestratorService checks that the StatefulSet's governing
// Service is headless, publishes members before they are ready, and is
// the domain of the advertised URL.
func checkOrchestratorService(t reporter, p podOf, r resolved, services []*corev1.Service) {
	t.Helper()
	adv := r.flags["advertise"]
	for _, s := range services {
		if s.Spec.ClusterIP == corev1.ClusterIPNone && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.labels)) {
			if !s.Spec.PublishNotReadyAddresses {
				t.Errorf("%s: headless Service %s does not publish members before they are ready", p.where, s.Name)
			}
			if !strings.Contains(adv, "$(POD_NAME)."+s.Name+".") {
				t.Errorf("%s: --advertise=%s is not under the headless Service %s", p.where, adv, s.Name)
			}
			return
		}
	}
	t.Errorf("%s: no headless Service for the orchestrators", p.where)
}

// checkService checks that Service s selects a workload and that its
// target ports are that workload's container ports.
func checkService(t reporter, where string, s *corev1.Service, pods []podOf) {
	t.Helper()
	for _, p := range pods {
		if !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.labels)) {
			continue
		}
		names := map[string]bool{}
		for _, cp := range p.spec.Containers[0].Ports {
			names[cp.Name] = true
		}
		for _, sp := range s.Spec.Ports {
			if sp.TargetPort.Type == intstr.String && !names[sp.TargetPort.StrVal] {
				t.Errorf("%s Service %s: target port %q is not a port of %s", where, s.Name, sp.TargetPort.StrVal, p.where)
			}
		}
		return
	}
	t.Errorf("%s Service %s selects no workload", where, s.Name)
}

func TestManifests(t *testing.T) {
	needBinary(t)
	objs := decodeFiles(t, "kubernetes")
	secretObjs := decodeFiles(t, filepath.Join("kubernetes", "secrets"))
	optional := decodeFiles(t, filepath.Join("kubernetes", "optional"))
	secrets := secretKeys(secretObjs)
	for _, o := range secretObjs {
		s := o.(*corev1.Secret)
		for k, v := range s.StringData {
			if !strings.Contains(v, "CHANGE-ME") || len(strings.TrimSpace(v)) >= 32 && !strings.Contains(v, " ") {
				t.Errorf("Secret %s key %s: %q is not an unusable placeholder", s.Name, k, v)
			}
		}
		if s.Type == corev1.SecretTypeTLS && (!secrets[s.Name]["tls.crt"] || !secrets[s.Name]["tls.key"]) {
			t.Errorf("Secret %s of type %s lacks tls.crt or tls.key", s.Name, s.Type)
		}
	}
	for _, o := range objs {
		if _, ok := o.(*corev1.Secret); ok {
			t.Errorf("deploy/kubernetes applies a Secret: keep Secret templates in secrets/")
		}
	}
	shape := checkFleet(t, "deploy/kubernetes", append(objs, optional...), secrets)
	for _, kind := range []string{"StatefulSet", "Deployment", "PodDisruptionBudget", "NetworkPolicy", "ServiceMonitor"} {
		if shape.kinds[kind] == 0 {
			t.Errorf("deploy/kubernetes has no %s", kind)
		}
	}
}

func TestManifestChecksFail(t *testing.T) {
	needBinary(t)
	data, err := os.ReadFile(filepath.Join("kubernetes", "orchestrator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	worker, err := os.ReadFile(filepath.Join("kubernetes", "worker.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := secretKeys(decodeFiles(t, filepath.Join("kubernetes", "secrets")))
	for _, tt := range []struct{ name, old, new string }{
		{"unknown field", "podManagementPolicy: Parallel", "podManagementPolicy: Parallel\n  podManagmentPolicy: Parallel"},
		{"misspelt flag", "--id=$(POD_NAME)", "--idd=$(POD_NAME)"},
		{"misspelt setting", "    lease-ttl: 5s", "    lease-tll: 5s"},
		{"setting refused", "    lease-ttl: 5s", "    lease-ttl: 5500ms"},
		{"config file not mounted", "            - name: config\n              mountPath: /etc/jobfleet/config", "            - name: config\n              mountPath: /etc/jobfleet/settings"},
		{"probe without TLS", "scheme: HTTPS", "scheme: HTTP"},
		{"probe on a missing port", "path: /readyz\n              port: api", "path: /readyz\n              port: admin"},
		{"missing secret key", "etcd-ca: /etc/jobfleet/etcd/ca.crt", "etcd-ca: /etc/jobfleet/etcd/ca.pem"},
		{"short grace", "terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: 5"},
		{"minority budget", "minAvailable: 2", "minAvailable: 1"},
		{"client certificates with probes on the API", "    tls-key: /etc/jobfleet/tls/tls.key", "    tls-key: /etc/jobfleet/tls/tls.key\n    tls-client-ca: /etc/jobfleet/tls/ca.crt"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := strings.Replace(string(data), tt.old, tt.new, 1)
			if bad == string(data) {
				t.Fatalf("%q not found in the manifest", tt.old)
			}
			rec := &recorder{}
			objs, err := decodeObjects("mutated", []byte(bad))
			if err == nil {
				w, _ := decodeObjects("worker", worker)
				checkFleet(rec, "mutated", append(objs, w...), secrets)
			}
			if err == nil && !rec.failed {
				t.Errorf("a manifest with %s passes", tt.name)
			}
		})
	}
}
