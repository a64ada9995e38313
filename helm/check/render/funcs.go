package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"text/template"

	sprig "github.com/Masterminds/sprig"
	"sigs.k8s.io/yaml"
)

// notFollowed is the error of everything this renderer cannot do as Helm
// does: the check must fail there, not pass on a guess.
func notFollowed(what string) error {
	return fmt.Errorf("helm/check/render cannot follow Helm here: %s", what)
}

// Helm wraps the message of `required` in these markers and prints it as
// "execution error at (TEMPLATE:LINE:COL): MESSAGE".
const (
	requiredStart = "HELM_ERR_START"
	requiredEnd   = "HELM_ERR_END"
)

// helmFuncs is Helm's function map: sprig's text functions without env and
// expandenv, Helm's YAML and JSON functions (through sigs.k8s.io/yaml, as
// Helm's), and the late-bound include, tpl and required. toToml, fromToml
// and lookup (a cluster query under `helm install`) are refused.
func helmFuncs(root *template.Template, renderTpl func(text string, data interface{}) (string, error)) template.FuncMap {
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = func(v interface{}) string {
		data, err := yaml.Marshal(v)
		if err != nil {
			return ""
		}
		return strings.TrimSuffix(string(data), "\n")
	}
	funcs["toYamlPretty"] = func(interface{}) (string, error) { return "", notFollowed("toYamlPretty") }
	fromYAML := func(data []byte, v interface{}) error { return yaml.Unmarshal(data, v) }
	funcs["fromYaml"] = tableDecoder(fromYAML)
	funcs["fromYamlArray"] = listDecoder(fromYAML)
	funcs["toJson"] = func(v interface{}) string {
		data, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(data)
	}
	funcs["fromJson"] = tableDecoder(json.Unmarshal)
	funcs["fromJsonArray"] = listDecoder(json.Unmarshal)
	funcs["toToml"] = func(interface{}) (string, error) { return "", notFollowed("toToml") }
	funcs["fromToml"] = func(string) (map[string]interface{}, error) { return nil, notFollowed("fromToml") }
	funcs["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return nil, notFollowed("lookup (empty under `helm template`, the cluster's objects under `helm install`)")
	}
	funcs["include"] = func(name string, data interface{}) (string, error) {
		var buf strings.Builder
		err := root.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	funcs["tpl"] = renderTpl
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if s, isString := v.(string); v == nil || (isString && s == "") {
			return v, errors.New(requiredStart + msg + requiredEnd)
		}
		return v, nil
	}
	return funcs
}

// tableDecoder and listDecoder make Helm's from* functions, which tolerate
// errors: a table gets the message under "Error", a list holds it alone.
func tableDecoder(unmarshal func([]byte, interface{}) error) func(string) map[string]interface{} {
	return func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
}

func listDecoder(unmarshal func([]byte, interface{}) error) func(string) []interface{} {
	return func(s string) []interface{} {
		var a []interface{}
		if err := unmarshal([]byte(s), &a); err != nil {
			a = []interface{}{err.Error()}
		}
		return a
	}
}

// chartFiles is .Files: the chart's files outside templates/ (and other than
// Chart.yaml and values.yaml), by path relative to the chart.
type chartFiles map[string][]byte

func (f chartFiles) GetBytes(name string) []byte { return f[name] }
func (f chartFiles) Get(name string) string      { return string(f[name]) }

func (f chartFiles) Lines(name string) []string {
	if f[name] == nil {
		return []string{}
	}
	return strings.Split(string(f[name]), "\n")
}

func (f chartFiles) Glob(string) (chartFiles, error) { return nil, notFollowed(".Files.Glob") }
func (f chartFiles) AsConfig() (string, error)       { return "", notFollowed(".Files.AsConfig") }
func (f chartFiles) AsSecrets() (string, error)      { return "", notFollowed(".Files.AsSecrets") }

// names lists the files (for messages).
func (f chartFiles) names() []string {
	var out []string
	for k := range f {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// capabilities is .Capabilities: the Kubernetes version is the -kube-version
// flag (what `helm template --kube-version` sets); the API versions and Helm's
// version depend on the cluster and the helm binary, so reading them fails.
type capabilities struct {
	KubeVersion kubeVersion
}

func (capabilities) APIVersions() (interface{}, error) {
	return nil, notFollowed(".Capabilities.APIVersions (the cluster's API groups)")
}

func (capabilities) HelmVersion() (interface{}, error) {
	return nil, notFollowed(".Capabilities.HelmVersion")
}

type kubeVersion struct {
	Version, Major, Minor string
}

func (k kubeVersion) String() string     { return k.Version }
func (k kubeVersion) GitVersion() string { return k.Version }

func parseKubeVersion(v string) (kubeVersion, error) {
	trimmed := strings.TrimPrefix(v, "v")
	parts := strings.SplitN(trimmed, ".", 3)
	if len(parts) < 2 {
		return kubeVersion{}, fmt.Errorf("kube version %q is not MAJOR.MINOR[.PATCH]", v)
	}
	return kubeVersion{Version: "v" + trimmed, Major: parts[0], Minor: parts[1]}, nil
}

// isChartFile tells whether a chart-relative path belongs in .Files.
func isChartFile(rel string) bool {
	switch {
	case rel == "Chart.yaml", rel == "values.yaml", rel == ".helmignore":
		return false
	case strings.HasPrefix(rel, "templates/"):
		return false
	}
	return path.Base(rel) != ""
}
