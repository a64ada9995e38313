// render: renders a Helm chart as `helm template` (Helm 3) does, for checking
// the chart where helm itself is not installable. It follows Helm's engine
// rather than imitating its output:
//   - values are read through sigs.k8s.io/yaml (Helm's library: YAML to JSON,
//     so numbers are float64), -f files merge in order, and user values
//     coalesce over values.yaml with Helm's rules (null deletes a default);
//   - templates run in Go's text/template with sprig and Helm's functions
//     (toYaml and fromYaml through sigs.k8s.io/yaml), missing keys as empty;
//   - the output is split into documents, each parsed as Helm parses it (a
//     YAML error fails, as in Helm), sorted by Helm's install order of kinds,
//     and printed as `helm template` prints it.
//
// Whatever depends on a cluster or on features this renderer lacks (lookup,
// .Capabilities.APIVersions, subcharts, CRDs, hooks, values.schema.json,
// .Files.Glob ...) fails with "cannot follow Helm here" instead of guessing.
//
//	render [-f values.yaml]... [-namespace NS] [-release NAME]
//	       [-kube-version v1.34.0] [-json OUT.json] CHART_DIR
//	render -decode MANIFESTS.yaml -json OUT.json
//
// -json writes the manifests as a JSON array of {"source", "object"}, each
// object converted by sigs.k8s.io/yaml as Helm's Kubernetes client converts
// it before sending it to the API server. NOTES.txt goes to stderr. A
// failing `fail`/`required` or template error exits 1 with its message.
// -decode converts already rendered manifests (helm/check/rejected/) the
// same way, for the checks that must refuse them.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/template"
)

type valueFiles []string

func (f *valueFiles) String() string     { return strings.Join(*f, ",") }
func (f *valueFiles) Set(v string) error { *f = append(*f, v); return nil }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func main() {
	var files valueFiles
	flag.Var(&files, "f", "values file over the chart's values.yaml (repeatable, later ones win)")
	namespace := flag.String("namespace", "default", "release namespace")
	release := flag.String("release", "cairn", "release name")
	// What `helm template` of Helm 3.21 reports without --kube-version.
	kube := flag.String("kube-version", "v1.34.0", "Kubernetes version for .Capabilities.KubeVersion")
	jsonOut := flag.String("json", "", "also write the manifests as JSON to this file")
	decode := flag.String("decode", "", "convert this file of rendered manifests to -json, render nothing")
	flag.Parse()
	if *decode != "" && *jsonOut != "" {
		text, err := os.ReadFile(*decode)
		check(err)
		manifests, err := sortManifests(map[string]string{*decode: string(text)})
		check(err)
		check(writeJSON(*jsonOut, manifests))
		return
	}
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: render [-f values.yaml]... [-json OUT] CHART_DIR")
		os.Exit(2)
	}
	chart, err := loadChart(flag.Arg(0))
	check(err)
	k, err := parseKubeVersion(*kube)
	check(err)
	check(chart.checkKubeVersion(k))

	user := map[string]interface{}{}
	for _, f := range files {
		v, err := readValuesFile(f)
		check(err)
		user = mergeUserValues(user, v)
	}
	warn := func(msg string) { fmt.Fprintln(os.Stderr, "warning:", msg) }
	top := map[string]interface{}{
		"Values": coalesce(user, chart.defaults, "", warn),
		"Release": map[string]interface{}{
			"Name": *release, "Namespace": *namespace, "IsUpgrade": false, "IsInstall": true,
			"Revision": 1, "Service": "Helm",
		},
		"Chart":        chart.meta,
		"Capabilities": capabilities{KubeVersion: k},
		"Files":        chart.files,
	}
	rendered, err := renderTemplates(chart, top)
	check(err)

	notesName := chart.meta.Name + "/templates/NOTES.txt"
	if notes, ok := rendered[notesName]; ok {
		fmt.Fprintf(os.Stderr, "NOTES:\n%s\n", strings.TrimSpace(notes))
		delete(rendered, notesName)
	}
	manifests, err := sortManifests(rendered)
	check(err)
	var out bytes.Buffer
	for _, m := range manifests {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", m.source, m.content)
	}
	fmt.Println(strings.TrimSpace(out.String()))
	if *jsonOut != "" {
		check(writeJSON(*jsonOut, manifests))
	}
}

// renderTemplates runs every template that is not a partial, as Helm's
// engine does (all parsed into one set, so they can include each other).
func renderTemplates(chart *loadedChart, top map[string]interface{}) (map[string]string, error) {
	root := template.New("gotpl").Option("missingkey=zero")
	var renderTpl func(text string, data interface{}) (string, error)
	root.Funcs(helmFuncs(root, func(text string, data interface{}) (string, error) { return renderTpl(text, data) }))
	renderTpl = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		if t, err = t.New("tpl").Parse(text); err != nil {
			return "", err
		}
		var buf strings.Builder
		err = t.Execute(&buf, data)
		return strings.ReplaceAll(buf.String(), "<no value>", ""), err
	}
	names := make([]string, 0, len(chart.templates))
	for name := range chart.templates {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, err := root.New(name).Parse(chart.templates[name]); err != nil {
			return nil, fmt.Errorf("parse error in (%s): %w", name, err)
		}
	}
	out := map[string]string{}
	for _, name := range names {
		if strings.HasPrefix(name[strings.LastIndex(name, "/")+1:], "_") {
			continue
		}
		data := map[string]interface{}{}
		for k, v := range top {
			data[k] = v
		}
		data["Template"] = map[string]interface{}{"Name": name, "BasePath": chart.meta.Name + "/templates"}
		var buf strings.Builder
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return nil, explainExecError(name, err)
		}
		out[name] = strings.ReplaceAll(buf.String(), "<no value>", "")
	}
	return out, nil
}

// explainExecError prints a `required` failure as Helm does.
func explainExecError(name string, err error) error {
	msg := err.Error()
	start, end := strings.Index(msg, requiredStart), strings.Index(msg, requiredEnd)
	if start < 0 || end < start {
		return err
	}
	location := name
	if parts := strings.SplitN(msg, ": ", 3); len(parts) == 3 {
		location = parts[1]
	}
	return fmt.Errorf("execution error at (%s): %s", location, msg[start+len(requiredStart):end])
}

func writeJSON(path string, manifests []manifest) error {
	type entry struct {
		Source string          `json:"source"`
		Object json.RawMessage `json:"object"`
	}
	entries := make([]entry, 0, len(manifests))
	for _, m := range manifests {
		// A document of comments only is no object: Helm's client skips it.
		if string(m.json) != "null" {
			entries = append(entries, entry{Source: m.source, Object: m.json})
		}
	}
	data, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
