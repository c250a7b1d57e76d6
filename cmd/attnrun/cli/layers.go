package cli

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/attnrun/attnrun/models"

	"github.com/attnrun/attnrun/registry"
)

func newLayersCommand() *cobra.Command {
	var sets []string
	cmd := &cobra.Command{
		Use:   "layers [TYPE [--set FIELD=VALUE]...]",
		Short: "List the layer types, or describe one: fields, parameters, an example",
		Long: `layers lists every registered layer type. With a TYPE it prints the type's
config fields (YAML key, type, default, meaning), a config line that uses it,
and the parameters that config gives, with their shapes. --set FIELD=VALUE
sets a field of the example (the sizes default to 8).`,
		Example: `  attnrun layers
  attnrun layers attention.multihead
  attnrun layers attention.sdpa --set d=64 --set num_heads=4 --set num_kv_heads=2`,
		Args: maxOneArg("a layer type"),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return layerIDs(), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				if len(sets) > 0 {
					return usageError{errors.New("--set describes one layer type: attnrun layers TYPE --set FIELD=VALUE")}
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				for _, info := range registry.Infos() {
					fmt.Fprintf(w, "%s\t%s\n", info.ID, info.Summary)
				}
				return w.Flush()
			}
			return describeLayer(cmd.OutOrStdout(), args[0], sets)
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "a field of the example config, FIELD=VALUE (YAML value); repeat for several")
	return cmd
}

// layerIDs lists the registered layer types, for completion.
func layerIDs() []string {
	var ids []string
	for _, info := range registry.Infos() {
		ids = append(ids, info.ID)
	}
	return ids
}

// layerField is one config field of a layer type.
type layerField struct {
	key, kind, def, meaning string
	// size marks an integer field without a default: a size the config
	// must give, which the example sets to 8.
	size bool
}

// describeLayer prints a layer type's fields, an example config line with
// the --set values, and the parameters of that config.
func describeLayer(w io.Writer, id string, sets []string) error {
	info, err := registry.Lookup(id)
	if err != nil {
		return usageError{err}
	}
	fields := configFields(info.New())
	fmt.Fprintf(w, "%s: %s\n\nfields\n", info.ID, info.Summary)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  key\ttype\tdefault\tmeaning")
	for _, f := range fields {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.key, f.kind, f.def, f.meaning)
	}
	tw.Flush()

	values := map[string]any{}
	for _, s := range sets {
		key, value, ok := strings.Cut(s, "=")
		var v any
		if !ok || yaml.Unmarshal([]byte(value), &v) != nil {
			return usageError{fmt.Errorf("--set %q: want FIELD=VALUE, e.g. d_in=64", s)}
		}
		if !slices.ContainsFunc(fields, func(f layerField) bool { return f.key == key }) {
			return usageError{fmt.Errorf("--set %q: %s has no field %q", s, id, key)}
		}
		values[key] = v
	}
	line, m, err := exampleModel(id, fields, values)
	if line == "" {
		return err
	}
	fmt.Fprintf(w, "\nexample (in a model config's layers:)\n  %s\n", line)
	if err != nil {
		fmt.Fprintf(w, "\nparameters\n  the example does not validate; set the fields with --set FIELD=VALUE:\n  %v\n", err)
		return nil
	}
	params := m.Layers()[0].Params
	fmt.Fprintf(w, "\nparameters of the example (%s)\n", quantity(models.CountParams(params), "values"))
	if len(params) == 0 {
		fmt.Fprintln(w, "  none")
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, p := range params {
		fmt.Fprintf(tw, "  %s.%s\t%s\n", m.Layers()[0].Name, p.Name, models.FormatShape(p.Shape))
	}
	return tw.Flush()
}

// exampleModel builds a one-layer model of the type (shapes only) from
// the values, and returns its config line. A size the layer's validation
// asks for (an int field without a default, named in the error) is set to
// 8 (a head count to 2) and the model built again, so that the example needs only the fields
// that matter.
func exampleModel(id string, fields []layerField, values map[string]any) (string, *models.Model, error) {
	opts := models.Options{ShapesOnly: true}
	for {
		line, err := exampleLine(id, values)
		if err != nil {
			return "", nil, err
		}
		m, err := opts.Parse([]byte("name: example\nlayers:\n  "+line+"\n"), "the example")
		if err == nil {
			return line, m, nil
		}
		missing := ""
		for _, f := range fields {
			if _, set := values[f.key]; !set && f.size && regexp.MustCompile(`\b`+regexp.QuoteMeta(f.key)+`\b`).MatchString(err.Error()) {
				missing = f.key
				break
			}
		}
		if missing == "" {
			return line, nil, err
		}
		values[missing] = 8
		if strings.Contains(missing, "heads") {
			values[missing] = 2
		}
	}
}

// exampleLine is a flow-style layer entry of the type with the values.
func exampleLine(id string, values map[string]any) (string, error) {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := []string{"name: " + exampleName(id), "type: " + id}
	for _, k := range keys {
		v, err := yaml.Marshal(values[k])
		if err != nil {
			return "", err
		}
		text := strings.TrimSpace(string(v))
		if strings.Contains(text, "\n") {
			return "", usageError{fmt.Errorf("--set %s: give a scalar or a [flow, list]", k)}
		}
		parts = append(parts, k+": "+text)
	}
	return "- {" + strings.Join(parts, ", ") + "}", nil
}

// exampleName names the example layer after its type's family.
func exampleName(id string) string {
	family, _, _ := strings.Cut(id, ".")
	return map[string]string{"attention": "attn", "position": "pos", "norm": "norm"}[family] + map[bool]string{true: "layer"}[family != "attention" && family != "position" && family != "norm"]
}

// configFields lists the YAML fields of a layer's config struct, with
// their defaults (the values New fills in) and, for built-in layers,
// their meaning (layer_docs.go).
func configFields(l registry.Layer) []layerField {
	v := reflect.ValueOf(l)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	docs := map[string]string{}
	if v.Type().PkgPath() == builtinLayers {
		docs = layerFieldDocs[v.Type().Name()]
	}
	var fields []layerField
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		key, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if !sf.IsExported() || key == "" || key == "-" {
			continue
		}
		fv := v.Field(i)
		f := layerField{key: key, kind: yamlKind(sf.Type), def: yamlValue(fv), meaning: docs[key]}
		f.size = fv.CanInt() && fv.IsZero()
		fields = append(fields, f)
	}
	return fields
}

// builtinLayers is the package of the layers layer_docs.go describes.
const builtinLayers = "github.com/attnrun/attnrun/layers"

// yamlKind names a field's type as a config writer sees it.
func yamlKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "int"
	case reflect.Float64, reflect.Float32:
		return "float"
	case reflect.Bool:
		return "bool"
	case reflect.String:
		return "string"
	case reflect.Slice:
		return "list of " + yamlKind(t.Elem())
	case reflect.Map:
		return "map"
	}
	return t.Name()
}

// yamlValue writes a default as YAML would, "-" for an empty one.
func yamlValue(v reflect.Value) string {
	if v.IsZero() && (v.Kind() == reflect.String || v.Kind() == reflect.Slice || v.Kind() == reflect.Map || v.Kind() == reflect.Struct || v.Kind() == reflect.Pointer) {
		return "-"
	}
	out, err := yaml.Marshal(v.Interface())
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%s takes no arguments, got %q", cmd.Name(), args)}
	}
	return nil
}

// oneArg requires exactly one positional argument, named in the error.
func oneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return usageError{fmt.Errorf("%s needs one argument, %s (attnrun %s --help shows examples)", cmd.Name(), what, cmd.Name())}
		case len(args) > 1:
			return usageError{fmt.Errorf("%s takes one argument, %s (got %d: %s)%s", cmd.Name(), what, len(args), strings.Join(args, " "), optionalValueHint(cmd, args))}
		}
		return nil
	}
}

// optionalValueHint explains an extra argument that is the value of a
// flag whose value is optional (--incremental 2): such a flag takes its
// value only after '=', so the value became an argument.
func optionalValueHint(cmd *cobra.Command, args []string) string {
	var hint string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.NoOptDefVal == "" || f.Value.String() != f.NoOptDefVal || hint != "" {
			return
		}
		for _, a := range args[1:] {
			if _, err := strconv.Atoi(a); err == nil {
				hint = fmt.Sprintf("; --%s takes its value after '=': --%s=%s", f.Name, f.Name, a)
				return
			}
		}
	})
	return hint
}

// maxOneArg allows no positional argument or one, named in the error.
func maxOneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 1 {
			return usageError{fmt.Errorf("%s takes at most one argument, %s (got %d: %s)", cmd.Name(), what, len(args), strings.Join(args, " "))}
		}
		return nil
	}
}
