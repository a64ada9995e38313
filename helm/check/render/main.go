// render: renders a Helm chart's templates the way `helm template` does, for
// checking the chart where helm itself is not installable: Go's text/template
// (Helm's engine) with the sprig functions Helm uses, plus Helm's own
// include, tpl, required, toYaml, fromYaml and toJson, missing values as
// empty, and Helm's value merging (-f files over values.yaml). Not helm: no
// subcharts, hooks, lookup, Capabilities or schema validation.
//
//   render [-f override.yaml]... [-namespace NS] [-release NAME] CHART_DIR
//
// Prints every rendered manifest after a "# Source:" line, "---"-separated;
// a failing `fail`/`required` or a template error exits 1 with its message.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	sprig "github.com/Masterminds/sprig"
	"gopkg.in/yaml.v3"
)

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(v string) error { *f = append(*f, v); return nil }

func readYAML(path string) map[string]interface{} {
	data, err := os.ReadFile(path)
	check(err)
	out := map[string]interface{}{}
	check(yaml.Unmarshal(data, &out))
	return out
}

// merge puts src over dst: maps merge key by key, anything else replaces.
func merge(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				dst[k] = merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

func toYaml(v interface{}) string {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func main() {
	var overrides files
	flag.Var(&overrides, "f", "values file over the chart's values.yaml (repeatable)")
	namespace := flag.String("namespace", "default", "release namespace")
	release := flag.String("release", "cairn", "release name")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: render [-f values.yaml]... CHART_DIR")
		os.Exit(2)
	}
	dir := flag.Arg(0)
	chart := readYAML(filepath.Join(dir, "Chart.yaml"))
	values := readYAML(filepath.Join(dir, "values.yaml"))
	for _, f := range overrides {
		values = merge(values, readYAML(f))
	}
	data := map[string]interface{}{
		"Values":  values,
		"Release": map[string]interface{}{"Name": *release, "Namespace": *namespace, "Service": "Helm"},
		"Chart": map[string]interface{}{
			"Name": chart["name"], "Version": chart["version"], "AppVersion": chart["appVersion"],
		},
	}

	root := template.New("chart")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYaml
	funcs["fromYaml"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		_ = yaml.Unmarshal([]byte(s), &m)
		return m
	}
	funcs["include"] = func(name string, d interface{}) (string, error) {
		var buf bytes.Buffer
		err := root.ExecuteTemplate(&buf, name, d)
		return buf.String(), err
	}
	funcs["tpl"] = func(text string, d interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = t.Execute(&buf, d)
		return buf.String(), err
	}
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil || v == "" {
			return nil, fmt.Errorf("%s", msg)
		}
		return v, nil
	}
	root.Funcs(funcs).Option("missingkey=zero")

	paths, err := filepath.Glob(filepath.Join(dir, "templates", "*"))
	check(err)
	// As Helm: NOTES.txt after the manifests.
	sort.Slice(paths, func(i, j int) bool {
		ni, nj := filepath.Base(paths[i]) == "NOTES.txt", filepath.Base(paths[j]) == "NOTES.txt"
		if ni != nj {
			return nj
		}
		return paths[i] < paths[j]
	})
	for _, p := range paths {
		text, err := os.ReadFile(p)
		check(err)
		_, err = root.New(filepath.Join("templates", filepath.Base(p))).Parse(string(text))
		check(err)
	}
	for _, p := range paths {
		base := filepath.Base(p)
		if strings.HasPrefix(base, "_") {
			continue
		}
		var buf bytes.Buffer
		check(root.ExecuteTemplate(&buf, filepath.Join("templates", base), data))
		out := strings.ReplaceAll(buf.String(), "<no value>", "")
		if base == "NOTES.txt" {
			fmt.Fprintf(os.Stderr, "NOTES:\n%s\n", strings.TrimSpace(out))
			continue
		}
		if strings.TrimSpace(out) == "" {
			continue
		}
		fmt.Printf("---\n# Source: %s/templates/%s\n%s\n", chart["name"], base, strings.TrimSpace(out))
	}
}
