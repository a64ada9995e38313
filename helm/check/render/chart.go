package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	semver "github.com/Masterminds/semver"
	"sigs.k8s.io/yaml"
)

// chartMetadata is .Chart: Chart.yaml under the field names of Helm's
// chart.Metadata (a struct, so a misspelt field is an error, as in Helm).
type chartMetadata struct {
	Name         string            `json:"name,omitempty"`
	Home         string            `json:"home,omitempty"`
	Sources      []string          `json:"sources,omitempty"`
	Version      string            `json:"version,omitempty"`
	Description  string            `json:"description,omitempty"`
	Keywords     []string          `json:"keywords,omitempty"`
	Maintainers  []interface{}     `json:"maintainers,omitempty"`
	Icon         string            `json:"icon,omitempty"`
	APIVersion   string            `json:"apiVersion,omitempty"`
	Condition    string            `json:"condition,omitempty"`
	Tags         string            `json:"tags,omitempty"`
	AppVersion   string            `json:"appVersion,omitempty"`
	Deprecated   bool              `json:"deprecated,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	KubeVersion  string            `json:"kubeVersion,omitempty"`
	Dependencies []interface{}     `json:"dependencies,omitempty"`
	Type         string            `json:"type,omitempty"`
}

// loadedChart is what the renderer reads of a chart directory.
type loadedChart struct {
	meta      chartMetadata
	defaults  map[string]interface{}
	templates map[string]string // "NAME/templates/..." -> text
	files     chartFiles
}

// loadChart reads a chart directory and refuses what Helm would do and this
// renderer does not: subcharts, CRDs, a values schema, .helmignore rules.
func loadChart(dir string) (*loadedChart, error) {
	c := &loadedChart{templates: map[string]string{}, files: chartFiles{}}
	data, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &c.meta); err != nil {
		return nil, fmt.Errorf("Chart.yaml: %w", err)
	}
	if c.meta.APIVersion != "v2" {
		return nil, notFollowed("Chart.yaml apiVersion " + c.meta.APIVersion + " (only v2)")
	}
	if len(c.meta.Dependencies) > 0 {
		return nil, notFollowed("chart dependencies")
	}
	for _, unsupported := range []string{"charts", "crds", "values.schema.json", ".helmignore"} {
		if _, err := os.Stat(filepath.Join(dir, unsupported)); err == nil {
			return nil, notFollowed(unsupported + " in the chart")
		}
	}
	if c.defaults, err = readValuesFile(filepath.Join(dir, "values.yaml")); err != nil {
		return nil, err
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		content, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasPrefix(rel, "templates/") {
			c.templates[c.meta.Name+"/"+rel] = string(content)
		} else if isChartFile(rel) {
			c.files[rel] = content
		}
		return nil
	})
	return c, err
}

// checkKubeVersion fails as Helm does when the chart's kubeVersion range
// excludes the cluster's version.
func (c *loadedChart) checkKubeVersion(k kubeVersion) error {
	if c.meta.KubeVersion == "" {
		return nil
	}
	constraint, err := semver.NewConstraint(c.meta.KubeVersion)
	if err != nil {
		return fmt.Errorf("Chart.yaml kubeVersion: %w", err)
	}
	v, err := semver.NewVersion(k.Version)
	if err != nil {
		return err
	}
	if !constraint.Check(v) {
		return fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s",
			c.meta.KubeVersion, k.Version)
	}
	return nil
}
