package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// readValuesFile reads a values file as Helm does: through sigs.k8s.io/yaml,
// which converts YAML to JSON first, so every number becomes a float64
// (helm/helm#1707: 2592000 prints as 2.592e+06 in a template).
func readValuesFile(path string) (map[string]interface{}, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	values := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &values); err != nil {
		return nil, fmt.Errorf("failed to parse %s: %w", path, err)
	}
	return values, nil
}

// mergeUserValues lays a later -f file over the earlier ones: tables merge
// key by key, anything else replaces, and a null stays a null (it deletes
// the chart's default later, in coalesce).
func mergeUserValues(base, over map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(base))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		overTable, overIsTable := v.(map[string]interface{})
		baseTable, baseIsTable := out[k].(map[string]interface{})
		if overIsTable && baseIsTable {
			out[k] = mergeUserValues(baseTable, overTable)
		} else {
			out[k] = v
		}
	}
	return out
}

// coalesce puts the user's values over the chart's defaults the way Helm's
// install does: a user null deletes the default (at the top level always,
// deeper only where the default is not null itself), user tables merge into
// default tables, and where one is a table and the other not, the user's
// value stays and Helm warns.
func coalesce(user, defaults map[string]interface{}, prefix string, warn func(string)) map[string]interface{} {
	out := deepCopyTable(user)
	for key, def := range defaults {
		full := prefix + key
		got, present := out[key]
		switch {
		case !present:
			out[key] = deepCopy(def)
		case got == nil:
			if def != nil || prefix == "" {
				delete(out, key)
			}
		default:
			gotTable, gotIsTable := got.(map[string]interface{})
			defTable, defIsTable := def.(map[string]interface{})
			if gotIsTable && defIsTable {
				out[key] = coalesce(gotTable, defTable, full+".", warn)
			} else if defIsTable {
				warn(fmt.Sprintf("cannot overwrite table with non table for %s (%v)", full, def))
			} else if gotIsTable && def != nil {
				warn(fmt.Sprintf("destination for %s is a table. Ignoring non-table value (%v)", full, def))
			}
		}
	}
	return out
}

func deepCopy(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		return deepCopyTable(t)
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}

func deepCopyTable(m map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		out[k] = deepCopy(v)
	}
	return out
}
