package main

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// manifest is one rendered document, as Helm keeps it.
type manifest struct {
	source  string // the template it came from
	content string
	kind    string
	json    []byte // the object as Helm's Kubernetes client sends it
}

// head is what Helm decodes of every document before installing it (its
// releaseutil.SimpleHead): a document that does not decode, i.e. is not
// YAML, fails the install ("YAML parse error on ...").
type head struct {
	Version  string `json:"apiVersion"`
	Kind     string `json:"kind,omitempty"`
	Metadata *struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata,omitempty"`
}

// Helm's install order of kinds (releaseutil.InstallOrder, Helm 3.21);
// other kinds follow, sorted by kind.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
	"PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
	"PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
	"ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding",
	"RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
}

// The document separator Helm splits rendered files on.
var documentSeparator = regexp.MustCompile("(?:^|\\s*\n)---\\s*")

func splitDocuments(text string) []string {
	var docs []string
	for _, d := range documentSeparator.Split(strings.TrimSpace(text), -1) {
		if d != "" {
			docs = append(docs, strings.TrimSpace(d))
		}
	}
	return docs
}

// sortManifests splits every rendered file into documents in file-name
// order, decodes each as Helm does, and orders them by kind, keeping the
// order of documents of the same kind.
func sortManifests(rendered map[string]string) ([]manifest, error) {
	names := make([]string, 0, len(rendered))
	for name, text := range rendered {
		if strings.TrimSpace(text) != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var out []manifest
	for _, name := range names {
		for _, doc := range splitDocuments(rendered[name]) {
			var h head
			if err := yaml.Unmarshal([]byte(doc), &h); err != nil {
				return nil, fmt.Errorf("YAML parse error on %s: %w", name, err)
			}
			if h.Metadata != nil {
				if _, isHook := h.Metadata.Annotations["helm.sh/hook"]; isHook {
					return nil, notFollowed("hooks (" + name + ")")
				}
			}
			asJSON, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				return nil, fmt.Errorf("YAML parse error on %s: %w", name, err)
			}
			out = append(out, manifest{source: name, content: doc, kind: h.Kind, json: asJSON})
		}
	}
	rank := make(map[string]int, len(installOrder))
	for i, k := range installOrder {
		rank[k] = i
	}
	sort.SliceStable(out, func(i, j int) bool {
		ri, iKnown := rank[out[i].kind]
		rj, jKnown := rank[out[j].kind]
		switch {
		case !iKnown && !jKnown:
			return out[i].kind < out[j].kind
		case !iKnown:
			return false
		case !jKnown:
			return true
		}
		return ri < rj
	})
	return out, nil
}
