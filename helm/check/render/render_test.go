package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeChart makes a chart directory with the given files (relative paths).
func writeChart(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["Chart.yaml"] = "apiVersion: v2\nname: demo\nversion: 0.1.0\nappVersion: \"1.0\"\n"
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func renderChart(t *testing.T, dir string, user map[string]interface{}) (map[string]string, error) {
	t.Helper()
	c, err := loadChart(dir)
	if err != nil {
		return nil, err
	}
	top := map[string]interface{}{
		"Values":       coalesce(user, c.defaults, "", func(string) {}),
		"Release":      map[string]interface{}{"Name": "r", "Namespace": "ns", "Service": "Helm"},
		"Chart":        c.meta,
		"Capabilities": capabilities{KubeVersion: kubeVersion{Version: "v1.34.0", Major: "1", Minor: "34"}},
		"Files":        c.files,
	}
	return renderTemplates(c, top)
}

func TestNumbersAreFloatsAsInHelm(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"values.yaml":       "idle: 2592000\nport: 8080\n",
		"templates/cm.yaml": "plain: {{ .Values.idle }}\nconverted: {{ int .Values.idle }}\nport: {{ .Values.port }}\nyaml: {{ toYaml .Values.idle }}\n",
	})
	out, err := renderChart(t, dir, map[string]interface{}{})
	if err != nil {
		t.Fatal(err)
	}
	got := out["demo/templates/cm.yaml"]
	for _, want := range []string{"plain: 2.592e+06", "converted: 2592000", "port: 8080", "yaml: 2592000"} {
		if !strings.Contains(got, want) {
			t.Errorf("rendered %q, want a line %q", got, want)
		}
	}
}

func TestUserNullDeletesDefault(t *testing.T) {
	defaults := map[string]interface{}{
		"sc":   map[string]interface{}{"runAsUser": 10001.0, "runAsNonRoot": true},
		"keep": "yes",
	}
	user := map[string]interface{}{"sc": map[string]interface{}{"runAsUser": nil}}
	got := coalesce(user, defaults, "", func(string) {})
	sc := got["sc"].(map[string]interface{})
	if _, present := sc["runAsUser"]; present {
		t.Errorf("runAsUser survived a user null: %v", sc)
	}
	if sc["runAsNonRoot"] != true || got["keep"] != "yes" {
		t.Errorf("defaults lost: %v", got)
	}
	if _, present := defaults["sc"].(map[string]interface{})["runAsUser"]; !present {
		t.Error("coalesce changed the chart's defaults")
	}
}

func TestLaterValuesFilesWin(t *testing.T) {
	a := map[string]interface{}{"image": map[string]interface{}{"repository": "a", "tag": "1"}}
	b := map[string]interface{}{"image": map[string]interface{}{"repository": "b"}}
	got := mergeUserValues(a, b)["image"].(map[string]interface{})
	if got["repository"] != "b" || got["tag"] != "1" {
		t.Errorf("merged %v", got)
	}
}

func TestRequiredFailsAsHelm(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"values.yaml":       "image: \"\"\n",
		"templates/cm.yaml": "image: {{ required \"image is required\" .Values.image }}\n",
	})
	_, err := renderChart(t, dir, map[string]interface{}{})
	if err == nil || !strings.Contains(err.Error(), "execution error at (demo/templates/cm.yaml:1:10): image is required") {
		t.Errorf("got %v", err)
	}
}

func TestWhatCannotBeFollowedFails(t *testing.T) {
	for name, tmpl := range map[string]string{
		"lookup":      `{{ lookup "v1" "Secret" "ns" "s" }}`,
		"apiVersions": `{{ .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}`,
		"glob":        `{{ .Files.Glob "x/*" }}`,
	} {
		dir := writeChart(t, map[string]string{"values.yaml": "", "templates/x.yaml": tmpl})
		if _, err := renderChart(t, dir, map[string]interface{}{}); err == nil ||
			!strings.Contains(err.Error(), "cannot follow Helm here") {
			t.Errorf("%s: got %v, want a refusal", name, err)
		}
	}
	dir := writeChart(t, map[string]string{"values.yaml": "", "crds/x.yaml": "kind: X\n"})
	if _, err := loadChart(dir); err == nil || !strings.Contains(err.Error(), "cannot follow Helm here") {
		t.Errorf("crds/: got %v, want a refusal", err)
	}
}

func TestFilesAndKubeVersion(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"values.yaml":       "",
		"dash/d.json":       "{\"a\": 1}",
		"templates/cm.yaml": "d: {{ .Files.Get \"dash/d.json\" | quote }}\nk: {{ .Capabilities.KubeVersion.Minor }}\n",
	})
	out, err := renderChart(t, dir, map[string]interface{}{})
	if err != nil {
		t.Fatal(err)
	}
	if got := out["demo/templates/cm.yaml"]; got != "d: \"{\\\"a\\\": 1}\"\nk: 34\n" {
		t.Errorf("rendered %q", got)
	}
}

func TestManifestsSortedByKindAsHelm(t *testing.T) {
	rendered := map[string]string{
		"demo/templates/a.yaml": "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: s\n---\n# only a comment\n",
		"demo/templates/b.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: one\n---\napiVersion: x/v1\nkind: Zeta\nmetadata:\n  name: z\n",
		"demo/templates/c.yaml": "apiVersion: x/v1\nkind: Alpha\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: two\n",
	}
	ms, err := sortManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, m := range ms {
		order = append(order, m.kind+"/"+string(m.json))
	}
	got := strings.Join(order, " ")
	for _, want := range []string{"Service/", "Service/", "StatefulSet/", "/null", "Alpha/", "Zeta/"} {
		i := strings.Index(got, want)
		if i < 0 {
			t.Fatalf("order %s lacks %s", got, want)
		}
		got = got[i+len(want):]
	}
	if _, err := sortManifests(map[string]string{"t.yaml": "kind: X\nmetadata: [1\n"}); err == nil ||
		!strings.Contains(err.Error(), "YAML parse error on t.yaml") {
		t.Errorf("broken YAML: got %v, want Helm's parse error", err)
	}
}
